package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
)

// ToolPolicies returns a workspace's stored tool settings by tool name. Tools
// without a row use their connector's defaults, which the caller applies.
func (db *DB) ToolPolicies(ctx context.Context, workspaceID string) (map[string]mcpgate.ToolPolicy, error) {
	rows, err := db.Pool.Query(ctx, `SELECT tool, enabled, approval FROM tool_policies WHERE workspace_id = $1`, workspaceID)
	if err != nil {
		return nil, mapError(err, "")
	}
	out := map[string]mcpgate.ToolPolicy{}
	var p mcpgate.ToolPolicy
	_, err = pgx.ForEachRow(rows, []any{&p.Tool, &p.Enabled, &p.Approval}, func() error {
		out[p.Tool] = p
		return nil
	})
	return out, mapError(err, "")
}

// SetToolPolicy stores a workspace's setting for one tool; every replica
// drops its cached policy for the workspace when it commits.
func (db *DB) SetToolPolicy(ctx context.Context, workspaceID, userID string, p mcpgate.ToolPolicy) error {
	return mapError(db.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO tool_policies (workspace_id, tool, enabled, approval, updated_by, updated_at)
			VALUES ($1, $2, $3, $4, $5, now())
			ON CONFLICT (workspace_id, tool) DO UPDATE SET enabled = EXCLUDED.enabled, approval = EXCLUDED.approval,
				updated_by = EXCLUDED.updated_by, updated_at = now()`,
			workspaceID, p.Tool, p.Enabled, string(p.Approval), nullIfEmpty(userID))
		if err != nil {
			return err
		}
		return notify(ctx, tx, InvalidatePolicy, workspaceID)
	}), wsNotFound)
}

// SpendToken marks a single-use token id as spent until expiry. It returns
// false when the token was already spent (a replay), on any replica.
func (db *DB) SpendToken(ctx context.Context, id string, expiresAt time.Time) (bool, error) {
	tag, err := db.Pool.Exec(ctx, `INSERT INTO spent_tokens (id, expires_at) VALUES ($1, $2) ON CONFLICT DO NOTHING`, id, expiresAt)
	if err != nil {
		return false, mapError(err, "")
	}
	return tag.RowsAffected() == 1, nil
}
