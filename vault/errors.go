package vault

import "errors"

// Errors returned by Seal, Open and friends. They deliberately never say which
// check failed (a bad tag, a wrong AAD and a wrong key all read the same), so
// an error message cannot be used as an oracle.
var (
	// ErrMalformed means the bytes are not a ciphertext this package wrote:
	// too short or an unknown format version.
	ErrMalformed = errors.New("vault: malformed ciphertext")
	// ErrUnknownTerm means the ciphertext names a key term this keyring does
	// not hold (deleted, never created, or created elsewhere and not loaded).
	ErrUnknownTerm = errors.New("vault: unknown key term")
	// ErrDecrypt means authentication failed: the ciphertext was altered,
	// or it belongs to another row (its additional data differs).
	ErrDecrypt = errors.New("vault: cannot decrypt")
	// ErrWrongRootKey means the root key does not open the check value stored
	// with the data keys: it is not the key this database was sealed with,
	// or the database has since been rekeyed.
	ErrWrongRootKey = errors.New("vault: wrong root key: it does not open the check value stored with the data keys")
	// ErrInvalidRootKey means a root key is not 32 random bytes.
	ErrInvalidRootKey = errors.New("vault: invalid root key: want 32 random bytes, base64-encoded")
	// ErrTermExhausted means the active term has sealed so many values that
	// another random nonce would no longer be safely unique. Seal refuses until
	// a rotation installs a new term; Maintain normally rotates long before.
	ErrTermExhausted = errors.New("vault: active key term reached its seal limit; rotate the keyring")
	// ErrActiveTerm means the active term was asked to be deleted.
	ErrActiveTerm = errors.New("vault: the active key term cannot be deleted")
	// ErrTermInUse means a term still seals rows, or was replaced too recently
	// for every replica to have stopped sealing with it.
	ErrTermInUse = errors.New("vault: key term still in use")
)

// Errors a KeyStore returns to report a failed precondition. The store maps
// its own errors (for example a unique violation) to these; vault matches them
// with errors.Is.
var (
	// ErrTermExists: InsertKey found a key whose term is greater than or equal
	// to the one being inserted. Another replica rotated first.
	ErrTermExists = errors.New("vault: key term already exists")
	// ErrCheckExists: Init found a check value already stored. Another replica
	// initialised the store first.
	ErrCheckExists = errors.New("vault: check value already exists")
	// ErrStale: the check value or the set of terms differs from what the
	// caller read. The root key was changed, or keys were added or deleted,
	// concurrently.
	ErrStale = errors.New("vault: key store changed concurrently")
)
