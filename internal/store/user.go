package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
)

// firstUserLockID serialises signups just long enough to decide who is the
// instance's first user, and so its admin.
const firstUserLockID = 0x6d6370676174652f

// CreateUser creates a user, their personal workspace (as owner) and, when
// invitationHash is set, accepts that invitation in the same transaction. The
// first user of the instance becomes instance admin.
func (db *DB) CreateUser(ctx context.Context, email, passwordHash string, invitationHash []byte) (*mcpgate.User, error) {
	var u *mcpgate.User
	err := db.inTx(ctx, func(tx pgx.Tx) (err error) {
		if u, err = createUser(ctx, tx, email, passwordHash, false); err != nil {
			return err
		}
		if invitationHash != nil {
			if _, err := acceptInvitation(ctx, tx, invitationHash, u.ID, u.Email); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, mapError(err, "user not found")
	}
	return u, nil
}

// createUser inserts a user (verified: with their address proven) and their
// personal workspace; the instance's first user becomes its admin.
func createUser(ctx context.Context, tx pgx.Tx, email, passwordHash string, verified bool) (*mcpgate.User, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(firstUserLockID)); err != nil {
		return nil, err
	}
	var u mcpgate.User
	err := tx.QueryRow(ctx, `
		INSERT INTO users (email, password_hash, instance_admin)
		VALUES ($1, $2, NOT EXISTS (SELECT 1 FROM users))
		RETURNING id, email, instance_admin, created_at`, email, passwordHash,
	).Scan(&u.ID, &u.Email, &u.InstanceAdmin, &u.CreatedAt)
	if err != nil {
		if mcpgate.ErrorCode(mapError(err, "")) == mcpgate.EConflict {
			return nil, mcpgate.Errorf(mcpgate.EConflict, "an account with this email already exists")
		}
		return nil, err
	}
	// A statement of its own, so that CreateUser works on every schema
	// version (the migration tests make users on the oldest).
	if verified {
		if _, err := tx.Exec(ctx, `UPDATE users SET email_verified_at = now() WHERE id = $1`, u.ID); err != nil {
			return nil, err
		}
	}
	if _, err := createWorkspace(ctx, tx, u.ID, "Personal", true); err != nil {
		return nil, err
	}
	return &u, nil
}

// CreatePendingSignup stores a sign-up that waits for the link mailed to its
// address (SIGNUP_VERIFY=required); only the token's hash is kept.
func (db *DB) CreatePendingSignup(ctx context.Context, email, passwordHash string, tokenHash []byte, expiresAt time.Time) error {
	_, err := db.Pool.Exec(ctx, `INSERT INTO pending_signups (token_hash, email, password_hash, expires_at) VALUES ($1, $2, $3, $4)`,
		tokenHash, email, passwordHash, expiresAt)
	return mapError(err, "")
}

// ErrNoPendingSignup is CompleteSignup's answer for a token that is no live
// pending sign-up's (it may be another kind of link).
var ErrNoPendingSignup = mcpgate.Errorf(mcpgate.ENotFound, "no such sign-up")

// CompleteSignup spends a pending sign-up's token and creates its account,
// with the address verified (the link proves it), in one transaction; every
// other pending sign-up for the address goes with it. An address that has an
// account by now is EConflict.
func (db *DB) CompleteSignup(ctx context.Context, tokenHash []byte) (*mcpgate.User, error) {
	var u *mcpgate.User
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var email, hash string
		err := tx.QueryRow(ctx, `DELETE FROM pending_signups WHERE token_hash = $1 AND expires_at > now()
			RETURNING email, password_hash`, tokenHash).Scan(&email, &hash)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNoPendingSignup
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM pending_signups WHERE email = $1`, email); err != nil {
			return err
		}
		u, err = createUser(ctx, tx, email, hash, true)
		if mcpgate.ErrorCode(err) == mcpgate.EConflict {
			return mcpgate.Errorf(mcpgate.EConflict, "an account with this address exists already: sign in, or reset its password")
		}
		return err
	})
	if err != nil {
		if c := mcpgate.ErrorCode(err); c == mcpgate.ENotFound || c == mcpgate.EConflict {
			return nil, err
		}
		return nil, mapError(err, "")
	}
	return u, nil
}

// FindUserByEmail returns the user with that (normalized) email and their
// password hash.
func (db *DB) FindUserByEmail(ctx context.Context, email string) (*mcpgate.User, string, error) {
	var u mcpgate.User
	var hash string
	err := db.Pool.QueryRow(ctx, `SELECT id, email, instance_admin, created_at, password_hash FROM users WHERE email = $1`, email).
		Scan(&u.ID, &u.Email, &u.InstanceAdmin, &u.CreatedAt, &hash)
	if err != nil {
		return nil, "", mapError(err, "user not found")
	}
	return &u, hash, nil
}

// FindUserByID returns a user.
func (db *DB) FindUserByID(ctx context.Context, id string) (*mcpgate.User, error) {
	if !isUUID(id) {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "user not found")
	}
	var u mcpgate.User
	err := db.Pool.QueryRow(ctx, `SELECT id, email, instance_admin, created_at FROM users WHERE id = $1`, id).
		Scan(&u.ID, &u.Email, &u.InstanceAdmin, &u.CreatedAt)
	if err != nil {
		return nil, mapError(err, "user not found")
	}
	return &u, nil
}

// CountUsers returns how many users the instance has.
func (db *DB) CountUsers(ctx context.Context) (int, error) {
	var n int
	err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&n)
	return n, mapError(err, "")
}

// SetPassword replaces a user's password hash, revokes every session of
// theirs, so that a changed password logs out every other browser, and ends
// every open mailed link of theirs (reset, verification, email change).
func (db *DB) SetPassword(ctx context.Context, userID, passwordHash string) error {
	return mapError(db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE users SET password_hash = $2 WHERE id = $1`, userID, passwordHash)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return pgx.ErrNoRows
		}
		if err := dropAccountTokens(ctx, tx, userID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE sessions SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL`, userID)
		return err
	}), "user not found")
}

// SetInstanceAdmin grants or withdraws instance admin.
func (db *DB) SetInstanceAdmin(ctx context.Context, email string, admin bool) error {
	tag, err := db.Pool.Exec(ctx, `UPDATE users SET instance_admin = $2 WHERE email = $1`, email, admin)
	if err != nil {
		return mapError(err, "user not found")
	}
	if tag.RowsAffected() == 0 {
		return mcpgate.Errorf(mcpgate.ENotFound, "user not found")
	}
	return nil
}

// ListUsers lists every user of the instance, oldest first.
func (db *DB) ListUsers(ctx context.Context) ([]mcpgate.User, error) {
	return listRows(ctx, db, func(r pgx.Row, u *mcpgate.User) error {
		return r.Scan(&u.ID, &u.Email, &u.InstanceAdmin, &u.CreatedAt)
	}, `SELECT id, email, instance_admin, created_at FROM users ORDER BY created_at`)
}

// CreateSession records a dashboard session and returns its id.
func (db *DB) CreateSession(ctx context.Context, userID string, expiresAt time.Time) (string, error) {
	var id string
	err := db.Pool.QueryRow(ctx, `INSERT INTO sessions (user_id, expires_at) VALUES ($1, $2) RETURNING id`, userID, expiresAt).Scan(&id)
	return id, mapError(err, "user not found")
}

// FindSessionUser returns the user of a live session: not revoked, not
// expired.
func (db *DB) FindSessionUser(ctx context.Context, sessionID string) (*mcpgate.User, error) {
	if !isUUID(sessionID) {
		return nil, mcpgate.Errorf(mcpgate.EUnauthorized, "session expired; log in again")
	}
	var u mcpgate.User
	err := db.Pool.QueryRow(ctx, `
		SELECT u.id, u.email, u.instance_admin, u.created_at
		FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.id = $1 AND s.revoked_at IS NULL AND s.expires_at > now()`, sessionID).
		Scan(&u.ID, &u.Email, &u.InstanceAdmin, &u.CreatedAt)
	if err != nil {
		if mapped := mapError(err, ""); mcpgate.ErrorCode(mapped) == mcpgate.ENotFound {
			return nil, mcpgate.Errorf(mcpgate.EUnauthorized, "session expired; log in again")
		}
		return nil, mapError(err, "")
	}
	return &u, nil
}

// RevokeSession ends a session.
func (db *DB) RevokeSession(ctx context.Context, sessionID string) error {
	if !isUUID(sessionID) {
		return nil
	}
	_, err := db.Pool.Exec(ctx, `UPDATE sessions SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL`, sessionID)
	return mapError(err, "")
}

// LoginFailures returns how many failed logins the subject has in the window
// that started within the last period, and when that window started.
func (db *DB) LoginFailures(ctx context.Context, subject string, period time.Duration) (int, time.Time, error) {
	var n int
	var start time.Time
	err := db.Pool.QueryRow(ctx, `
		SELECT failures, window_start FROM login_failures
		WHERE subject = $1 AND window_start > now() - make_interval(secs => $2)`, subject, period.Seconds()).Scan(&n, &start)
	if err != nil {
		if mcpgate.ErrorCode(mapError(err, "")) == mcpgate.ENotFound {
			return 0, time.Time{}, nil
		}
		return 0, time.Time{}, mapError(err, "")
	}
	return n, start, nil
}

// RecordLoginFailure counts one failed login for each subject; a subject
// whose window is older than period starts a new one.
func (db *DB) RecordLoginFailure(ctx context.Context, period time.Duration, subjects ...string) error {
	for _, s := range subjects {
		_, err := db.Pool.Exec(ctx, `
			INSERT INTO login_failures (subject, failures, window_start) VALUES ($1, 1, now())
			ON CONFLICT (subject) DO UPDATE SET
				failures = CASE WHEN login_failures.window_start > now() - make_interval(secs => $2)
					THEN login_failures.failures + 1 ELSE 1 END,
				window_start = CASE WHEN login_failures.window_start > now() - make_interval(secs => $2)
					THEN login_failures.window_start ELSE now() END`, s, period.Seconds())
		if err != nil {
			return mapError(err, "")
		}
	}
	return nil
}

// ClearLoginFailures forgets a subject's failures after a successful login.
func (db *DB) ClearLoginFailures(ctx context.Context, subject string) error {
	_, err := db.Pool.Exec(ctx, `DELETE FROM login_failures WHERE subject = $1`, subject)
	return mapError(err, "")
}
