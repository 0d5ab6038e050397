package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/vault"
)

// Notifications returns a workspace's approval notifications; a workspace
// that never set them has none (the zero settings, format json).
func (db *DB) Notifications(ctx context.Context, workspaceID string) (*mcpgate.NotificationSettings, error) {
	n := &mcpgate.NotificationSettings{WebhookFormat: mcpgate.WebhookJSON}
	var updated time.Time
	err := db.Pool.QueryRow(ctx, `
		SELECT n.email, n.webhook_url, n.webhook_format, coalesce(s.hint, ''), n.updated_at
		FROM workspace_notifications n LEFT JOIN webhook_secrets s ON s.workspace_id = n.workspace_id
		WHERE n.workspace_id = $1`, workspaceID).Scan(&n.Email, &n.WebhookURL, &n.WebhookFormat, &n.WebhookSecretHint, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return n, nil
	}
	if err != nil {
		return nil, mapError(err, wsNotFound)
	}
	n.UpdatedAt = &updated
	return n, nil
}

// SetNotifications replaces a workspace's notifications in one
// transaction. A non-empty secret is sealed (bound to the workspace and a
// fresh row id) and replaces the stored one, with hint; without one the
// stored secret is kept, and a webhook URL with no secret at all is
// EInvalid. Clearing the URL deletes the secret.
func (db *DB) SetNotifications(ctx context.Context, sealer Sealer, workspaceID string, in mcpgate.NotificationInput, hint string) error {
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO workspace_notifications (workspace_id, email, webhook_url, webhook_format, updated_at)
			VALUES ($1, $2, $3, $4, now())
			ON CONFLICT (workspace_id) DO UPDATE SET email = EXCLUDED.email, webhook_url = EXCLUDED.webhook_url,
				webhook_format = EXCLUDED.webhook_format, updated_at = now()`,
			workspaceID, in.Email, in.WebhookURL, string(in.WebhookFormat)); err != nil {
			return err
		}
		switch {
		case in.WebhookURL == "":
			_, err := tx.Exec(ctx, `DELETE FROM webhook_secrets WHERE workspace_id = $1`, workspaceID)
			return err
		case in.WebhookSecret == "":
			var has bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_secrets WHERE workspace_id = $1)`, workspaceID).Scan(&has); err != nil {
				return err
			}
			if !has {
				return mcpgate.Errorf(mcpgate.EInvalid, "a webhook needs a webhook_secret to sign its deliveries with")
			}
			return nil
		}
		var id string
		if err := tx.QueryRow(ctx, `SELECT gen_random_uuid()::text`).Scan(&id); err != nil {
			return err
		}
		ct, term, err := seal(sealer, []byte(in.WebhookSecret.Reveal()), vault.WebhookSecretAAD(workspaceID, id), "webhook secret")
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM webhook_secrets WHERE workspace_id = $1`, workspaceID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO webhook_secrets (id, workspace_id, secret, key_term, hint) VALUES ($1, $2, $3, $4, $5)`,
			id, workspaceID, ct, term, hint)
		return err
	})
	if mcpgate.ErrorCode(err) == mcpgate.EInvalid {
		return err
	}
	return mapError(err, wsNotFound)
}

// WebhookTarget is where and how a workspace's approval events are sent.
// Secret is opened for the delivery and never logged.
type WebhookTarget struct {
	URL    string
	Format mcpgate.WebhookFormat
	Secret mcpgate.Secret
}

// FindWebhook returns the workspace's webhook with its secret opened, or
// ENotFound when it has none. The row is read and the connection released
// before the secret is opened.
func (db *DB) FindWebhook(ctx context.Context, sealer Sealer, workspaceID string) (*WebhookTarget, error) {
	t := &WebhookTarget{}
	var id string
	var ct []byte
	err := db.Pool.QueryRow(ctx, `
		SELECT n.webhook_url, n.webhook_format, s.id, s.secret
		FROM workspace_notifications n JOIN webhook_secrets s ON s.workspace_id = n.workspace_id
		WHERE n.workspace_id = $1 AND n.webhook_url <> ''`, workspaceID).Scan(&t.URL, &t.Format, &id, &ct)
	if err != nil {
		return nil, mapError(err, "this workspace has no webhook")
	}
	pt, err := sealer.OpenContext(ctx, ct, vault.WebhookSecretAAD(workspaceID, id))
	if err != nil {
		return nil, fmt.Errorf("open webhook secret: %w", err)
	}
	t.Secret = mcpgate.Secret(pt)
	return t, nil
}

