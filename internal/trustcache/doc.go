// Package trustcache is the read-through cache behind the gateway's
// credential lookups (MCP keys, OAuth access tokens, sealed connector
// credentials) and workspaces' tool policies, and the one place that
// applies the trust rules to their entries: an entry is used as it is while
// the Trust calls it fresh and reloaded otherwise; when the reload cannot
// reach the database, the entry known before stands in while the Trust
// still calls it stale. A not-found answer is never covered by a stale entry
// (a deleted credential is gone at once), and an invalidation that overlaps
// a load keeps what that load read out of the cache.
//
// It owns no policy of its own: the Trust (service's cacheTrust) decides
// the durations. It imports only the standard library and the root package
// (for error codes).
//
// Imports from this module: mcpgate.
package trustcache
