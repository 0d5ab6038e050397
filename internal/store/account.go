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

// CreateAccountToken stores the hash of a single-use emailed token, bound to
// the password the user has now (see spendAccountToken).
func (db *DB) CreateAccountToken(ctx context.Context, userID, purpose string, tokenHash []byte, email string, expiresAt time.Time) error {
	tag, err := db.Pool.Exec(ctx, `
		INSERT INTO account_tokens (user_id, purpose, token_hash, email, expires_at, password_fp)
		SELECT u.id, $2, $3, $4, $5, `+passwordFP+` FROM users u WHERE u.id = $1`,
		userID, purpose, tokenHash, email, expiresAt)
	if err != nil {
		return mapError(err, "user not found")
	}
	if tag.RowsAffected() == 0 {
		return mcpgate.Errorf(mcpgate.ENotFound, "user not found")
	}
	return nil
}

// passwordFP is the fingerprint of the password a link is bound to: the
// SHA-256 of the user's (salted) password hash, so any new password, even
// the same one set again, changes it. u is the users row.
const passwordFP = `sha256(convert_to(u.password_hash, 'UTF8'))`

// accountToken is a spent token: whose, the address it names, what for.
type accountToken struct{ userID, email, purpose string }

// spendAccountToken spends a live token of one of purposes, if it still
// stands on what it was issued for: the user's password is the one it was
// issued under, and a reset link's address is still the user's. The user's
// row is locked first (users before account_tokens, the order SetPassword
// takes them in too), so that a password change cannot commit between the
// check and what the caller does with the token. Anything else is
// errTokenSpent, saying nothing of which check failed.
func spendAccountToken(ctx context.Context, tx pgx.Tx, tokenHash []byte, purposes ...string) (accountToken, error) {
	var t accountToken
	err := tx.QueryRow(ctx, `SELECT u.id FROM account_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.token_hash = $1 FOR UPDATE OF u`, tokenHash).Scan(&t.userID)
	if err == nil {
		err = tx.QueryRow(ctx, `
			UPDATE account_tokens t SET used_at = now() FROM users u
			WHERE t.token_hash = $1 AND t.purpose = ANY($2) AND t.used_at IS NULL AND t.expires_at > now()
			  AND u.id = t.user_id AND t.password_fp = `+passwordFP+`
			  AND (t.purpose <> 'reset' OR t.email = u.email)
			RETURNING t.user_id, t.email, t.purpose`, tokenHash, purposes).Scan(&t.userID, &t.email, &t.purpose)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errTokenSpent
	}
	return t, err
}

// dropAccountTokens deletes the user's unspent links: a password change, an
// email change and a reset each end every link issued before them.
func dropAccountTokens(ctx context.Context, tx pgx.Tx, userID string) error {
	_, err := tx.Exec(ctx, `DELETE FROM account_tokens WHERE user_id = $1 AND used_at IS NULL`, userID)
	return err
}

// ResetPassword spends a reset token and sets the password of its user in
// one transaction: every session of the user is revoked, and every other
// open link of theirs (reset, verification, email change) stops working. A spent, expired or unknown token
// is EInvalid.
func (db *DB) ResetPassword(ctx context.Context, tokenHash []byte, passwordHash string) (*mcpgate.User, error) {
	var u mcpgate.User
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		t, err := spendAccountToken(ctx, tx, tokenHash, TokenReset)
		if err != nil {
			return err
		}
		userID := t.userID
		// The link reached the inbox, so the address is proven too.
		err = tx.QueryRow(ctx, `UPDATE users SET password_hash = $2, email_verified_at = COALESCE(email_verified_at, now())
			WHERE id = $1 RETURNING id, email, instance_admin, created_at`,
			userID, passwordHash).Scan(&u.ID, &u.Email, &u.InstanceAdmin, &u.CreatedAt)
		if err != nil {
			return err
		}
		if err := dropAccountTokens(ctx, tx, userID); err != nil {
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
// replaces the user's address with the confirmed one (and ends every other
// open link of the user: reset, verification, email change). oldEmail is the address it replaced, or "".
func (db *DB) VerifyEmail(ctx context.Context, tokenHash []byte) (u *mcpgate.User, oldEmail string, err error) {
	u = &mcpgate.User{}
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		t, err := spendAccountToken(ctx, tx, tokenHash, TokenVerify, TokenEmailChange)
		if err != nil {
			return err
		}
		userID, email, purpose := t.userID, t.email, t.purpose
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
			return dropAccountTokens(ctx, tx, userID)
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
