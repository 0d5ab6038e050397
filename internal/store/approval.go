package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
)

const approvalNotFound = "no such approval request in this workspace"

// CreateApproval stores a pending approval request; it fills in ID and
// CreatedAt. argsHash binds it to the call's exact arguments.
func (db *DB) CreateApproval(ctx context.Context, ap *mcpgate.ApprovalRequest, argsHash string) error {
	return mapError(insertApproval(ctx, db.Pool, ap, argsHash), wsNotFound)
}

func insertApproval(ctx context.Context, q rowQuerier, ap *mcpgate.ApprovalRequest, argsHash string) error {
	args, err := json.Marshal(ap.Arguments)
	if err != nil {
		return err
	}
	err = q.QueryRow(ctx, `
		INSERT INTO approvals (workspace_id, key_id, grant_id, user_id, tool, tool_title, arguments, args_hash, summary, state, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10) RETURNING id, created_at`,
		ap.WorkspaceID, ap.KeyID, ap.GrantID, ap.RequestedBy, ap.Tool, ap.ToolTitle, args, argsHash, ap.Summary, ap.ExpiresAt,
	).Scan(&ap.ID, &ap.CreatedAt)
	ap.State = mcpgate.ApprovalPending
	return err
}

const approvalColumns = `a.id, a.workspace_id, a.key_id, a.grant_id, coalesce(c.name, ''), a.user_id, coalesce(u.email, ''), a.tool, a.tool_title, a.arguments,
	a.summary, a.state, a.created_at, a.expires_at, coalesce(a.decided_by::text, ''), coalesce(d.email, ''), a.decided_at, a.used_at`

const approvalFrom = ` FROM approvals a LEFT JOIN users u ON u.id = a.user_id LEFT JOIN users d ON d.id = a.decided_by
	LEFT JOIN oauth_grants g ON a.grant_id <> '' AND g.id::text = a.grant_id LEFT JOIN oauth_clients c ON c.id = g.client_id`

