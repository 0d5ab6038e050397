// Package api serves the gateway's HTTP surface: the JSON API under /api/v1
// (accounts, workspaces, members, invitations, credentials, MCP keys, tool
// policy, audit log), dashboard sessions and CSRF, the operational probes, and
// the root router that mounts the MCP endpoint and the dashboard, which cmd
// passes in as http.Handlers.
//
// It maps coded errors to statuses in one table (error.go). It never runs
// SQL, holds key material, or imports mcp, web, vault or internal/store: the
// small interfaces it needs are declared here and satisfied in cmd.
package api
