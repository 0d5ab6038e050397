// Package store owns the PostgreSQL pool and every SQL statement of the
// gateway. Each method that touches a workspace's rows takes the workspace id
// as an explicit argument and filters on it, so one workspace can never read
// or change another's data; a row of another workspace answers ENotFound.
//
// It also orders what must not interleave across replicas, with
// transaction-scoped advisory locks: the Locker for work that spans an
// upstream call (lock.go), and counted limits checked and spent in one
// transaction (caps.go).
//
// It maps database errors to mcpgate codes and makes no policy decisions:
// who may do what is decided by its caller, internal/service. It imports vault
// only for the KeyStore contract it implements (vault.go) and the ciphertext
// format (a header's term, a credential's additional data), never its keys,
// and internal/trustcache for the credential cache's trust rules; it must not
// import api, mcp or web.
//
// Imports from this module: internal/trustcache, mcpgate, migrations, vault.
package store
