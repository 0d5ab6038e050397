// Package reseal moves stored credentials, and the TOTP secrets of two-factor
// sign-in (every table store lists as sealed), to the vault's active key term
// after a rotation. Run is the job: `mcpgate vault rotate` calls it after
// adding a term, and the gateway calls it from Watch, its background loop,
// at start-up and whenever the keyring's active term changes (rotated here by
// Keyring.Maintain, or by another replica and loaded on refresh).
//
// Every replica runs Watch at once; that is safe because each row moves in
// its own short transaction under a row lock taken with SKIP LOCKED
// (store.DB.ResealOld), so the runs share the rows and none waits on
// another. It is resumable because it is idempotent: a row is under its old
// term or its new one, both open, and a run started later finds whatever is
// left. A row that does not open is skipped and reported by id (a
// connection's id, or "totp_factors:<id>"), never
// retried in a loop, so one damaged credential cannot hold up the others.
//
// It imports internal/store and vault, and never sees plaintext: the
// keyring opens and seals inside Keyring.Reseal.
//
// Imports from this module: internal/store, vault.
package reseal
