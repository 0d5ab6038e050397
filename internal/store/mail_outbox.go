package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// OutboxMail is one mail waiting in the outbox, as rendered.
type OutboxMail struct {
	ID                     string
	Kind, Ref, To, Subject string
	Text, HTML             string
	// Attempt is the attempt about to be made, counted at the claim.
	Attempt int
}

// QueueMail stores a rendered mail, due at once for whichever mailer claims
// it first, and returns its id.
func (db *DB) QueueMail(ctx context.Context, m OutboxMail) (string, error) {
	var id string
	err := db.Pool.QueryRow(ctx, `INSERT INTO mail_outbox (kind, ref, recipient, subject, body_text, body_html)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, m.Kind, m.Ref, m.To, m.Subject, m.Text, m.HTML).Scan(&id)
	return id, mapError(err, "")
}

// ClaimMails claims up to limit mails due at now that no unexpired claim
// holds, for owner until now+lease, in one statement (FOR UPDATE SKIP
// LOCKED, as ClaimDeliveries): two mailers never make the same attempt.
func (db *DB) ClaimMails(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]OutboxMail, error) {
	return listRows(ctx, db, func(r pgx.Row, m *OutboxMail) error {
		return r.Scan(&m.ID, &m.Kind, &m.Ref, &m.To, &m.Subject, &m.Text, &m.HTML, &m.Attempt)
	}, `
		WITH due AS (
			SELECT id FROM mail_outbox
			WHERE next_attempt_at <= $2 AND (claim_until IS NULL OR claim_until <= $2)
			ORDER BY next_attempt_at LIMIT $4
			FOR UPDATE SKIP LOCKED)
		UPDATE mail_outbox m SET claimed_by = $1, claim_until = $3, attempts = m.attempts + 1
		FROM due WHERE m.id = due.id
		RETURNING m.id, m.kind, m.ref, m.recipient, m.subject, m.body_text, m.body_html, m.attempts`,
		owner, now, now.Add(lease), limit)
}

// RecordMail ends owner's claim on a mail: a final attempt deletes the row
// (the audit log keeps the outcome), any other leaves it due at next with
// the attempt's error. It reports false, and changes nothing, when owner no
// longer holds the claim.
func (db *DB) RecordMail(ctx context.Context, owner, id string, final bool, lastError string, next time.Time) (bool, error) {
	sql := `UPDATE mail_outbox SET last_error = $3, next_attempt_at = $4, claimed_by = NULL, claim_until = NULL
		WHERE id = $1 AND claimed_by = $2`
	args := []any{id, owner, lastError, next}
	if final {
		sql, args = `DELETE FROM mail_outbox WHERE id = $1 AND claimed_by = $2`, args[:2]
	}
	tag, err := db.Pool.Exec(ctx, sql, args...)
	if err != nil {
		return false, mapError(err, "")
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseMail ends owner's claim without the attempt counted: the mail is
// due at now for any mailer.
func (db *DB) ReleaseMail(ctx context.Context, owner, id string, now time.Time) error {
	_, err := db.Pool.Exec(ctx, `UPDATE mail_outbox SET attempts = greatest(attempts - 1, 0), next_attempt_at = $3,
			claimed_by = NULL, claim_until = NULL
		WHERE id = $1 AND claimed_by = $2`, id, owner, now)
	return mapError(err, "")
}
