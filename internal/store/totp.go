package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/vault"
)

// TOTPFactor is a person's TOTP enrolment as the service checks codes
// against it. Secret is the opened shared secret (base32); it lives for one
// request and is never logged.
type TOTPFactor struct {
	Secret    mcpgate.Secret
	Confirmed bool
	// LastStep is the last time step whose code was accepted (0: none).
	LastStep int64
}

var errNoTOTP = mcpgate.Errorf(mcpgate.ENotFound, "two-factor sign-in is not set up for this account")

// BeginTOTP seals and stores a new pending TOTP secret for the user,
// replacing a pending one. An enrolment already confirmed is EConflict: it
// must be disabled first.
func (db *DB) BeginTOTP(ctx context.Context, sealer Sealer, userID string, secret mcpgate.Secret) error {
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		// Lock the user's row so that two enrolments started at once end
		// with one row, and one that races a confirmation sees it.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, userID); err != nil {
			return err
		}
		var confirmed bool
		err := tx.QueryRow(ctx, `SELECT confirmed_at IS NOT NULL FROM totp_factors WHERE user_id = $1`, userID).Scan(&confirmed)
		switch {
		case err == nil && confirmed:
			return mcpgate.Errorf(mcpgate.EConflict, "two-factor sign-in is already on; turn it off first to enrol another device")
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		// A fresh row id for every enrolment: the ciphertext is bound to it.
		var id string
		if err := tx.QueryRow(ctx, `SELECT gen_random_uuid()::text`).Scan(&id); err != nil {
			return err
		}
		ct, term, err := seal(sealer, []byte(secret.Reveal()), vault.TOTPAAD(userID, id), "totp secret")
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM totp_factors WHERE user_id = $1`, userID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO totp_factors (id, user_id, secret, key_term) VALUES ($1, $2, $3, $4)`,
			id, userID, ct, term)
		return err
	})
	if mcpgate.ErrorCode(err) == mcpgate.EConflict {
		return err
	}
	return mapError(err, "user not found")
}

// FindTOTP returns the user's TOTP enrolment with its secret opened, or
// ENotFound when there is none. The row is read and the connection released
// before the secret is opened.
func (db *DB) FindTOTP(ctx context.Context, sealer Sealer, userID string) (*TOTPFactor, error) {
	var id string
	var ct []byte
	f := &TOTPFactor{}
	err := db.Pool.QueryRow(ctx, `SELECT id, secret, confirmed_at IS NOT NULL, last_step FROM totp_factors WHERE user_id = $1`, userID).
		Scan(&id, &ct, &f.Confirmed, &f.LastStep)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errNoTOTP
	}
	if err != nil {
		return nil, mapError(err, "")
	}
	pt, err := sealer.OpenContext(ctx, ct, vault.TOTPAAD(userID, id))
	if err != nil {
		return nil, fmt.Errorf("open totp secret: %w", err)
	}
	f.Secret = mcpgate.Secret(pt)
	return f, nil
}

// TOTPEnabled reports whether the user has a confirmed TOTP enrolment.
func (db *DB) TOTPEnabled(ctx context.Context, userID string) (bool, error) {
	var on bool
	err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM totp_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL)`, userID).Scan(&on)
	return on, mapError(err, "")
}

// ConfirmTOTP turns the user's pending enrolment on, records step as the
// last one accepted, and replaces their recovery codes with codeHashes, in
// one transaction. Without a pending enrolment it is ENotFound.
func (db *DB) ConfirmTOTP(ctx context.Context, userID string, step int64, codeHashes [][]byte) error {
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE totp_factors SET confirmed_at = now(), last_step = $2
			WHERE user_id = $1 AND confirmed_at IS NULL AND last_step < $2`, userID, step)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errNoTOTP
		}
		return replaceRecoveryCodes(ctx, tx, userID, codeHashes)
	})
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
		return err
	}
	return mapError(err, "")
}

