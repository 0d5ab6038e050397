// Package oauth is the gateway's OAuth 2.1 authorization server for its own
// MCP endpoints, /mcp and each upstream server's /mcp/<server> (the MCP
// authorization spec of 2025-11-25 and 2026-07-28):
// protected-resource metadata (RFC 9728) and the 401 challenge that points
// to it, authorization-server metadata (RFC 8414), clients by Dynamic Client
// Registration (RFC 7591) and by client ID metadata documents, the
// authorization endpoint with the dashboard's sign-in and a consent page,
// the token endpoint (authorization code with PKCE S256 only, RFC 7636;
// rotating refresh tokens with reuse detection; the resource parameter of
// RFC 8707 bound into every token) and revocation (RFC 7009). The tokens it
// issues are verified on the MCP endpoint by internal/auth's Tokens, which
// takes this server's resource check (OwnsResource) and is told at once of
// a revocation made here (Options.Tokens); the endpoints serve a token only
// where its grant's resource says (TokenFor).
//
// # Why our own server and not a library
//
// The two established Go servers were weighed. ory/fosite is a toolkit of
// about a dozen storage interfaces (sessions for codes, PKCE, access and
// refresh tokens, each keyed by request id) built around its own request and
// session types and HMAC-signed tokens; zitadel/oidc's op is an OpenID
// Provider whose Storage interface expects signing keys, ID tokens, JWT
// profiles and a login UI of its own. This gateway needs a narrow subset
// that neither puts at the centre: public clients only, a few resources, a
// consent that picks a workspace and an access level, opaque tokens that
// are SHA-256 hashes in Postgres like MCP keys (so one revocation path and
// one LISTEN/NOTIFY cache invalidation cover keys and grants), client ID
// metadata documents (in neither library), and RFC 8707 audience binding
// (absent from op, partial in fosite). Adapting either would mean more code
// than the protocol itself, spread over adapters whose security depends on
// how the library calls them, plus JWT/JOSE machinery the gateway never
// uses. So the protocol is written here, small and explicit, on go-sdk's
// oauthex types (the same types the MCP clients' side uses), and the tests
// drive it with independent clients: golang.org/x/oauth2 with its PKCE
// helpers and go-sdk's client-side AuthorizationCodeHandler.
//
// Every token is bound to the issuer and resource of its grant: another
// gateway on the same database (another PUBLIC_URL) can neither use, refresh,
// redeem nor revoke it. A malformed authorization request is shown on the
// gateway's page and never redirected to the client (RFC 9700 §4.11.2), and
// client ID metadata documents are fetched only for a signed-in person,
// limited per address, and stored only once consented.
//
// What it deliberately does not do: confidential clients, implicit or
// password grants, plain PKCE, JWT access tokens, token introspection.
//
// Secrets (codes, tokens, verifiers) never appear in logs, errors or
// responses other than the token endpoint's; only their hashes are stored.
//
// It reaches the database only through Store, the methods it calls, which
// the wiring fills with the *store.DB; it imports internal/store for the
// records those methods pass (codes, token pairs, reuse errors).
//
// Nothing imports it but the wiring (internal/app).
//
// Imports from this module: internal/auth, internal/httpx, internal/limiter, internal/netguard, internal/store,
// internal/upstream, mcpgate.
package oauth
