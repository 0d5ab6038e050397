package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

var testChecks = store.CheckIntervals{Down: 30 * time.Second, Up: 15 * time.Minute}

// A check is claimed once: a row another replica holds (its claim not
// committed yet) is skipped without waiting and stays due for later, a
// claimed row is no longer due, a server that is down is due again after
// the probe interval, one that is up after the re-discovery interval, and a
// disabled server is never due.
func TestClaimServerChecks_OnceEach(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	k := mustKeyringOn(t, db, testRoot)
	ws, _ := mustWorkspace(t, db, "ada@example.com")
	mustPutServer(t, db, k, ws, "files", "files_read")
	mustPutServer(t, db, k, ws, "mail", "mail_read")
	mustPutServer(t, db, k, ws, "off", "off_read")
	if _, err := db.Pool.Exec(ctx, `UPDATE upstream_servers SET enabled = false WHERE name = 'off'`); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Add(time.Minute).Truncate(time.Millisecond)

	// Another replica is claiming "files": its lock is held.
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM upstream_servers WHERE name = 'files' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	got, err := db.ClaimServerChecks(ctx, now, testChecks, 10)
	if err != nil || len(got) != 1 || got[0].Name != "mail" || got[0].WorkspaceID != ws || got[0].Down {
		t.Fatalf("ClaimServerChecks() with files held = %+v, %v; want mail alone", got, err)
	}
	_ = tx.Rollback(ctx)
	if got, _ := db.ClaimServerChecks(ctx, now, testChecks, 10); len(got) != 1 || got[0].Name != "files" {
		t.Fatalf("ClaimServerChecks() once released = %+v, want files", got)
	}
	if got, _ := db.ClaimServerChecks(ctx, now, testChecks, 10); len(got) != 0 {
		t.Fatalf("ClaimServerChecks() again = %+v, want none", got)
	}

	// Down: once, with one invalidation; the reason follows, down_since stays.
	down, err := db.MarkServerDown(ctx, ws, "files", "the server cannot be reached", now, now.Add(30*time.Second))
	if err != nil || !down {
		t.Fatalf("MarkServerDown() = %v, %v; want the transition", down, err)
	}
	if down, err := db.MarkServerDown(ctx, ws, "files", "the server answered HTTP 503", now.Add(time.Second), now.Add(time.Hour)); err != nil || down {
		t.Fatalf("MarkServerDown(already down) = %v, %v; want no transition", down, err)
	}
	srv, _ := db.FindServer(ctx, ws, "files")
	if srv.Health != mcpgate.HealthError || !srv.DownSince.Equal(now) || srv.LastError != "the server answered HTTP 503" ||
		!srv.NextCheckAt.Equal(now.Add(30*time.Second)) {
		t.Fatalf("server = health %s since %v (%q), next %v", srv.Health, srv.DownSince, srv.LastError, srv.NextCheckAt)
	}
	if got, _ := db.ClaimServerChecks(ctx, now.Add(29*time.Second), testChecks, 10); len(got) != 0 {
		t.Errorf("claimed %+v before the probe is due", got)
	}
	got, _ = db.ClaimServerChecks(ctx, now.Add(30*time.Second), testChecks, 10)
	if len(got) != 1 || got[0].Name != "files" || !got[0].Down {
		t.Fatalf("ClaimServerChecks() when the probe is due = %+v", got)
	}
	if srv, _ := db.FindServer(ctx, ws, "files"); !srv.NextCheckAt.Equal(now.Add(time.Minute)) {
		t.Errorf("next probe = %v, want 30 s after the claim", srv.NextCheckAt)
	}

	// A claim asked for by a notice: not within minGap of the last check.
	if c, err := db.ClaimServerCheck(ctx, ws, "mail", now.Add(5*time.Second), 10*time.Second, testChecks); err != nil || c != nil {
		t.Errorf("ClaimServerCheck() 5 s after a check = %+v, %v; want none", c, err)
	}
	if c, _ := db.ClaimServerCheck(ctx, ws, "mail", now.Add(10*time.Second), 10*time.Second, testChecks); c == nil || c.Name != "mail" {
		t.Errorf("ClaimServerCheck() 10 s after = %+v, want mail", c)
	}
	other, _ := mustWorkspace(t, db, "bob@example.com")
	if c, _ := db.ClaimServerCheck(ctx, other, "mail", now.Add(time.Hour), 0, testChecks); c != nil {
		t.Errorf("another workspace claimed this one's server: %+v", c)
	}
	if c, _ := db.ClaimServerCheck(ctx, ws, "off", now.Add(time.Hour), 0, testChecks); c != nil {
		t.Errorf("a disabled server was claimed: %+v", c)
	}
}
