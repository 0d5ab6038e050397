package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
)

// notifyApproval tells every replica, at commit, that an approval request of
// a workspace was decided (InvalidateApproval).
func notifyApproval(ctx context.Context, tx pgx.Tx, workspaceID, id string) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, InvalidationChannel, InvalidateApproval+":"+workspaceID+":"+id)
	return err
}

// ApprovalWait returns how long, in seconds, the workspace's calls that need
// a person's approval hold open for the decision.
func (db *DB) ApprovalWait(ctx context.Context, workspaceID string) (int, error) {
	if !isUUID(workspaceID) {
		return 0, mcpgate.Errorf(mcpgate.ENotFound, wsNotFound)
	}
	var seconds int
	err := db.Pool.QueryRow(ctx, `SELECT approval_wait_seconds FROM workspaces WHERE id = $1`, workspaceID).Scan(&seconds)
	return seconds, mapError(err, wsNotFound)
}

// SetApprovalWait sets how long the workspace's calls that need a person's
// approval hold open for the decision; the caller checked the range (the
// table's CHECK refuses anything else).
func (db *DB) SetApprovalWait(ctx context.Context, workspaceID string, seconds int) error {
	if !isUUID(workspaceID) {
		return mcpgate.Errorf(mcpgate.ENotFound, wsNotFound)
	}
	tag, err := db.Pool.Exec(ctx, `UPDATE workspaces SET approval_wait_seconds = $2 WHERE id = $1`, workspaceID, seconds)
	if err != nil {
		return mapError(err, wsNotFound)
	}
	if tag.RowsAffected() == 0 {
		return mcpgate.Errorf(mcpgate.ENotFound, wsNotFound)
	}
	return nil
}
