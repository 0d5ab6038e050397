package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// 00002 turns an existing audit log into the partitioned one without losing a
// row, relabels the dashboard's admin actions, fills the rollup from the old
// rows, and rolls back to the plain table with the same rows.
func TestMigrate_AuditPartitioningKeepsRowsBothWays(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, storetest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate() err = %v", err)
	}
	mustMigrateDownTo(t, db, 1)
	ws, u := mustWorkspace(t, db, "a@example.com")
	// The log as 00001 wrote it: tool calls over the last three days and an
	// admin action recorded as "api".
	if _, err := db.Pool.Exec(ctx, `
		INSERT INTO audit_log (workspace_id, actor_id, kind, action, outcome, source, created_at)
		SELECT $1, $2, 'tool_call', 'e2b_list_sandboxes', CASE WHEN g % 10 = 0 THEN 'error' ELSE 'ok' END, 'mcp',
			now() - g * interval '1 hour'
		FROM generate_series(1, 72) g`, ws, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO audit_log (workspace_id, actor_id, kind, action, outcome, source)
		VALUES ($1, $2, 'admin', 'key.created', 'ok', 'api')`, ws, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate() 00002 over data err = %v", err)
	}
	items, _, err := db.ListAudit(ctx, ws, mcpgate.AuditFilter{Limit: 200})
	if err != nil || len(items) != 73 {
		t.Fatalf("ListAudit() after 00002 = %d rows, %v; want 73", len(items), err)
	}
	if items[0].Action != "key.created" || items[0].Source != "dashboard" {
		t.Fatalf("newest row after 00002 = %s from %q, want key.created from dashboard", items[0].Action, items[0].Source)
	}
	buckets, err := db.AuditHourly(ctx, ws, "", time.Now().Add(-80*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	calls, errs := 0, 0
	for _, b := range buckets {
		calls, errs = calls+b.Calls, errs+b.Errors
	}
	if calls != 72 || errs != 7 {
		t.Fatalf("rollup after 00002 = %d calls, %d errors; want 72, 7", calls, errs)
	}
	mustInsertAudit(t, db, mcpgate.AuditEvent{WorkspaceID: ws, ActorID: u.ID, Kind: "tool_call", Action: "x",
		Outcome: mcpgate.OutcomeOK, Source: "mcp"})
	mustMigrateDownTo(t, db, 1)
	if n := count(t, db, `SELECT count(*) FROM audit_log`); n != 74 {
		t.Fatalf("rows after rolling back = %d, want 74", n)
	}
	if n := count(t, db, `SELECT count(*) FROM audit_log WHERE kind = 'admin' AND source = 'api'`); n != 1 {
		t.Fatalf("admin rows labelled api after rolling back = %d, want 1", n)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate() again err = %v", err)
	}
	if n := count(t, db, `SELECT count(*) FROM audit_log`); n != 74 {
		t.Fatalf("rows after migrating again = %d, want 74", n)
	}
}

// mustMigrateDownTo rolls migrations back one by one until version is the
// newest applied.
func mustMigrateDownTo(t *testing.T, db *store.DB, version int64) {
	t.Helper()
	ctx := context.Background()
	for {
		st, err := db.MigrationsStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var newest int64
		for _, m := range st {
			if m.Applied && m.Version > newest {
				newest = m.Version
			}
		}
		if newest <= version {
			return
		}
		if err := db.MigrateDown(ctx); err != nil {
			t.Fatalf("MigrateDown() from %d err = %v", newest, err)
		}
	}
}
