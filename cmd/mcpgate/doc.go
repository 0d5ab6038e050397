// Command mcpgate is the gateway's one binary: `serve` runs the dashboard,
// JSON API and MCP endpoint; `migrate` applies or rolls back the schema;
// `vault` rotates and rekeys the credential vault; `user` administers
// accounts. This package only reads configuration and wires the other
// packages together; it holds no business logic.
//
// Imports from this module: internal/app, internal/httpx, internal/logctx, internal/mail, internal/netguard,
// internal/oauth, internal/password, internal/pgembed, internal/reseal, internal/service, internal/store, mcp,
// mcpgate, vault.
package main
