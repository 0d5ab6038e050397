package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

func mustInsertAudit(t *testing.T, db *store.DB, events ...mcpgate.AuditEvent) {
	t.Helper()
	if err := db.InsertAudit(context.Background(), events); err != nil {
		t.Fatalf("InsertAudit() err = %v", err)
	}
}

func count(t *testing.T, db *store.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func TestAudit_ListAndHourlyScopedByWorkspaceAndActor(t *testing.T) {
	db, wsA, a, wsB, b := openTwoWorkspaces(t)
	ctx := context.Background()
	now := time.Now().UTC()
	ev := func(ws, actor string, outcome mcpgate.Outcome) mcpgate.AuditEvent {
		return mcpgate.AuditEvent{WorkspaceID: ws, ActorID: actor, Kind: "tool_call", Action: "e2b_list_sandboxes",
			Outcome: outcome, CreatedAt: now}
	}
	err := db.InsertAudit(ctx, []mcpgate.AuditEvent{
		ev(wsA, a.ID, mcpgate.OutcomeOK), ev(wsA, a.ID, mcpgate.OutcomeError),
		ev(wsA, "", mcpgate.OutcomeOK), ev(wsB, b.ID, mcpgate.OutcomeOK),
	})
	if err != nil {
		t.Fatalf("InsertAudit() err = %v", err)
	}
	tests := []struct {
		name, ws, actor      string
		wantCalls, wantFails int
	}{
		{name: "whole workspace", ws: wsA, wantCalls: 3, wantFails: 1},
		{name: "one actor", ws: wsA, actor: a.ID, wantCalls: 2, wantFails: 1},
		{name: "actor of another workspace", ws: wsA, actor: b.ID},
		{name: "other workspace", ws: wsB, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buckets, err := db.AuditHourly(ctx, tt.ws, tt.actor, now.Add(-time.Hour))
			if err != nil {
				t.Fatalf("AuditHourly() err = %v", err)
			}
			calls, fails := 0, 0
			for _, b := range buckets {
				calls += b.Calls
				fails += b.Errors
			}
			if calls != tt.wantCalls || fails != tt.wantFails {
				t.Fatalf("AuditHourly() = %d calls, %d errors; want %d, %d", calls, fails, tt.wantCalls, tt.wantFails)
			}
			items, _, err := db.ListAudit(ctx, tt.ws, mcpgate.AuditFilter{ActorID: tt.actor})
			if err != nil || len(items) != tt.wantCalls {
				t.Fatalf("ListAudit() = %d items, %v; want %d", len(items), err, tt.wantCalls)
			}
		})
	}
}

// Pages follow (created_at, id) across day partitions, with no row twice or
// missing, and the source filter keeps to its source.
func TestListAudit_PagesAcrossPartitionsAndFiltersSource(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	ws, u := mustWorkspace(t, db, "a@example.com")
	now := time.Now().UTC()
	var events []mcpgate.AuditEvent
	for i := range 30 {
		src := "mcp"
		if i%3 == 0 {
			src = "dashboard"
		}
		// Ten days back, several rows on the same instant: the id breaks ties.
		events = append(events, mcpgate.AuditEvent{WorkspaceID: ws, ActorID: u.ID, Kind: "tool_call", Action: "e2b_list_sandboxes",
			Outcome: mcpgate.OutcomeOK, Source: mcpgate.Source(src), CreatedAt: now.Add(-time.Duration(i/2) * 16 * time.Hour)})
	}
	mustInsertAudit(t, db, events...)
	seen := map[int64]bool{}
	var last time.Time
	cursor, pages := "", 0
	for {
		items, next, err := db.ListAudit(ctx, ws, mcpgate.AuditFilter{Limit: 4, Cursor: cursor})
		if err != nil {
			t.Fatalf("ListAudit(cursor %q) err = %v", cursor, err)
		}
		for _, e := range items {
			if seen[e.ID] {
				t.Fatalf("event %d listed twice", e.ID)
			}
			if !last.IsZero() && e.CreatedAt.After(last) {
				t.Fatalf("event %d at %v after %v: not newest first", e.ID, e.CreatedAt, last)
			}
			seen[e.ID], last = true, e.CreatedAt
		}
		pages++
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 30 || pages != 8 {
		t.Fatalf("listed %d events in %d pages, want 30 in 8", len(seen), pages)
	}
	for src, want := range map[string]int{"mcp": 20, "dashboard": 10} {
		items, _, err := db.ListAudit(ctx, ws, mcpgate.AuditFilter{Source: mcpgate.Source(src), Limit: 200})
		if err != nil || len(items) != want {
			t.Fatalf("ListAudit(source %s) = %d items, %v; want %d", src, len(items), err, want)
		}
		for _, e := range items {
			if string(e.Source) != src {
				t.Fatalf("ListAudit(source %s) returned source %q", src, e.Source)
			}
		}
	}
	for _, bad := range []string{"12", "x_1", "1_x", "1_0"} {
		if _, _, err := db.ListAudit(ctx, ws, mcpgate.AuditFilter{Cursor: bad}); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
			t.Fatalf("ListAudit(cursor %q) err = %v, want invalid", bad, err)
		}
	}
	if _, _, err := db.ListAudit(ctx, ws, mcpgate.AuditFilter{ActorID: "not-a-uuid"}); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ListAudit(actor not a uuid) err = %v, want invalid", err)
	}
}

