// Package mcpgate holds the domain of the gateway: users, workspaces, members,
// connections, MCP keys, tool policies and tool calls, the coded errors every
// layer speaks, and Secret, the type that keeps credentials out of logs.
//
// It imports nothing outside the standard library. Every other package depends
// on it; it depends on none of them.
package mcpgate
