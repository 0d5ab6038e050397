// Package web serves the dashboard: server-rendered html/template pages and
// embedded static assets (one stylesheet, one small script, no build step).
//
// Pages only read, through the services (Services), as the signed-in
// person's actor: what each person sees is decided there. The sandbox pages
// show the connector's own view of its resources (mcpgate.ResourceService),
// so nothing here names a connector's tool; what the pages say of a
// connector (its name, how to connect it, its demo mode, its guardrail
// settings) is the connector's own description (mcpgate.ConnectorInfo), so
// nothing here names an upstream either. Every write goes from the page's
// script to the JSON API under /api/v1 with the session cookie and the
// X-CSRF-Token header.
//
// web imports only the mcpgate package, chi and the standard library. The
// logged-in user comes from the request context (mcpgate.UserFromContext),
// where the API's session middleware puts it.
//
// Imports from this module: mcpgate.
package web
