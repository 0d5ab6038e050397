package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// Last-use batches of keys and of grants move last_used_at forward only: a
// replica that flushes an older mark late must not undo a newer one.
func TestTouch_MovesLastUsedForwardOnly(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	ws, u := mustWorkspace(t, db, "touch@example.com")
	key := &mcpgate.APIKey{ID: "touchkey0001", WorkspaceID: ws, UserID: u.ID, Name: "k", Scope: mcpgate.ScopeFull}
	if err := db.CreateKey(ctx, key, []byte("hash")); err != nil {
		t.Fatal(err)
	}
	var grantID string
	if err := db.Pool.QueryRow(ctx, `
		WITH c AS (INSERT INTO oauth_clients (id, kind, name, redirect_uris) VALUES ('mcpc_touch', 'dcr', 'app', '{}'))
		INSERT INTO oauth_grants (workspace_id, user_id, client_id, scope, resource)
		VALUES ($1, $2, 'mcpc_touch', 'full', 'http://gw.test/mcp') RETURNING id`, ws, u.ID).Scan(&grantID); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		id       string
		touch    func(context.Context, map[string]time.Time) error
		lastUsed func() (*time.Time, error)
	}{
		{name: "keys", id: key.ID, touch: db.TouchKeys, lastUsed: func() (*time.Time, error) {
			k, err := db.FindKey(ctx, ws, key.ID)
			if err != nil {
				return nil, err
			}
			return k.LastUsedAt, nil
		}},
		{name: "grants", id: grantID, touch: db.TouchGrants, lastUsed: func() (*time.Time, error) {
			g, err := db.FindGrant(ctx, ws, grantID)
			if err != nil {
				return nil, err
			}
			return g.LastUsedAt, nil
		}},
	}
	newer := time.Now().Truncate(time.Microsecond)
	older := newer.Add(-time.Hour)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.touch(ctx, nil); err != nil {
				t.Fatalf("touch(empty batch) err = %v", err)
			}
			for _, at := range []time.Time{newer, older} {
				if err := tt.touch(ctx, map[string]time.Time{tt.id: at}); err != nil {
					t.Fatalf("touch(%v) err = %v", at, err)
				}
			}
			got, err := tt.lastUsed()
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !got.Equal(newer) {
				t.Fatalf("last_used_at = %v, want %v (the older mark must not win)", got, newer)
			}
		})
	}
}
