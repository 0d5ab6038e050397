package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/vault"
)

// Sealer seals and opens credentials; *vault.Keyring satisfies it. The store
// never sees key material, only this interface.
type Sealer interface {
	Seal(plaintext, aad []byte) ([]byte, error)
	OpenContext(ctx context.Context, ciphertext, aad []byte) ([]byte, error)
	Reseal(ctx context.Context, ciphertext, aad []byte) ([]byte, bool, error)
	ActiveTerm() uint32
}

// seal seals plaintext under aad and returns the ciphertext with its key
// term, the two columns every sealed row keeps (the term lets the rekey
// job find what an old key sealed); what names the secret in errors.
func seal(sealer Sealer, plaintext, aad []byte, what string) ([]byte, int64, error) {
	ct, err := sealer.Seal(plaintext, aad)
	if err != nil {
		return nil, 0, fmt.Errorf("seal %s: %w", what, err)
	}
	term, err := vault.TermOf(ct)
	if err != nil {
		return nil, 0, fmt.Errorf("seal %s: %w", what, err)
	}
	return ct, int64(term), nil
}

const connNotFound = "no credential is stored for this connector"

// PutConnection seals and stores a workspace's credential for a connector,
// replacing any previous one in the same transaction: the old ciphertext is
// gone when it commits.
func (db *DB) PutConnection(ctx context.Context, sealer Sealer, c *mcpgate.Connection, credential mcpgate.Secret) error {
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		// The row id is part of the additional data, so it is chosen first
		// (kept when replacing) and the ciphertext sealed for it.
		var id string
		err := tx.QueryRow(ctx, `SELECT id FROM connections WHERE workspace_id = $1 AND connector = $2 FOR UPDATE`,
			c.WorkspaceID, c.Connector).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			err = tx.QueryRow(ctx, `SELECT gen_random_uuid()::text`).Scan(&id)
		}
		if err != nil {
			return err
		}
		ct, term, err := seal(sealer, []byte(credential.Reveal()), vault.CredentialAAD(c.WorkspaceID, id), "credential")
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `
			INSERT INTO connections (id, workspace_id, connector, ciphertext, key_term, key_hint, verified_at, updated_by, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now())
			ON CONFLICT (workspace_id, connector) DO UPDATE SET
				ciphertext = EXCLUDED.ciphertext, key_term = EXCLUDED.key_term, key_hint = EXCLUDED.key_hint,
				verified_at = EXCLUDED.verified_at, updated_by = EXCLUDED.updated_by, updated_at = now(),
				last_auth_failure_at = NULL
			RETURNING updated_at`,
			id, c.WorkspaceID, c.Connector, ct, term, c.KeyHint, c.VerifiedAt, nullIfEmpty(c.UpdatedBy)).Scan(&c.UpdatedAt)
		if err != nil {
			return err
		}
		return notify(ctx, tx, InvalidateConn, c.WorkspaceID)
	})
	return mapError(err, wsNotFound)
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// FindConnection returns what may be shown of a workspace's credential.
func (db *DB) FindConnection(ctx context.Context, workspaceID, connector string) (*mcpgate.Connection, error) {
	c := mcpgate.Connection{WorkspaceID: workspaceID, Connector: connector}
	err := db.Pool.QueryRow(ctx, `
		SELECT c.key_hint, c.verified_at, coalesce(u.email, ''), c.updated_at, c.last_auth_failure_at
		FROM connections c LEFT JOIN users u ON u.id = c.updated_by
		WHERE c.workspace_id = $1 AND c.connector = $2`, workspaceID, connector).
		Scan(&c.KeyHint, &c.VerifiedAt, &c.UpdatedBy, &c.UpdatedAt, &c.LastAuthFail)
	if err != nil {
		return nil, mapError(err, connNotFound)
	}
	return &c, nil
}

