// Package mcpgate holds the domain of the gateway: users, workspaces, members,
// connections, MCP keys, tool policies and tool calls; the Actor every action
// is taken as and the Authenticator seam that turns a presented credential
// into one; the services (accounts, workspaces, keys, connections, tools,
// audit, resources) as interfaces, which internal/service implements once and
// the JSON API, the dashboard and the MCP endpoint call; the audit
// vocabulary; the coded errors every layer speaks; and Secret, the type that
// keeps credentials out of logs.
//
// It imports nothing outside the standard library. Every other package depends
// on it; it depends on none of them.
//
// Imports from this module: none.
package mcpgate
