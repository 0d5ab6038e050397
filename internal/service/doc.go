// Package service implements the gateway's services (mcpgate.AccountService,
// WorkspaceService, KeyService, ConnectionService, ToolService, AuditService,
// ResourceService, ApprovalService and GuardrailService) and the MCP key
// Authenticator on the store, the vault and the connector registry. It is
// where the rules live: who may see and change what, which calls a
// workspace's policy and a key's scope allow, which need a confirmation or a
// person's approval (and which do another tool's job, by the connector's
// guard), what the workspace's guardrails refuse, and what the audit log
// records. The JSON API, the dashboard
// and the MCP endpoint call it and decide nothing themselves.
//
// What it caches (MCP keys, tool policies, sealed credentials) is dropped
// across replicas by Invalidate, which the wiring feeds from the store's
// LISTEN/NOTIFY, and kept no longer than a TTL in any case. No database
// query runs on a tool call whose key, policy and credential are cached.
//
// It imports mcpgate, connectors, internal/store, internal/password and
// vault; never api, web or mcp.
package service
