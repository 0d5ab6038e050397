// Package api serves the gateway's HTTP surface: the JSON API under /api/v1
// (accounts, workspaces, members, invitations, credentials, MCP keys, tool
// policy, audit log), dashboard sessions and CSRF, the operational probes, and
// the root router that mounts the MCP endpoint and the dashboard, which cmd
// passes in as http.Handlers.
//
// Its handlers translate HTTP to calls of the services (Services)
// and back; who may do what is decided there, not here. Errors become
// statuses through the one table in internal/httpx. It never runs SQL, holds
// key material, or imports mcp, web, vault, internal/service or
// internal/store; the session store is the one small interface it declares.
//
// Imports from this module: internal/httpx, mcpgate.
package api
