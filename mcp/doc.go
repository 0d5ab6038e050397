// Package mcp is the gateway's MCP endpoint. It reads the credential a
// request presents (the connector URL's path, an Authorization bearer
// token, X-API-Key: auth.go, the only HTTP parsing of credentials), asks
// each configured mcpgate.Authenticator (internal/auth's MCP keys and OAuth
// access tokens, which never see the request) who is calling, rate-limits
// per credential, and serves the official go-sdk's streamable HTTP handler
// in stateless mode, so any replica answers any request.
//
// It decides nothing itself: the tool service says which tools a caller may
// see (a ToolSet, on which the built go-sdk server is cached until the
// workspace's policy changes), runs every call under the policy, and says
// when a call needs confirmation or a person's approval. This package adds
// only the MCP side: for a confirmation, a signed, single-use token for the
// two-step flow, or a form input request for 2026-07-28 clients; for an
// approval, words for the model with the dashboard URL and approval_id, or a
// URL-mode input request for 2026-07-28 clients that declare it; where the
// workspace sets an approval wait, the call first holds open for the
// decision (approval_wait.go), with progress notifications, and returns the
// real result in the same call once a person approved it. Server
// instructions and prompts come from the connectors.
//
// Each upstream server of a workspace has an endpoint of its own
// (ServerHandler: /mcp/<server>, /c/<key>/mcp/<server>), admitted as /mcp
// is, that serves that server alone under its own names: its tools through
// the tool service under their exposed names, and its prompts, resources,
// templates, completions and log level relayed through the server endpoint
// service, results passed through unchanged (serverendpoint.go). At the
// 2025 protocols every initialize there gets a sealed session id carrying
// the client's capabilities (clientsession.go), and the upstream's
// requests to the client during a tool call (sampling, elicitation,
// roots) are written on the call's SSE stream under an unguessable id; the
// client's answer, a POST of a JSON-RPC response bound to the caller and
// session it was sent to, reaches the waiting call here or, through
// RelayAnswers (the database), on another replica (streamrelay.go). A
// DELETE of the session is answered once every live replica knows of it
// (sessionend.go), and a resources/subscribe or unsubscribe is made on the
// replica holding the session's standalone stream, carried there through
// StreamOps (streamops.go, subscriptions.go).
//
// Tools list changes are pushed (listen.go): a client holding the 2025
// protocols' standalone SSE stream, or a 2026-07-28 subscriptions/listen,
// on either endpoint, is sent notifications/tools/list_changed when its own
// tools/list answer changes. The wiring calls CatalogChanged for every
// change any replica makes; the streams are bounded per credential and per
// replica, and end with their credential and at a stop.
//
// Two HTTP answers are its own. A read-only OAuth grant calling a tool that
// changes things gets 403 insufficient_scope naming the scope it needs (MCP
// step-up), and a 401 on a connector URL, or under a loopback name other
// than PUBLIC_URL's, carries no OAuth hint. Sessions of a version before
// 2026-07-28 get list results without that version's fields and its
// resource-not-found code (versioned.go): go-sdk writes them for every one.
//
// Its token buckets (per credential, person and workspace, each shared out
// among the replicas, and per address for failed authentications) are
// internal/limiter's; which limit applies, and the refusal's words and
// audit, are here (limits.go, keylimit.go).
//
// It imports mcpgate, connectors, internal/httpx, internal/limiter and the
// go-sdk; never internal/store, internal/service, vault, api or web.
//
// Imports from this module: connectors, internal/httpx, internal/limiter, mcpgate.
package mcp