func scanApproval(r pgx.Row) (*mcpgate.ApprovalRequest, error) {
	var ap mcpgate.ApprovalRequest
	var args []byte
	if err := r.Scan(&ap.ID, &ap.WorkspaceID, &ap.KeyID, &ap.GrantID, &ap.ClientName, &ap.RequestedBy, &ap.RequesterEmail, &ap.Tool, &ap.ToolTitle, &args,
		&ap.Summary, &ap.State, &ap.CreatedAt, &ap.ExpiresAt, &ap.DecidedBy, &ap.DecidedByEmail, &ap.DecidedAt, &ap.UsedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(args, &ap.Arguments); err != nil {
		return nil, err
	}
	return &ap, nil
}

// FindApproval returns one approval request of a workspace with the hash
// of the arguments it is bound to.
func (db *DB) FindApproval(ctx context.Context, workspaceID, id string) (*mcpgate.ApprovalRequest, string, error) {
	if !isUUID(id) {
		return nil, "", mcpgate.Errorf(mcpgate.ENotFound, approvalNotFound)
	}
	var hash string
	var ap *mcpgate.ApprovalRequest
	row := db.Pool.QueryRow(ctx, `SELECT `+approvalColumns+`, a.args_hash`+approvalFrom+` WHERE a.workspace_id = $1 AND a.id = $2`,
		workspaceID, id)
	ap, err := scanApproval(hashRow{row, &hash})
	if err != nil {
		return nil, "", mapError(err, approvalNotFound)
	}
	return ap, hash, nil
}

// hashRow scans a row whose last column is the args hash into hash.
type hashRow struct {
	pgx.Row
	hash *string
}

func (h hashRow) Scan(dest ...any) error { return h.Row.Scan(append(dest, h.hash)...) }

// ApprovalFilter narrows FindApprovals.
type ApprovalFilter struct {
	// UserID, when set, keeps only that user's requests.
	UserID string
	// State, when set, keeps requests in that effective state at Now.
	State mcpgate.ApprovalState
	Now   time.Time
	Limit int
}

// FindApprovals lists a workspace's approval requests, newest first.
func (db *DB) FindApprovals(ctx context.Context, workspaceID string, f ApprovalFilter) ([]mcpgate.ApprovalRequest, error) {
	if f.Limit <= 0 || f.Limit > 200 {
		f.Limit = 100
	}
	// A pending or approved request past its expiry is expired, whatever
	// the stored state says.
	rows, err := db.Pool.Query(ctx, `SELECT `+approvalColumns+approvalFrom+`
		WHERE a.workspace_id = $1 AND ($2 = '' OR a.user_id::text = $2)
		  AND CASE $3
		    WHEN '' THEN true
		    WHEN 'expired' THEN a.state = 'expired' OR (a.state IN ('pending', 'approved') AND a.expires_at <= $4)
		    WHEN 'pending' THEN a.state = 'pending' AND a.expires_at > $4
		    WHEN 'approved' THEN a.state = 'approved' AND a.expires_at > $4
		    ELSE a.state = $3 END
		ORDER BY a.created_at DESC LIMIT $5`, workspaceID, f.UserID, string(f.State), f.Now, f.Limit)
	if err != nil {
		return nil, mapError(err, "")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (mcpgate.ApprovalRequest, error) {
		ap, err := scanApproval(r)
		if err != nil {
			return mcpgate.ApprovalRequest{}, err
		}
		return *ap, nil
	})
	return out, mapError(err, "")
}

// CountPendingApprovals counts a workspace's open requests at now; with
// userID set, only that user's.
func (db *DB) CountPendingApprovals(ctx context.Context, workspaceID, userID string, now time.Time) (int, error) {
	var n int
	err := db.Pool.QueryRow(ctx, pendingApprovalsSQL, workspaceID, userID, now).Scan(&n)
	return n, mapError(err, "")
}

// pendingApprovalsSQL counts a workspace's ($1) open requests at $3; with
// $2 set, only that user's.
const pendingApprovalsSQL = `SELECT count(*) FROM approvals
	WHERE workspace_id = $1 AND ($2 = '' OR user_id::text = $2) AND state = 'pending' AND expires_at > $3`

// DecideApproval moves a pending, unexpired request to approved or denied
// by userID, in one statement, so that two people deciding at once on two
// replicas cannot both win, and tells every replica (InvalidateApproval). It
// reports false when the request was not pending (or had expired).
func (db *DB) DecideApproval(ctx context.Context, workspaceID, id, userID string, approve bool, now time.Time) (bool, error) {
	if !isUUID(id) {
		return false, nil
	}
	state := mcpgate.ApprovalDenied
	if approve {
		state = mcpgate.ApprovalApproved
	}
	var decided bool
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE approvals SET state = $4, decided_by = $3, decided_at = $5
			WHERE workspace_id = $1 AND id = $2 AND state = 'pending' AND expires_at > $5`,
			workspaceID, id, userID, string(state), now)
		if err != nil || tag.RowsAffected() != 1 {
			return err
		}
		decided = true
		// The calls waiting for this decision, on any replica, hear of it
		// at commit (see notify).
		return notifyApproval(ctx, tx, workspaceID, id)
	})
	if err != nil {
		return false, mapError(err, "")
	}
	return decided, nil
}

// ExpireApproval marks a pending or approved request past its expiry as
// expired. It reports true only for the one caller that did, so that the
// expiry is audited once.
func (db *DB) ExpireApproval(ctx context.Context, workspaceID, id string, now time.Time) (bool, error) {
	if !isUUID(id) {
		return false, nil
	}
	tag, err := db.Pool.Exec(ctx, `UPDATE approvals SET state = 'expired'
		WHERE workspace_id = $1 AND id = $2 AND state IN ('pending', 'approved') AND expires_at <= $3`, workspaceID, id, now)
	if err != nil {
		return false, mapError(err, "")
	}
	return tag.RowsAffected() == 1, nil
}

// ApprovalUse is the call that wants to use an approval. ArgsHashes are
// the bindings (see CreateApproval's argsHash) that may spend it.
type ApprovalUse struct {
	WorkspaceID, ID, KeyID, GrantID, UserID, Tool string
	ArgsHashes                                    []string
	Now                                           time.Time
}

// UseApproval spends an approved, unexpired request for exactly this call
// (workspace, key or grant, user, tool and arguments) in one UPDATE: of any number of
// concurrent calls on any replicas, exactly one gets true.
func (db *DB) UseApproval(ctx context.Context, u ApprovalUse) (bool, error) {
	if !isUUID(u.ID) {
		return false, nil
	}
	tag, err := db.Pool.Exec(ctx, `UPDATE approvals SET state = 'used', used_at = $7
		WHERE workspace_id = $1 AND id = $2 AND state = 'approved' AND expires_at > $7
		  AND key_id = $3 AND grant_id = $8 AND user_id::text = $4 AND tool = $5 AND args_hash = ANY($6)`,
		u.WorkspaceID, u.ID, u.KeyID, u.UserID, u.Tool, u.ArgsHashes, u.Now, u.GrantID)
	if err != nil {
		return false, mapError(err, "")
	}
	return tag.RowsAffected() == 1, nil
}

// Guardrails returns a workspace's guardrails; a workspace without a row
// has none (zero values).
func (db *DB) Guardrails(ctx context.Context, workspaceID string) (mcpgate.Guardrails, error) {
	g := mcpgate.Guardrails{AllowedTemplates: []string{}}
	err := db.Pool.QueryRow(ctx, `SELECT max_timeout, max_running, allowed_templates FROM workspace_guardrails WHERE workspace_id = $1`,
		workspaceID).Scan(&g.MaxTimeoutSeconds, &g.MaxRunning, &g.AllowedTemplates)
	if errors.Is(err, pgx.ErrNoRows) {
		return g, nil
	}
	return g, mapError(err, "")
}

// SetGuardrails replaces a workspace's guardrails; every replica drops its
// cached policy (which carries them) when it commits.
func (db *DB) SetGuardrails(ctx context.Context, workspaceID, userID string, g mcpgate.Guardrails) error {
	return mapError(db.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO workspace_guardrails (workspace_id, max_timeout, max_running, allowed_templates, updated_by, updated_at)
			VALUES ($1, $2, $3, $4, $5, now())
			ON CONFLICT (workspace_id) DO UPDATE SET max_timeout = EXCLUDED.max_timeout, max_running = EXCLUDED.max_running,
				allowed_templates = EXCLUDED.allowed_templates, updated_by = EXCLUDED.updated_by, updated_at = now()`,
			workspaceID, g.MaxTimeoutSeconds, g.MaxRunning, g.AllowedTemplates, nullIfEmpty(userID))
		if err != nil {
			return err
		}
		return notify(ctx, tx, InvalidatePolicy, workspaceID)
	}), wsNotFound)
}

