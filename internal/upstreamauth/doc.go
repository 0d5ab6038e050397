// Package upstreamauth is the gateway's OAuth 2.1 client side towards
// upstream MCP servers that answer 401 with protected-resource metadata
// (the MCP authorization spec, 2025-11-25): it finds the server's
// protected-resource metadata (RFC 9728) from the WWW-Authenticate
// challenge or the well-known URIs, the authorization server's metadata
// (RFC 8414, then OpenID Connect discovery, in the spec's order), registers
// the gateway (a client ID metadata document when the authorization server
// supports them and the gateway's PUBLIC_URL is https, else Dynamic Client
// Registration, RFC 7591), builds the authorization request (code flow,
// PKCE S256, state, the resource indicator of RFC 8707), and exchanges,
// refreshes and revokes (RFC 7009) tokens.
//
// Every request goes through the upstream hop's network (upstream.Network:
// https only unless the operator lists private networks, every dial
// checked against the address it reaches, no redirects), each bounded in
// time and in the size of its answer. Nothing here stores anything: the
// server service (internal/service) seals the registration and the tokens
// in the vault, and decides when to refresh.
//
// The metadata and registration types are go-sdk's oauthex ones; the
// fetching is ours, because oauthex's refuses private addresses outright
// (an operator may list them) and follows redirects.
//
// Imports from this module: mcpgate, internal/upstream.
package upstreamauth
