package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
)

// Purposes of account tokens.
const (
	TokenReset  = "reset"
	TokenVerify = "verify"
	// TokenEmailChange confirms a new address; only then does it replace
	// the old one.
	TokenEmailChange = "email_change"
)

var errTokenSpent = mcpgate.Errorf(mcpgate.EInvalid, "this link has expired or was already used; ask for a new one")

// CreateAccountToken stores the hash of a single-use emailed token.
func (db *DB) CreateAccountToken(ctx context.Context, userID, purpose string, tokenHash []byte, email string, expiresAt time.Time) error {
	_, err := db.Pool.Exec(ctx, `INSERT INTO account_tokens (user_id, purpose, token_hash, email, expires_at) VALUES ($1, $2, $3, $4, $5)`,
		userID, purpose, tokenHash, email, expiresAt)
	return mapError(err, "user not found")
}

// ResetPassword spends a reset token and sets the password of its user in
// one transaction: every session of the user is revoked, and every other
// open reset link of theirs stops working. A spent, expired or unknown token
// is EInvalid.
func (db *DB) ResetPassword(ctx context.Context, tokenHash []byte, passwordHash string) (*mcpgate.User, error) {
	var u mcpgate.User
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var userID string
		err := tx.QueryRow(ctx, `
			UPDATE account_tokens SET used_at = now()
			WHERE token_hash = $1 AND purpose = 'reset' AND used_at IS NULL AND expires_at > now()
			RETURNING user_id`, tokenHash).Scan(&userID)
		if errors.Is(err, pgx.ErrNoRows) {
			return errTokenSpent
		}
		if err != nil {
			return err
		}
		// The link reached the inbox, so the address is proven too.
		err = tx.QueryRow(ctx, `UPDATE users SET password_hash = $2, email_verified_at = COALESCE(email_verified_at, now())
			WHERE id = $1 RETURNING id, email, instance_admin, created_at`,
			userID, passwordHash).Scan(&u.ID, &u.Email, &u.InstanceAdmin, &u.CreatedAt)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE account_tokens SET used_at = now() WHERE user_id = $1 AND purpose = 'reset' AND used_at IS NULL`, userID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE sessions SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL`, userID)
		return err
	})
	if err != nil {
		if mcpgate.ErrorCode(err) == mcpgate.EInvalid {
			return nil, err
		}
		return nil, mapError(err, "user not found")
	}
	return &u, nil
}

// RevokeKeysOfUser revokes every live MCP key the user owns, in every
// workspace, and tells every replica. It returns how many were revoked.
func (db *DB) RevokeKeysOfUser(ctx context.Context, userID string) (int, error) {
	n := 0
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE api_keys SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL RETURNING workspace_id`, userID)
		if err != nil {
			return err
		}
		wss, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		n = len(wss)
		seen := map[string]bool{}
		for _, ws := range wss {
			if !seen[ws] {
				seen[ws] = true
				if err := notifyKeys(ctx, tx, ws); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return n, mapError(err, "user not found")
}

// RevokeGrantsOfUser revokes every live OAuth grant the user holds, in
// every workspace, deleting their tokens, and tells every replica. It
// returns how many were revoked.
func (db *DB) RevokeGrantsOfUser(ctx context.Context, userID string) (int, error) {
	n := 0
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT workspace_id, id FROM oauth_grants WHERE user_id = $1 AND revoked_at IS NULL FOR UPDATE`, userID)
		if err != nil {
			return err
		}
		grants, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
			var g [2]string
			return g, r.Scan(&g[0], &g[1])
		})
		if err != nil {
			return err
		}
		for _, g := range grants {
			if err := revokeGrantTx(ctx, tx, g[0], g[1]); err != nil {
				return err
			}
		}
		n = len(grants)
		return nil
	})
	return n, mapError(err, "user not found")
}

// EmailVerified reports whether the user has proven their address.
func (db *DB) EmailVerified(ctx context.Context, userID string) (bool, error) {
	var ok bool
	err := db.Pool.QueryRow(ctx, `SELECT email_verified_at IS NOT NULL FROM users WHERE id = $1`, userID).Scan(&ok)
	return ok, mapError(err, "user not found")
}

