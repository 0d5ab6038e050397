package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
)

const keyNotFound = "key not found"

// CreateKey stores a new MCP key record with the SHA-256 of its secret. The
// owner must be a member of the workspace (enforced by a foreign key).
func (db *DB) CreateKey(ctx context.Context, k *mcpgate.APIKey, secretHash []byte) error {
	return mapError(insertKey(ctx, db.Pool, k, secretHash), wsNotFound)
}

func insertKey(ctx context.Context, q rowQuerier, k *mcpgate.APIKey, secretHash []byte) error {
	return q.QueryRow(ctx, `
		INSERT INTO api_keys (id, workspace_id, user_id, name, scope, secret_hash, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING created_at`,
		k.ID, k.WorkspaceID, k.UserID, k.Name, k.Scope, secretHash, k.ExpiresAt).Scan(&k.CreatedAt)
}

const keyColumns = `k.id, k.workspace_id, k.user_id, u.email, k.name, k.scope, k.created_at, k.expires_at, k.last_used_at, k.revoked_at`

func scanKey(r pgx.Row, k *mcpgate.APIKey) error {
	return r.Scan(&k.ID, &k.WorkspaceID, &k.UserID, &k.OwnerEmail, &k.Name, &k.Scope, &k.CreatedAt, &k.ExpiresAt, &k.LastUsedAt, &k.RevokedAt)
}

// ListKeys lists a workspace's keys, newest first; with userID set, only
// that user's.
func (db *DB) ListKeys(ctx context.Context, workspaceID, userID string) ([]mcpgate.APIKey, error) {
	return listRows(ctx, db, scanKey, `
		SELECT `+keyColumns+` FROM api_keys k JOIN users u ON u.id = k.user_id
		WHERE k.workspace_id = $1 AND ($2 = '' OR k.user_id::text = $2)
		ORDER BY k.created_at DESC`, workspaceID, userID)
}

// FindKey returns one key of a workspace.
func (db *DB) FindKey(ctx context.Context, workspaceID, id string) (*mcpgate.APIKey, error) {
	var k mcpgate.APIKey
	err := scanKey(db.Pool.QueryRow(ctx, `
		SELECT `+keyColumns+` FROM api_keys k JOIN users u ON u.id = k.user_id
		WHERE k.workspace_id = $1 AND k.id = $2`, workspaceID, id), &k)
	if err != nil {
		return nil, mapError(err, keyNotFound)
	}
	return &k, nil
}

// RevokeKey revokes a key of a workspace at once; every replica drops it from
// its cache when the transaction commits.
func (db *DB) RevokeKey(ctx context.Context, workspaceID, id string) error {
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE workspace_id = $1 AND id = $2 AND revoked_at IS NULL`, workspaceID, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return pgx.ErrNoRows
		}
		return notifyKeys(ctx, tx, workspaceID)
	})
	return mapError(err, keyNotFound)
}

// FindKeyForAuth returns a key by its public id with the hash of its secret,
// whatever its state; the caller compares the hash and checks revocation and
// expiry.
func (db *DB) FindKeyForAuth(ctx context.Context, id string) (*mcpgate.APIKey, []byte, error) {
	var k mcpgate.APIKey
	var hash []byte
	err := db.Pool.QueryRow(ctx, `
		SELECT `+keyColumns+`, k.secret_hash FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.id = $1`, id).
		Scan(&k.ID, &k.WorkspaceID, &k.UserID, &k.OwnerEmail, &k.Name, &k.Scope,
			&k.CreatedAt, &k.ExpiresAt, &k.LastUsedAt, &k.RevokedAt, &hash)
	if err != nil {
		return nil, nil, mapError(err, keyNotFound)
	}
	return &k, hash, nil
}

// TouchKeys records last use for a batch of keys. Callers batch it so the
// call path never waits on this write.
func (db *DB) TouchKeys(ctx context.Context, used map[string]time.Time) error {
	return db.touchLastUsed(ctx, "api_keys", "text", used)
}