// The rollup counts each tool call once, by hour, actor and source; admin
// actions are not calls.
func TestInsertAudit_KeepsHourlyRollup(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	ws, u := mustWorkspace(t, db, "a@example.com")
	hour := time.Now().UTC().Truncate(time.Hour)
	ev := func(at time.Time, actor string, o mcpgate.Outcome, kind string) mcpgate.AuditEvent {
		return mcpgate.AuditEvent{WorkspaceID: ws, ActorID: actor, Kind: mcpgate.AuditKind(kind), Action: "x", Outcome: o, Source: "mcp", CreatedAt: at}
	}
	mustInsertAudit(t, db, ev(hour.Add(time.Minute), u.ID, mcpgate.OutcomeOK, "tool_call"),
		ev(hour.Add(2*time.Minute), u.ID, mcpgate.OutcomeDenied, "tool_call"),
		ev(hour.Add(3*time.Minute), "", mcpgate.OutcomeOK, "tool_call"),
		ev(hour.Add(4*time.Minute), u.ID, mcpgate.OutcomeOK, "admin"),
		ev(hour.Add(-time.Minute), u.ID, mcpgate.OutcomeError, "tool_call"))
	mustInsertAudit(t, db, ev(hour.Add(5*time.Minute), u.ID, mcpgate.OutcomeOK, "tool_call"))
	buckets, err := db.AuditHourly(ctx, ws, "", hour.Add(-time.Hour))
	if err != nil {
		t.Fatalf("AuditHourly() err = %v", err)
	}
	want := []store.AuditBucket{{Hour: hour.Add(-time.Hour), Calls: 1, Errors: 1}, {Hour: hour, Calls: 4, Errors: 1}}
	if len(buckets) != 2 || !buckets[0].Hour.Equal(want[0].Hour) || buckets[0].Calls != 1 || buckets[0].Errors != 1 ||
		!buckets[1].Hour.Equal(want[1].Hour) || buckets[1].Calls != 4 || buckets[1].Errors != 1 {
		t.Fatalf("AuditHourly() = %+v, want %+v", buckets, want)
	}
	mine, err := db.AuditHourly(ctx, ws, u.ID, hour)
	if err != nil || len(mine) != 1 || mine[0].Calls != 3 {
		t.Fatalf("AuditHourly(actor) = %+v, %v; want 3 calls", mine, err)
	}
	mustInsertAudit(t, db, mcpgate.AuditEvent{WorkspaceID: ws, ActorID: u.ID, Kind: "tool_call", Action: "x",
		Outcome: mcpgate.OutcomeError, Source: "dashboard", CreatedAt: hour.Add(6 * time.Minute)})
	for src, want := range map[string][2]int{"mcp": {3, 1}, "dashboard": {1, 1}, "": {4, 2}} {
		got, err := db.AuditHourlyFrom(ctx, ws, u.ID, src, hour)
		if err != nil || len(got) != 1 || got[0].Calls != want[0] || got[0].Errors != want[1] {
			t.Fatalf("AuditHourlyFrom(actor, %q) = %+v, %v; want %v", src, got, err, want)
		}
	}
}