// DeleteConnection removes a workspace's credential.
func (db *DB) DeleteConnection(ctx context.Context, workspaceID, connector string) error {
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM connections WHERE workspace_id = $1 AND connector = $2`, workspaceID, connector)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return pgx.ErrNoRows
		}
		return notify(ctx, tx, InvalidateConn, workspaceID)
	})
	return mapError(err, connNotFound)
}

// OpenCredential returns a workspace's credential in plain text for one
// call. The ciphertext is read first and the connection released before it
// is opened, so no database connection is held while it is used.
func (db *DB) OpenCredential(ctx context.Context, sealer Sealer, workspaceID, connector string) (mcpgate.Secret, error) {
	id, ct, err := db.sealedCredential(ctx, workspaceID, connector)
	if err != nil {
		return "", err
	}
	pt, err := sealer.OpenContext(ctx, ct, vault.CredentialAAD(workspaceID, id))
	if err != nil {
		return "", fmt.Errorf("open credential: %w", err)
	}
	return mcpgate.Secret(pt), nil
}

// MarkAuthFailure records that the upstream rejected a workspace's stored
// credential, so the dashboard can say so.
func (db *DB) MarkAuthFailure(ctx context.Context, workspaceID, connector string) error {
	_, err := db.Pool.Exec(ctx, `UPDATE connections SET last_auth_failure_at = now() WHERE workspace_id = $1 AND connector = $2`,
		workspaceID, connector)
	return mapError(err, connNotFound)
}

// TermUsage is how many stored secrets (credentials and TOTP secrets) each
// key term still seals.
type TermUsage struct {
	Term uint32
	Rows int64
}

// sealedTable is a table whose rows hold a vault ciphertext, with a key_term
// column mirroring its header. Everything that follows a rotation (the
// re-seal job, `vault status`, `vault prune`) goes through sealedTables, so a
// new kind of sealed row is covered by adding it here.
type sealedTable struct {
	table  string
	column string // the ciphertext
	owner  string // the column bound into the additional data with the row id
	aad    func(owner, id string) []byte
	// ref prefixes a row's id where the re-seal job reports it; credentials
	// are reported by their bare connection id, as before TOTP existed.
	ref string
}

var sealedTables = []sealedTable{
	{table: "connections", column: "ciphertext", owner: "workspace_id", aad: vault.CredentialAAD},
	{table: "totp_factors", column: "secret", owner: "user_id", aad: vault.TOTPAAD, ref: "totp_factors:"},
	{table: "webhook_secrets", column: "secret", owner: "workspace_id", aad: vault.WebhookSecretAAD, ref: "webhook_secrets:"},
	{table: "upstream_server_headers", column: "sealed", owner: "workspace_id", aad: vault.UpstreamHeadersAAD, ref: "upstream_server_headers:"},
	{table: "upstream_oauth_grants", column: "sealed", owner: "aad_owner", aad: vault.UpstreamGrantAAD, ref: "upstream_oauth_grants:"},
	{table: "upstream_oauth_client_secrets", column: "sealed", owner: "workspace_id", aad: vault.UpstreamClientSecretAAD, ref: "upstream_oauth_client_secrets:"},
}

// sealedUnion selects key_term from every sealed table.
func sealedUnion() string {
	parts := make([]string, len(sealedTables))
	for i, t := range sealedTables {
		parts[i] = "SELECT key_term FROM " + t.table
	}
	return strings.Join(parts, " UNION ALL ")
}

// SealedTermUsage counts stored secrets per key term: E2B credentials and
// TOTP secrets together.
func (db *DB) SealedTermUsage(ctx context.Context) ([]TermUsage, error) {
	return listRows(ctx, db, func(r pgx.Row, t *TermUsage) error {
		var term int64
		err := r.Scan(&term, &t.Rows)
		t.Term = uint32(term)
		return err
	}, `SELECT key_term, count(*) FROM (`+sealedUnion()+`) s GROUP BY key_term ORDER BY key_term`)
}

// CountSealedBelow counts the secrets sealed under a term older than term:
// what a re-seal to term has left to do.
func (db *DB) CountSealedBelow(ctx context.Context, term uint32) (int64, error) {
	var n int64
	err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM (`+sealedUnion()+`) s WHERE key_term < $1`, int64(term)).Scan(&n)
	return n, mapError(err, "")
}

// termInUse reports whether any sealed row uses term (under the caller's
// lock on the vault check row).
func termInUse(ctx context.Context, tx pgx.Tx, term uint32) (bool, error) {
	var used bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM (`+sealedUnion()+`) s WHERE key_term = $1)`, int64(term)).Scan(&used)
	return used, err
}

// ResealOld re-seals up to batch secrets (credentials, then TOTP secrets)
// still under a term older than the sealer's active term, each row in its own
// short transaction (locked with SKIP LOCKED, so two runs share the work). It
// returns how many rows it moved (0: none left but those in skip) and the
// references of rows that could not be opened (a connection's id, or
// "totp_factors:<id>"): they are left as they are and must be passed in skip
// on the next call, so that one damaged row never blocks the others. A crash
// at any point leaves every row either under its old term or its new one, and
// both open.
func (db *DB) ResealOld(ctx context.Context, sealer Sealer, batch int, skip []string) (moved int, failed []string, err error) {
	active := int64(sealer.ActiveTerm())
	skip = append([]string{}, skip...)
	table := 0
	for moved+len(failed) < batch && table < len(sealedTables) {
		ref, done, err := db.resealOne(ctx, sealer, sealedTables[table], active, skip)
		switch {
		case err != nil && ref != "":
			failed = append(failed, ref)
			skip = append(skip, ref)
		case err != nil:
			return moved, failed, err
		case done:
			table++
		default:
			moved++
		}
	}
	return moved, failed, nil
}

// resealOne moves one row of t. An error with a reference is that row's own
// failure (it does not open); an error without one is the database's.
func (db *DB) resealOne(ctx context.Context, sealer Sealer, t sealedTable, active int64, skip []string) (ref string, none bool, err error) {
	var rowID string
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		var owner string
		var ct []byte
		err := tx.QueryRow(ctx, `
			SELECT id, `+t.owner+`, `+t.column+` FROM `+t.table+` WHERE key_term < $1 AND NOT ($2 || id::text = ANY($3))
			ORDER BY key_term, id LIMIT 1 FOR UPDATE SKIP LOCKED`, active, t.ref, skip).Scan(&rowID, &owner, &ct)
		if errors.Is(err, pgx.ErrNoRows) {
			none = true
			return nil
		}
		if err != nil {
			return err
		}
		next, _, err := sealer.Reseal(ctx, ct, t.aad(owner, rowID))
		if err != nil {
			return &resealError{err}
		}
		term, err := vault.TermOf(next)
		if err != nil {
			return &resealError{err}
		}
		_, err = tx.Exec(ctx, `UPDATE `+t.table+` SET `+t.column+` = $2, key_term = $3 WHERE id = $1`, rowID, next, int64(term))
		return err
	})
	var re *resealError
	if errors.As(err, &re) {
		return t.ref + rowID, false, fmt.Errorf("reseal %s %s: %w", t.table, rowID, re.err)
	}
	return "", none, mapError(err, "")
}

type resealError struct{ err error }

func (e *resealError) Error() string { return e.err.Error() }
