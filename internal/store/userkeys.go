package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// RevokeUserKeys revokes every live MCP key of a user, in every workspace,
// and tells every replica (one notification per workspace), all in one
// transaction. It returns how many keys it revoked. It is for the operator's
// reset-password: the account's keys, unlike one key, are not one
// workspace's business.
func (db *DB) RevokeUserKeys(ctx context.Context, userID string) (int, error) {
	if !isUUID(userID) {
		return 0, nil
	}
	n := 0
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE api_keys SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL
			RETURNING workspace_id::text`, userID)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for rows.Next() {
			var ws string
			if err := rows.Scan(&ws); err != nil {
				rows.Close()
				return err
			}
			n++
			seen[ws] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for ws := range seen {
			if err := notifyKeys(ctx, tx, ws); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, mapError(err, "")
	}
	return n, nil
}
