package vault

import (
	"context"
	"time"
)

// WrappedKey is a data key as it is stored: encrypted under the root key with
// AES-256-GCM and the additional data "vault-key|<term>", so a wrapped key
// moved to another term does not unwrap.
type WrappedKey struct {
	// Term numbers the key, from 1. Terms only grow and are never reused.
	Term uint32
	// Wrapped is version 0x01 || 96-bit nonce || GCM(key) || tag: 61 bytes.
	Wrapped []byte
	// CreatedAt is set by vault when the term is created; the store keeps it
	// as given and never changes it (a rekey rewrites only Wrapped).
	CreatedAt time.Time
}

// KeyStore persists the wrapped data keys and the root-key check value. vault
// declares it and the Postgres store implements it. Every method is one short
// transaction. Implementations must be safe for concurrent use, and several
// processes (replicas) may share one store.
//
// Two invariants are the store's job, because only it can enforce them across
// replicas:
//
//   - Terms strictly increase: a key is inserted only above every existing
//     term, so the highest term (the active one) is well defined everywhere.
//   - A key is written only under the root key that wrote the current check
//     value: InsertKey and ReplaceWrappedKeys compare the stored check value
//     with the caller's, so a replica still running with a replaced root key
//     cannot add a key that the new root key could not unwrap.
//
// Both hold if every write to the key tables first locks the single check row
// (SELECT … FOR UPDATE). Stored bytes are opaque to the store: it compares
// them for equality and never interprets them.
type KeyStore interface {
	// Load returns the check value and every stored data key, read from one
	// consistent snapshot (for example one REPEATABLE READ transaction), in
	// any order. check is nil when none is stored (a fresh database). A
	// store with no keys returns a nil or empty slice and no error.
	Load(ctx context.Context) (check []byte, keys []WrappedKey, err error)

	// Init stores the check value and the first data key in one transaction,
	// on a fresh database. If a check value is already stored it writes
	// nothing and returns ErrCheckExists.
	Init(ctx context.Context, check []byte, first WrappedKey) error

	// InsertKey adds one data key in one transaction. It writes nothing and
	// returns ErrStale if the stored check value is not byte-for-byte equal to
	// check (the root key changed), and ErrTermExists if a key with a term
	// greater than or equal to key.Term exists.
	InsertKey(ctx context.Context, check []byte, key WrappedKey) error

	// ReplaceWrappedKeys rekeys in one transaction: it sets Wrapped for each
	// of keys (matched by Term; CreatedAt is left as stored) and replaces the
	// check value oldCheck with newCheck. It writes nothing and returns
	// ErrStale if the stored check value is not byte-for-byte equal to
	// oldCheck, or if the set of stored terms is not exactly the set of terms
	// in keys (a key was added or deleted since the caller's Load).
	ReplaceWrappedKeys(ctx context.Context, oldCheck, newCheck []byte, keys []WrappedKey) error
}
