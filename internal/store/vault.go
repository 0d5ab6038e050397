package store

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate/vault"
)

// VaultKeys returns the database as a vault.KeyStore.
func (db *DB) VaultKeys() vault.KeyStore { return vaultKeys{db} }

// vaultKeys implements vault.KeyStore over the vault_keys and vault_check
// tables. Every write first locks the one check row, which serialises key
// changes across replicas (see the KeyStore contract).
type vaultKeys struct{ db *DB }

func (v vaultKeys) Load(ctx context.Context) (check []byte, keys []vault.WrappedKey, err error) {
	err = pgx.BeginTxFunc(ctx, v.db.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT value FROM vault_check`).Scan(&check); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT term, wrapped, created_at FROM vault_keys ORDER BY term`)
		if err != nil {
			return err
		}
		keys, err = pgx.CollectRows(rows, scanWrappedKey)
		return err
	})
	return check, keys, mapError(err, "")
}

func scanWrappedKey(r pgx.CollectableRow) (vault.WrappedKey, error) {
	var k vault.WrappedKey
	var term int64
	err := r.Scan(&term, &k.Wrapped, &k.CreatedAt)
	k.Term = uint32(term)
	return k, err
}

func (v vaultKeys) Init(ctx context.Context, check []byte, first vault.WrappedKey) error {
	err := v.db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO vault_check (id, value) VALUES (true, $1) ON CONFLICT DO NOTHING`, check)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return vault.ErrCheckExists
		}
		_, err = tx.Exec(ctx, `INSERT INTO vault_keys (term, wrapped, created_at) VALUES ($1, $2, $3)`,
			int64(first.Term), first.Wrapped, createdAt(first.CreatedAt))
		return err
	})
	return passVault(err)
}

// lockCheck locks the check row and reports whether it equals want.
func lockCheck(ctx context.Context, tx pgx.Tx, want []byte) error {
	var stored []byte
	if err := tx.QueryRow(ctx, `SELECT value FROM vault_check FOR UPDATE`).Scan(&stored); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return vault.ErrStale
		}
		return err
	}
	if !bytes.Equal(stored, want) {
		return vault.ErrStale
	}
	return nil
}

func (v vaultKeys) InsertKey(ctx context.Context, check []byte, key vault.WrappedKey) error {
	err := v.db.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockCheck(ctx, tx, check); err != nil {
			return err
		}
		var higher bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM vault_keys WHERE term >= $1)`, int64(key.Term)).Scan(&higher); err != nil {
			return err
		}
		if higher {
			return vault.ErrTermExists
		}
		_, err := tx.Exec(ctx, `INSERT INTO vault_keys (term, wrapped, created_at) VALUES ($1, $2, $3)`,
			int64(key.Term), key.Wrapped, createdAt(key.CreatedAt))
		return err
	})
	return passVault(err)
}

func (v vaultKeys) ReplaceWrappedKeys(ctx context.Context, oldCheck, newCheck []byte, keys []vault.WrappedKey) error {
	err := v.db.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockCheck(ctx, tx, oldCheck); err != nil {
			return err
		}
		var stored int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM vault_keys`).Scan(&stored); err != nil {
			return err
		}
		if stored != len(keys) {
			return vault.ErrStale
		}
		for _, k := range keys {
			tag, err := tx.Exec(ctx, `UPDATE vault_keys SET wrapped = $2 WHERE term = $1`, int64(k.Term), k.Wrapped)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return vault.ErrStale
			}
		}
		_, err := tx.Exec(ctx, `UPDATE vault_check SET value = $1`, newCheck)
		return err
	})
	return passVault(err)
}

// DeleteVaultTerm deletes an old key term once no sealed row (credential or
// TOTP secret) uses it. The
// vault's policy (never the active term) is checked by the caller with
// Keyring.CanDelete; the row count is re-checked here under lock.
func (db *DB) DeleteVaultTerm(ctx context.Context, term uint32) error {
	return mapError(db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT value FROM vault_check FOR UPDATE`); err != nil {
			return err
		}
		used, err := termInUse(ctx, tx, term)
		if err != nil {
			return err
		}
		if used {
			return vault.ErrTermInUse
		}
		var max int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(term), 0) FROM vault_keys`).Scan(&max); err != nil {
			return err
		}
		if int64(term) >= max {
			return vault.ErrActiveTerm
		}
		tag, err := tx.Exec(ctx, `DELETE FROM vault_keys WHERE term = $1`, int64(term))
		if err == nil && tag.RowsAffected() == 0 {
			return pgx.ErrNoRows
		}
		return err
	}), "no such key term")
}

// passVault keeps vault's sentinels as they are and maps the rest.
func passVault(err error) error {
	for _, s := range []error{vault.ErrCheckExists, vault.ErrStale, vault.ErrTermExists} {
		if errors.Is(err, s) {
			return err
		}
	}
	return mapError(err, "")
}

func createdAt(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}
