// Package vault owns the credential keyring: the root key, the data keys and
// their terms, AES-256-GCM Seal and Open, rotation, re-sealing and rekeying.
//
// Two tiers, as in HashiCorp Vault's keyring. The root key (ENCRYPTION_KEY,
// 32 random bytes) never leaves process memory; it wraps data keys, which are
// stored through the KeyStore interface that this package declares and the
// Postgres store implements. Each data key has a term (1, 2, 3, …). The
// highest term is active and seals; every installed term opens. A check
// value sealed under the root key is stored beside the data keys, so a wrong
// root key is refused at Open instead of decrypting rows into garbage.
//
// A Keyring holds an immutable snapshot of its data keys behind an
// atomic.Pointer: Seal and Open never take a lock and never do I/O. Refresh,
// Rotate and Rekey talk to the store, build a new snapshot and swap it in.
//
// vault knows nothing of HTTP, workspaces, table names or configuration. It
// imports only the standard library; it must not import mcpgate, pgx or any
// other package of this module. It is the only package that imports
// crypto/aes and crypto/cipher.
//
// Imports from this module: none.
package vault
