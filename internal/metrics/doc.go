// Package metrics is the gateway's Prometheus registry: it implements
// mcp.Metrics (tool calls, gateway and upstream latency, upstream errors, auth
// failures, rate-limited calls) and collects the audit queue depth, the
// database pool's statistics, build information and the Go runtime's own
// metrics (including GOGC and the memory limit) at scrape time.
//
// Labels are low-cardinality by construction: tool names, outcomes, auth
// failure reasons and HTTP statuses. Key ids, workspace ids and sandbox ids
// never become labels.
//
// It imports mcpgate, pgxpool (for pool statistics) and client_golang; it
// never imports mcp, api or internal/store: cmd wires it.
//
// Imports from this module: mcpgate.
package metrics