// VerifyEmail spends a verification or email-change token. A verification
// marks the address verified if it is still the user's; an email change
// replaces the user's address with the confirmed one (and spends every other
// pending change). oldEmail is the address it replaced, or "".
func (db *DB) VerifyEmail(ctx context.Context, tokenHash []byte) (u *mcpgate.User, oldEmail string, err error) {
	u = &mcpgate.User{}
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		var userID, email, purpose string
		err := tx.QueryRow(ctx, `
			UPDATE account_tokens SET used_at = now()
			WHERE token_hash = $1 AND purpose IN ('verify', 'email_change') AND used_at IS NULL AND expires_at > now()
			RETURNING user_id, email, purpose`, tokenHash).Scan(&userID, &email, &purpose)
		if errors.Is(err, pgx.ErrNoRows) {
			return errTokenSpent
		}
		if err != nil {
			return err
		}
		if purpose == TokenEmailChange {
			if err := tx.QueryRow(ctx, `SELECT email FROM users WHERE id = $1`, userID).Scan(&oldEmail); err != nil {
				return err
			}
			err = tx.QueryRow(ctx, `UPDATE users SET email = $2, email_verified_at = now()
				WHERE id = $1 RETURNING id, email, instance_admin, created_at`, userID, email).
				Scan(&u.ID, &u.Email, &u.InstanceAdmin, &u.CreatedAt)
			if mcpgate.ErrorCode(mapError(err, "")) == mcpgate.EConflict {
				return mcpgate.Errorf(mcpgate.EConflict, "another account uses this address now")
			}
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE account_tokens SET used_at = now() WHERE user_id = $1 AND purpose IN ('email_change', 'verify') AND used_at IS NULL`, userID)
			return err
		}
		err = tx.QueryRow(ctx, `UPDATE users SET email_verified_at = COALESCE(email_verified_at, now())
			WHERE id = $1 AND email = $2 RETURNING id, email, instance_admin, created_at`, userID, email).
			Scan(&u.ID, &u.Email, &u.InstanceAdmin, &u.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return mcpgate.Errorf(mcpgate.EInvalid, "this link is for an address that is no longer on the account")
		}
		return err
	})
	if err != nil {
		if c := mcpgate.ErrorCode(err); c == mcpgate.EInvalid || c == mcpgate.EConflict {
			return nil, "", err
		}
		return nil, "", mapError(err, "user not found")
	}
	return u, oldEmail, nil
}

// DeleteUser deletes a user, in one transaction with the check that makes it
// safe: a workspace where they are the only owner and that has other members
// is refused (EConflict, naming it). Workspaces where they are the only
// member go with them (their audit rows too: nobody else could read them);
// in shared workspaces their memberships, keys and sessions end by cascade
// and their audit rows stay, with the actor gone (actor_id set null). It
// returns the shared workspaces they left.
func (db *DB) DeleteUser(ctx context.Context, userID string) ([]string, error) {
	var left []string
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		// Lock the person's memberships so that a concurrent role change
		// cannot slip between the check and the delete.
		var blocked string
		err := tx.QueryRow(ctx, `
			SELECT w.name FROM members m JOIN workspaces w ON w.id = m.workspace_id
			WHERE m.user_id = $1 AND m.role = 'owner'
			  AND EXISTS (SELECT 1 FROM members o WHERE o.workspace_id = m.workspace_id AND o.user_id <> $1)
			  AND NOT EXISTS (SELECT 1 FROM members o WHERE o.workspace_id = m.workspace_id AND o.user_id <> $1 AND o.role = 'owner')
			ORDER BY w.name LIMIT 1 FOR UPDATE OF m`, userID).Scan(&blocked)
		if err == nil {
			return mcpgate.Errorf(mcpgate.EConflict,
				"you are the last owner of the workspace %q, which has other members: make one of them an owner, or remove them, first", blocked)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		rows, err := tx.Query(ctx, `
			SELECT m.workspace_id FROM members m
			WHERE m.user_id = $1 AND EXISTS (SELECT 1 FROM members o WHERE o.workspace_id = m.workspace_id AND o.user_id <> $1)`, userID)
		if err != nil {
			return err
		}
		if left, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			DELETE FROM workspaces w WHERE EXISTS (SELECT 1 FROM members m WHERE m.workspace_id = w.id AND m.user_id = $1)
			  AND NOT EXISTS (SELECT 1 FROM members o WHERE o.workspace_id = w.id AND o.user_id <> $1)`, userID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM users WHERE id = $1`, userID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return pgx.ErrNoRows
		}
		for _, ws := range left {
			if err := notifyKeys(ctx, tx, ws); err != nil {
				return err
			}
			if err := notify(ctx, tx, InvalidateGrants, ws); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if mcpgate.ErrorCode(err) == mcpgate.EConflict {
			return nil, err
		}
		return nil, mapError(err, "user not found")
	}
	return left, nil
}