// approvalRetention is how long decided requests are kept for the
// approvals pages; the audit log keeps the record of every step beyond it.
const approvalRetention = 30 * 24 * time.Hour

// ExpireApprovals marks every pending or approved request past its expiry
// as expired and returns them, so that each expiry is audited once even
// when nobody touches the request again (and on one replica only). It also
// deletes requests older than the retention.
func (db *DB) ExpireApprovals(ctx context.Context, now time.Time) ([]mcpgate.ApprovalRequest, error) {
	if _, err := db.Pool.Exec(ctx, `DELETE FROM approvals WHERE created_at < $1`, now.Add(-approvalRetention)); err != nil {
		return nil, mapError(err, "")
	}
	rows, err := db.Pool.Query(ctx, `UPDATE approvals SET state = 'expired'
		WHERE state IN ('pending', 'approved') AND expires_at <= $1
		RETURNING id, workspace_id, key_id, grant_id, user_id, tool, arguments`, now)
	if err != nil {
		return nil, mapError(err, "")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (mcpgate.ApprovalRequest, error) {
		var ap mcpgate.ApprovalRequest
		var args []byte
		if err := r.Scan(&ap.ID, &ap.WorkspaceID, &ap.KeyID, &ap.GrantID, &ap.RequestedBy, &ap.Tool, &args); err != nil {
			return ap, err
		}
		ap.State = mcpgate.ApprovalExpired
		return ap, json.Unmarshal(args, &ap.Arguments)
	})
	return out, mapError(err, "")
}