// ReplaceRecoveryCodes replaces the recovery codes of a user whose two-factor
// sign-in is on with codeHashes; without it on, it is ENotFound.
func (db *DB) ReplaceRecoveryCodes(ctx context.Context, userID string, codeHashes [][]byte) error {
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var on bool
		err := tx.QueryRow(ctx, `SELECT true FROM totp_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL FOR UPDATE`,
			userID).Scan(&on)
		if errors.Is(err, pgx.ErrNoRows) {
			return errNoTOTP
		}
		if err != nil {
			return err
		}
		return replaceRecoveryCodes(ctx, tx, userID, codeHashes)
	})
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
		return err
	}
	return mapError(err, "")
}

func replaceRecoveryCodes(ctx context.Context, tx pgx.Tx, userID string, codeHashes [][]byte) error {
	if _, err := tx.Exec(ctx, `DELETE FROM totp_recovery_codes WHERE user_id = $1`, userID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO totp_recovery_codes (user_id, code_hash) SELECT $1, unnest($2::bytea[])`, userID, codeHashes)
	return err
}

// AcceptTOTPStep records step as the last accepted time step of the user's
// confirmed enrolment, if it is later than the one recorded: false means the
// code was for the same or an earlier step (a replay), or TOTP is off. The
// check and the write are one UPDATE, so two requests racing with one code
// cannot both pass.
func (db *DB) AcceptTOTPStep(ctx context.Context, userID string, step int64) (bool, error) {
	tag, err := db.Pool.Exec(ctx, `UPDATE totp_factors SET last_step = $2
		WHERE user_id = $1 AND confirmed_at IS NOT NULL AND last_step < $2`, userID, step)
	if err != nil {
		return false, mapError(err, "")
	}
	return tag.RowsAffected() == 1, nil
}

// UseRecoveryCode spends one of the user's unused recovery codes by its
// hash, in the one UPDATE that checks it, and returns whether it was one and
// how many are left unused. Codes count only while TOTP is on.
func (db *DB) UseRecoveryCode(ctx context.Context, userID string, codeHash []byte) (ok bool, left int, err error) {
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE totp_recovery_codes SET used_at = now()
			WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL
			  AND EXISTS (SELECT 1 FROM totp_factors f WHERE f.user_id = $1 AND f.confirmed_at IS NOT NULL)`, userID, codeHash)
		if err != nil {
			return err
		}
		ok = tag.RowsAffected() == 1
		return tx.QueryRow(ctx, `SELECT count(*) FROM totp_recovery_codes WHERE user_id = $1 AND used_at IS NULL`, userID).Scan(&left)
	})
	return ok, left, mapError(err, "")
}

// DisableTOTP deletes the user's enrolment and recovery codes. Without one
// it is ENotFound.
func (db *DB) DisableTOTP(ctx context.Context, userID string) error {
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM totp_factors WHERE user_id = $1`, userID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errNoTOTP
		}
		_, err = tx.Exec(ctx, `DELETE FROM totp_recovery_codes WHERE user_id = $1`, userID)
		return err
	})
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
		return err
	}
	return mapError(err, "")
}

// SetRequireTwoFactor sets the workspace's policy that its owners and admins
// must have two-factor sign-in on before they change its tools, approvals,
// guardrails or credentials.
func (db *DB) SetRequireTwoFactor(ctx context.Context, workspaceID string, on bool) error {
	tag, err := db.Pool.Exec(ctx, `UPDATE workspaces SET require_two_factor = $2 WHERE id = $1`, workspaceID, on)
	if err != nil {
		return mapError(err, wsNotFound)
	}
	if tag.RowsAffected() == 0 {
		return mcpgate.Errorf(mcpgate.ENotFound, wsNotFound)
	}
	return nil
}

// TwoFactorPolicy reports, in one query, whether the workspace requires two
// factors of its owners and admins and whether the user has TOTP on.
func (db *DB) TwoFactorPolicy(ctx context.Context, workspaceID, userID string) (required, enrolled bool, err error) {
	err = db.Pool.QueryRow(ctx, `
		SELECT w.require_two_factor,
		       EXISTS (SELECT 1 FROM totp_factors f WHERE f.user_id = $2 AND f.confirmed_at IS NOT NULL)
		FROM workspaces w WHERE w.id = $1`, workspaceID, userID).Scan(&required, &enrolled)
	return required, enrolled, mapError(err, wsNotFound)
}