// MailApprovals reports whether the workspace mails its approvers.
func (db *DB) MailApprovals(ctx context.Context, workspaceID string) (bool, error) {
	var on bool
	err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM workspace_notifications WHERE workspace_id = $1 AND email)`, workspaceID).Scan(&on)
	return on, mapError(err, "")
}

// Approver is a member who may be told of an approval: the requester, or
// an owner or admin, with what the decision rules need to know of them.
type Approver struct {
	UserID    string
	Email     string
	Role      mcpgate.Role
	TwoFactor bool
}

// Audience is who may be told of a workspace's approval and the rules
// they decide under.
type Audience struct {
	WorkspaceName string
	// People are the owners and admins, and the requester if a member.
	People    []Approver
	TwoFactor bool // the workspace requires two-factor sign-in of deciders
	FourEyes  bool // the requester may not decide their own request
}

// ApprovalAudience returns the Audience of an approval requested by
// requestedBy in the workspace.
func (db *DB) ApprovalAudience(ctx context.Context, workspaceID, requestedBy string) (*Audience, error) {
	au := &Audience{}
	if err := db.Pool.QueryRow(ctx, `SELECT name, require_two_factor, approval_four_eyes FROM workspaces WHERE id = $1`, workspaceID).
		Scan(&au.WorkspaceName, &au.TwoFactor, &au.FourEyes); err != nil {
		return nil, mapError(err, wsNotFound)
	}
	var err error
	au.People, err = listRows(ctx, db, func(r pgx.Row, p *Approver) error {
		return r.Scan(&p.UserID, &p.Email, &p.Role, &p.TwoFactor)
	}, `
		SELECT u.id, u.email, m.role, EXISTS (SELECT 1 FROM totp_factors f WHERE f.user_id = u.id AND f.confirmed_at IS NOT NULL)
		FROM members m JOIN users u ON u.id = m.user_id
		WHERE m.workspace_id = $1 AND (m.role IN ('owner', 'admin') OR m.user_id = $2)
		ORDER BY m.joined_at`, workspaceID, requestedBy)
	return au, err
}

// MarkNoticed records that userID was mailed about an approval; false when
// they already were (at most one mail per approval per person).
func (db *DB) MarkNoticed(ctx context.Context, approvalID, userID string) (bool, error) {
	tag, err := db.Pool.Exec(ctx, `INSERT INTO approval_notices (approval_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		approvalID, userID)
	if err != nil {
		return false, mapError(err, approvalNotFound)
	}
	return tag.RowsAffected() == 1, nil
}

// NewDelivery is a webhook delivery to queue: where it goes and the body
// it carries. The secret that signs it stays sealed in webhook_secrets, and
// no signature is stored: each attempt signs anew.
type NewDelivery struct {
	WorkspaceID, ApprovalID, Event, URL string
	Body                                []byte
	// Due is when its first attempt is due (now).
	Due time.Time
}

// CreateDelivery queues a webhook delivery, due at d.Due for whichever
// sender claims it first, and returns its id.
func (db *DB) CreateDelivery(ctx context.Context, d NewDelivery) (string, error) {
	var id string
	err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_deliveries (workspace_id, approval_id, event, url, body, next_attempt_at)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
		d.WorkspaceID, d.ApprovalID, d.Event, d.URL, d.Body, d.Due).Scan(&id)
	return id, mapError(err, wsNotFound)
}

// DueDelivery is a delivery claimed for one attempt.
type DueDelivery struct {
	ID, WorkspaceID, ApprovalID, Event, URL string
	Body                                    []byte
	// Attempt is the attempt about to be made (counted at the claim, so
	// that a sender dying during it still uses one up).
	Attempt int
}

