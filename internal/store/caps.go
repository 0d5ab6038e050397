package store

import "context"

// CountLiveKeys returns how many working (unrevoked, unexpired) MCP keys a
// user owns, in every workspace.
func (db *DB) CountLiveKeys(ctx context.Context, userID string) (int, error) {
	var n int
	err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM api_keys
		WHERE user_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`, userID).Scan(&n)
	return n, mapError(err, "")
}

// CountOwnedWorkspaces returns how many non-personal workspaces a user owns.
func (db *DB) CountOwnedWorkspaces(ctx context.Context, userID string) (int, error) {
	var n int
	err := db.Pool.QueryRow(ctx, `
		SELECT count(*) FROM members m JOIN workspaces w ON w.id = m.workspace_id
		WHERE m.user_id = $1 AND m.role = 'owner' AND NOT w.personal`, userID).Scan(&n)
	return n, mapError(err, "")
}
