package store_test

import (
	"context"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// TestSetServerSessionScope: a server starts with person scope; setting
// client scope is read back with the row, survives a change of the server
// (which writes the rest of the row), touches no other workspace's server
// of the same name, and an unknown scope or server is refused.
func TestSetServerSessionScope(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	k := mustKeyringOn(t, db, testRoot)
	ws, _ := mustWorkspace(t, db, "ada@example.com")
	other, _ := mustWorkspace(t, db, "bob@example.com")
	mustPutServer(t, db, k, ws, "files", "files_read")
	mustPutServer(t, db, k, other, "files", "files_read")
	row, err := db.FindServer(ctx, ws, "files")
	if err != nil || row.SessionScope != mcpgate.ScopePerson {
		t.Fatalf("new server's scope = %q (%v), want person", row.SessionScope, err)
	}
	if err := db.SetServerSessionScope(ctx, ws, "files", mcpgate.ScopeClient); err != nil {
		t.Fatal(err)
	}
	mustPutServer(t, db, k, ws, "files", "files_read") // rewrites the row
	if row, _ := db.FindServer(ctx, ws, "files"); row.SessionScope != mcpgate.ScopeClient {
		t.Errorf("scope = %q after a change of the server, want client kept", row.SessionScope)
	}
	if row, _ := db.FindServer(ctx, other, "files"); row.SessionScope != mcpgate.ScopePerson {
		t.Errorf("the other workspace's server has scope %q, want person", row.SessionScope)
	}
	if err := db.SetServerSessionScope(ctx, ws, "files", "shared"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Errorf("unknown scope err = %v, want invalid", err)
	}
	if err := db.SetServerSessionScope(ctx, ws, "nope", mcpgate.ScopeClient); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("unknown server err = %v, want not found", err)
	}
}