// ClaimDeliveries claims up to limit pending deliveries due at now that
// no unexpired claim holds, for owner until now+lease. The rows are picked
// FOR UPDATE SKIP LOCKED and claimed in the same statement, so two
// replicas never claim the same attempt: one that races sees the row
// locked and skips it, or sees it claimed once the lock is gone. It is a
// job across workspaces (like the expiry of approvals): every row keeps
// its own workspace_id.
func (db *DB) ClaimDeliveries(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]DueDelivery, error) {
	return listRows(ctx, db, func(r pgx.Row, d *DueDelivery) error {
		return r.Scan(&d.ID, &d.WorkspaceID, &d.ApprovalID, &d.Event, &d.URL, &d.Body, &d.Attempt)
	}, `
		WITH due AS (
			SELECT id FROM webhook_deliveries
			WHERE state = 'pending' AND next_attempt_at <= $2 AND (claim_until IS NULL OR claim_until <= $2)
			ORDER BY next_attempt_at LIMIT $4
			FOR UPDATE SKIP LOCKED)
		UPDATE webhook_deliveries w SET claimed_by = $1, claim_until = $3, attempts = w.attempts + 1, updated_at = now()
		FROM due WHERE w.id = due.id
		RETURNING w.id, w.workspace_id, w.approval_id, w.event, w.url, w.body, w.attempts`,
		owner, now, now.Add(lease), limit)
}

// RecordDelivery stores an attempt's outcome and ends owner's claim; next
// is when a pending delivery's next attempt is due. A final outcome drops
// the URL and the body, which only a next attempt needs: a Slack webhook's
// URL is its key, and a replaced one should not linger in old rows. It reports false, and
// changes nothing, when owner no longer holds the claim (it expired and
// another replica took the delivery over).
func (db *DB) RecordDelivery(ctx context.Context, owner string, d mcpgate.WebhookDelivery, next time.Time) (bool, error) {
	tag, err := db.Pool.Exec(ctx, `UPDATE webhook_deliveries SET state = $3, attempts = $4, last_status = $5, last_error = $6,
			next_attempt_at = CASE WHEN $3 = 'pending' THEN $7 ELSE next_attempt_at END,
			url = CASE WHEN $3 = 'pending' THEN url ELSE '' END, body = CASE WHEN $3 = 'pending' THEN body ELSE ''::bytea END,
			claimed_by = NULL, claim_until = NULL, updated_at = now()
		WHERE id = $1 AND claimed_by = $2`, d.ID, owner, string(d.State), d.Attempts, d.LastStatus, d.LastError, next)
	if err != nil {
		return false, mapError(err, "")
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseDelivery ends owner's claim without the attempt counted: the
// delivery is due at now for any replica.
func (db *DB) ReleaseDelivery(ctx context.Context, owner, id string, now time.Time) error {
	_, err := db.Pool.Exec(ctx, `UPDATE webhook_deliveries SET attempts = greatest(attempts - 1, 0), next_attempt_at = $3,
			claimed_by = NULL, claim_until = NULL, updated_at = now()
		WHERE id = $1 AND claimed_by = $2`, id, owner, now)
	return mapError(err, "")
}

// deliveriesKept is how many deliveries a workspace's list shows.
const deliveriesKept = 50

// ListDeliveries returns the workspace's latest webhook deliveries, newest
// first.
func (db *DB) ListDeliveries(ctx context.Context, workspaceID string) ([]mcpgate.WebhookDelivery, error) {
	return listRows(ctx, db, func(r pgx.Row, d *mcpgate.WebhookDelivery) error {
		return r.Scan(&d.ID, &d.ApprovalID, &d.Event, &d.State, &d.Attempts, &d.LastStatus, &d.LastError, &d.CreatedAt, &d.UpdatedAt)
	}, `SELECT id, approval_id, event, state, attempts, last_status, last_error, created_at, updated_at
		FROM webhook_deliveries WHERE workspace_id = $1 ORDER BY created_at DESC, id LIMIT $2`, workspaceID, deliveriesKept)
}
