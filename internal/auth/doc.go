// Package auth verifies the credentials AI clients present to the MCP
// endpoint, an MCP key or an OAuth access token, and returns the
// mcpgate.Actor each names. It owns the caches of what it read (a key with
// the hash of its secret, an access token's grant by the token's hash;
// never a secret), their invalidation when a key, grant or membership
// changes on any replica, and the batched last-used times off the call
// path.
//
// It knows no HTTP. The front door (mcp) reads the credential out of the
// request (the connector URL's path, an Authorization bearer token,
// X-API-Key) into an mcpgate.Presented and asks each authenticator in
// turn; each claims only its own kind, so the order of asking is the one
// rule the front door keeps. Dashboard sessions are not here: they are
// the JSON API's and the dashboard's, and name a person, not a client.
//
// How long a cached entry may be used is the Trust's (the services' rule,
// internal/trustcache applies it), so that keys and tokens follow the same
// revocation and outage guarantees: while the invalidation listener is
// down nothing cached is fresh, and while the database is away an entry
// known before stands in for at most the outage grace.
//
// The credential cache of internal/store is not here, although it too is a
// cache of credentials: it holds the sealed upstream credentials a tool
// call opens with the vault (what the gateway presents to E2B, not what a
// client presents to the gateway), reads them with SQL of its own, and is
// dropped on connection changes. It shares the trust rules through
// internal/trustcache, which is the part the two have in common.
//
// Imports from this module: internal/lastused, internal/store, internal/trustcache, mcpgate.
package auth
