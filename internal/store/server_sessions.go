package store

import (
	"context"

	"github.com/mcpgate/mcpgate"
)

// SetServerSessionScope sets how the gateway scopes its sessions with one
// server of a workspace (the column is read with the server's row).
func (db *DB) SetServerSessionScope(ctx context.Context, workspaceID, name string, scope mcpgate.SessionScope) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	if !isUUID(workspaceID) {
		return mcpgate.Errorf(mcpgate.ENotFound, "%s", serverNotFound)
	}
	tag, err := db.Pool.Exec(ctx, `UPDATE upstream_servers SET session_scope = $3, updated_at = now()
		WHERE workspace_id = $1 AND name = $2`, workspaceID, name, string(scope))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return mcpgate.Errorf(mcpgate.ENotFound, "%s", serverNotFound)
	}
	return nil
}
