// Package mcp is the gateway's MCP endpoint and the one place where a
// workspace's tools run: it authenticates MCP keys (header or connector URL),
// applies the workspace's tool policy and the key's scope, enforces human
// confirmation, opens the workspace's credential for one call, runs the
// connector's tool, and records the call in the audit log. The dashboard's
// sandbox actions go through the same Gateway.CallTool, so a rule holds for
// every caller.
//
// It serves MCP with the official go-sdk in stateless mode, so any replica
// answers any request. What it caches (keys, policies, built servers) is
// invalidated across replicas by Invalidate, which cmd feeds from Postgres
// LISTEN/NOTIFY.
//
// It imports mcpgate, connectors and the go-sdk; never internal/store, vault,
// api or web. What it needs from the database is the Backend interface.
package mcp