// An event written twice (a spool replayed again after a crash, a retry
// after a lost commit) is stored once and counted once in the rollup, in
// the same batch or another, even on another day's partition; events
// without an id are all kept, as before.
func TestInsertAudit_StoresAnEventIDOnce(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	ws, u := mustWorkspace(t, db, "a@example.com")
	hour := time.Now().UTC().Truncate(time.Hour)
	ev := func(id string, at time.Time) mcpgate.AuditEvent {
		return mcpgate.AuditEvent{EventID: id, WorkspaceID: ws, ActorID: u.ID, Kind: mcpgate.KindToolCall, Action: "x",
			Outcome: mcpgate.OutcomeError, Source: "mcp", CreatedAt: at}
	}
	a := ev("0b6f2f7e-8a4c-4d7e-9f3a-2c1d5e6f7a81", hour.Add(time.Minute))
	b := ev("0b6f2f7e-8a4c-4d7e-9f3a-2c1d5e6f7a82", hour.Add(2*time.Minute))
	tomorrow := ev("0b6f2f7e-8a4c-4d7e-9f3a-2c1d5e6f7a83", hour.Add(25*time.Hour))
	mustInsertAudit(t, db, a, b, tomorrow)
	mustInsertAudit(t, db, a, b, tomorrow, a) // the whole batch again, and a twice in it
	mustInsertAudit(t, db, ev("", hour.Add(3*time.Minute)), ev("", hour.Add(3*time.Minute)))
	if n := count(t, db, `SELECT count(*) FROM audit_log WHERE workspace_id = $1`, ws); n != 5 {
		t.Fatalf("rows = %d, want 5 (3 events with an id once each, 2 without)", n)
	}
	buckets, err := db.AuditHourly(ctx, ws, "", hour)
	if err != nil || len(buckets) != 2 || buckets[0].Calls != 4 || buckets[0].Errors != 4 || buckets[1].Calls != 1 {
		t.Fatalf("AuditHourly() = %+v, %v; want 4 calls (4 errors) this hour and 1 tomorrow", buckets, err)
	}
}

// The aggregate row of rate-limited calls (kind refused) is stored and
// listed like any other, filterable by its kind, and not counted as a tool
// call in the hourly rollup.
func TestInsertAudit_RefusedCallsRow(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	ws, u := mustWorkspace(t, db, "a@example.com")
	mustInsertAudit(t, db, mcpgate.AuditEvent{WorkspaceID: ws, ActorID: u.ID, KeyID: "k1", Kind: mcpgate.KindRefused,
		Action: "rate_limit", Outcome: mcpgate.OutcomeDenied, Source: "mcp", Message: "5 tool calls refused",
		Arguments: map[string]any{"refused_calls": 5, "limit": "key"}})
	items, _, err := db.ListAudit(ctx, ws, mcpgate.AuditFilter{Kind: mcpgate.KindRefused})
	if err != nil || len(items) != 1 || items[0].Arguments["refused_calls"] != float64(5) || items[0].KeyID != "k1" {
		t.Fatalf("ListAudit(kind refused) = %+v, %v; want the one row", items, err)
	}
	if n := count(t, db, `SELECT count(*) FROM audit_hourly WHERE workspace_id = $1`, ws); n != 0 {
		t.Errorf("rollup rows = %d, want 0: refused calls are not tool calls", n)
	}
}

