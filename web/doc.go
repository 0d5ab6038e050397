// Package web serves the dashboard: server-rendered html/template pages and
// embedded static assets (one stylesheet, one small script, no build step).
//
// Pages only read. Every write goes from the page's script to the JSON API
// under /api/v1 with the session cookie and the X-CSRF-Token header, so the
// API stays the one place that checks, changes and audits state.
//
// web imports only the mcpgate package, chi and the standard library. It never
// imports the store, the vault, api or mcp: it declares the small Data
// interface it reads through, and cmd/mcpgate passes an adapter. The logged-in
// user comes from the request context (mcpgate.UserFromContext), where the
// API's session middleware puts it.
package web