// A batch for a day without a partition (a restored backup, a writer that
// was down for a week) adds the partition; a batch whose workspace was
// deleted meanwhile is not retried for ever.
func TestInsertAudit_AddsPartitionsAndSkipsDeletedWorkspaces(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	ws, u := mustWorkspace(t, db, "a@example.com")
	gone := mustUser(t, db, "gone@example.com")
	goneWS, _ := db.WorkspacesOfUser(ctx, gone.ID)
	far := time.Now().UTC().AddDate(0, 0, 40)
	mustInsertAudit(t, db, mcpgate.AuditEvent{WorkspaceID: ws, ActorID: u.ID, Kind: "tool_call", Action: "x",
		Outcome: mcpgate.OutcomeOK, Source: "mcp", CreatedAt: far})
	if n := count(t, db, `SELECT count(*) FROM audit_log WHERE created_at = $1`, far); n != 1 {
		t.Fatalf("rows on a day 40 days ahead = %d, want 1", n)
	}
	if _, err := db.Pool.Exec(ctx, `DELETE FROM workspaces WHERE id = $1`, goneWS[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, gone.ID); err != nil {
		t.Fatal(err)
	}
	mustInsertAudit(t, db,
		mcpgate.AuditEvent{WorkspaceID: goneWS[0].ID, ActorID: gone.ID, Kind: "tool_call", Action: "x", Outcome: mcpgate.OutcomeOK, Source: "mcp"},
		mcpgate.AuditEvent{WorkspaceID: ws, ActorID: gone.ID, Kind: "admin", Action: "member.removed", Outcome: mcpgate.OutcomeOK, Source: "dashboard"})
	if n := count(t, db, `SELECT count(*) FROM audit_log WHERE workspace_id = $1 AND action = 'member.removed' AND actor_id IS NULL`, ws); n != 1 {
		t.Fatalf("rows kept with the deleted actor cleared = %d, want 1", n)
	}
	if n := count(t, db, `SELECT count(*) FROM audit_log WHERE workspace_id = $1`, goneWS[0].ID); n != 0 {
		t.Fatalf("rows of a deleted workspace = %d, want 0", n)
	}
}

// Retention deletes old rows of the pre-partitioning partition in batches,
// then drops whole day partitions older than the cutoff and finally the
// pre-partitioning one, trims the rollup, and keeps everything younger;
// replicas running it at once do it once.
func TestMaintainAudit_Retention(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	ws, u := mustWorkspace(t, db, "a@example.com")
	now := time.Now().UTC()
	const retention = 30 * 24 * time.Hour
	var legacy string
	if err := db.Pool.QueryRow(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'audit_log'::regclass AND c.relname LIKE 'audit_log_before_%'`).Scan(&legacy); err != nil {
		t.Fatalf("find the pre-partitioning partition: %v", err)
	}
	// Rows in the pre-partitioning partition, as an upgraded database has
	// them: 100 past the retention, one within.
	if _, err := db.Pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (workspace_id, kind, action, outcome, source, created_at)
		SELECT $1, 'tool_call', 'x', 'ok', 'mcp', $2::timestamptz - g * interval '25 hours' FROM generate_series(0, 100) g`, legacy),
		ws, now.AddDate(0, 0, -29)); err != nil {
		t.Fatal(err)
	}
	ev := func(at time.Time) mcpgate.AuditEvent {
		return mcpgate.AuditEvent{WorkspaceID: ws, ActorID: u.ID, Kind: "tool_call", Action: "x", Outcome: mcpgate.OutcomeOK,
			Source: "mcp", CreatedAt: at}
	}
	mustInsertAudit(t, db, ev(now.AddDate(0, 0, -40)), ev(now.AddDate(0, 0, -1)))

	const replicas = 3
	results := make([]store.AuditMaintenance, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() { results[i], errs[i] = db.MaintainAudit(ctx, now, retention) })
	}
	wg.Wait()
	var deleted, hours int64
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("MaintainAudit() on replica %d err = %v", i, errs[i])
		}
		deleted, hours = deleted+results[i].RowsDeleted, hours+results[i].HoursDeleted
	}
	if deleted != 101 || hours != 1 {
		t.Fatalf("rows deleted = %d, rollup hours deleted = %d (%+v); want 101 and 1, once", deleted, hours, results)
	}
	if n := count(t, db, `SELECT count(*) FROM audit_log`); n != 2 {
		t.Fatalf("rows left = %d, want the 2 within the retention", n)
	}
	// Partitions for the coming days exist, so inserts never wait for DDL.
	legacyEnd, err := time.Parse("20060102", legacy[len("audit_log_before_"):])
	if err != nil {
		t.Fatal(err)
	}
	for i := range store.AuditPartitionsAhead + 1 {
		day := now.AddDate(0, 0, i).Truncate(24 * time.Hour)
		if day.Before(legacyEnd) {
			continue // covered by the pre-partitioning partition
		}
		name := "audit_log_p" + day.Format("20060102")
		if n := count(t, db, `SELECT count(*) FROM pg_class WHERE relname = $1`, name); n != 1 {
			t.Fatalf("partition %s missing after maintenance", name)
		}
	}

	// 200 days on, rows land in day partitions; those wholly past the
	// retention are dropped, and the pre-partitioning partition with them.
	later := now.AddDate(0, 0, 200)
	for _, days := range []int{100, 40, 31, 29, 1, 0} {
		mustInsertAudit(t, db, ev(later.AddDate(0, 0, -days)))
	}
	cutoff := later.Add(-retention)
	kept := count(t, db, `SELECT count(*) FROM audit_log WHERE created_at >= $1`, cutoff)
	res, err := db.MaintainAudit(ctx, later, retention)
	if err != nil {
		t.Fatalf("MaintainAudit() 200 days later err = %v", err)
	}
	if res.PartitionsDropped < 4 {
		t.Fatalf("MaintainAudit() = %+v, want at least 4 partitions dropped", res)
	}
	if n := count(t, db, `SELECT count(*) FROM audit_log WHERE created_at < $1::timestamptz - interval '1 day'`, cutoff); n != 0 {
		t.Fatalf("rows more than a day past the retention = %d, want 0", n)
	}
	if n := count(t, db, `SELECT count(*) FROM audit_log WHERE created_at >= $1`, cutoff); n != kept || kept != 3 {
		t.Fatalf("rows within the retention = %d, want %d (3) kept", n, kept)
	}
	if n := count(t, db, `SELECT count(*) FROM pg_class WHERE relname = $1`, legacy); n != 0 {
		t.Fatalf("pre-partitioning partition %s still there after %+v", legacy, res)
	}
	if n := count(t, db, `SELECT count(*) FROM audit_hourly WHERE hour < $1::timestamptz - interval '1 hour'`, cutoff); n != 0 {
		t.Fatalf("rollup hours past the retention = %d, want 0", n)
	}
	if n := count(t, db, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'audit_log'::regclass AND inhdetachpending`); n != 0 {
		t.Fatalf("%d partitions left half-detached", n)
	}
}

// Without a retention nothing is removed.
func TestMaintainAudit_NoRetentionKeepsEverything(t *testing.T) {
	db := storetest.Open(t)
	ws, u := mustWorkspace(t, db, "a@example.com")
	mustInsertAudit(t, db, mcpgate.AuditEvent{WorkspaceID: ws, ActorID: u.ID, Kind: "tool_call", Action: "x",
		Outcome: mcpgate.OutcomeOK, Source: "mcp", CreatedAt: time.Now().AddDate(-3, 0, 0)})
	res, err := db.MaintainAudit(context.Background(), time.Now(), 0)
	if err != nil || res.PartitionsDropped != 0 {
		t.Fatalf("MaintainAudit(no retention) = %+v, %v; want nothing dropped", res, err)
	}
	if n := count(t, db, `SELECT count(*) FROM audit_log`); n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
}

// StreamAudit hands over every matching row of the workspace, oldest first,
// and nothing of another workspace.
func TestStreamAudit_ScopedOrderedAndFiltered(t *testing.T) {
	db, wsA, a, wsB, b := openTwoWorkspaces(t)
	ctx := context.Background()
	now := time.Now().UTC()
	for i := range 5 {
		mustInsertAudit(t, db,
			mcpgate.AuditEvent{WorkspaceID: wsA, ActorID: a.ID, Kind: "tool_call", Action: "x", Outcome: mcpgate.OutcomeOK, Source: "mcp",
				CreatedAt: now.Add(-time.Duration(i) * 20 * time.Hour)},
			mcpgate.AuditEvent{WorkspaceID: wsB, ActorID: b.ID, Kind: "tool_call", Action: "x", Outcome: mcpgate.OutcomeOK, Source: "mcp",
				CreatedAt: now.Add(-time.Duration(i) * 20 * time.Hour)})
	}
	var got []mcpgate.AuditEvent
	err := db.StreamAudit(ctx, wsA, mcpgate.AuditFilter{Since: now.Add(-70 * time.Hour)}, func(e *mcpgate.AuditEvent) error {
		got = append(got, *e)
		return nil
	})
	if err != nil {
		t.Fatalf("StreamAudit() err = %v", err)
	}
	if len(got) != 4 {
		t.Fatalf("StreamAudit(since 70h) = %d rows, want 4", len(got))
	}
	for i, e := range got {
		if e.WorkspaceID != wsA || e.ActorID != a.ID {
			t.Fatalf("StreamAudit() row of workspace %s actor %s", e.WorkspaceID, e.ActorID)
		}
		if i > 0 && e.CreatedAt.Before(got[i-1].CreatedAt) {
			t.Fatalf("StreamAudit() not oldest first at row %d", i)
		}
	}
	stop := fmt.Errorf("stop")
	n := 0
	if err := db.StreamAudit(ctx, wsA, mcpgate.AuditFilter{}, func(*mcpgate.AuditEvent) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("StreamAudit() with a failing callback = %v after %d rows, want its error after 1", err, n)
	}
}
