package audit_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// lostCommit is the database whose answer to a commit is lost: batch
// number lose is stored, and the caller is told it failed (a connection
// cut after COMMIT, or the process killed between the insert and the
// record of its progress).
type lostCommit struct {
	db    *store.DB
	mu    sync.Mutex
	calls int
	lose  int
}

func (s *lostCommit) InsertAudit(ctx context.Context, evs []mcpgate.AuditEvent) error {
	s.mu.Lock()
	s.calls++
	lose := s.calls == s.lose
	s.mu.Unlock()
	if err := s.db.InsertAudit(ctx, evs); err != nil {
		return err
	}
	if lose {
		return errors.New("connection reset after COMMIT")
	}
	return nil
}

// mustWorkspaceID creates a workspace for audit rows to belong to.
func mustWorkspaceID(t *testing.T, db *store.DB) string {
	t.Helper()
	var id string
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO workspaces (name) VALUES ('audit') RETURNING id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func dbCount(t *testing.T, db *store.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// recent gives events times of the last minutes (a partition the
// database has) and the workspace ws.
func recent(ws string, evs []mcpgate.AuditEvent) []mcpgate.AuditEvent {
	now := time.Now().UTC()
	for i := range evs {
		evs[i].WorkspaceID = ws
		evs[i].CreatedAt = now.Add(-time.Duration(len(evs)-i) * time.Second)
	}
	return evs
}

// TestSpool_CrashBetweenInsertAndProgress: a replay whose second batch was
// stored but not recorded as done (the commit's answer lost, or a crash
// before the progress file) is replayed again from where the record says;
// the real database ends with each event once, in the log and the hourly
// rollup.
func TestSpool_CrashBetweenInsertAndProgress(t *testing.T) {
	db := storetest.Open(t)
	ws := mustWorkspaceID(t, db)
	dir := t.TempDir()
	sp := mustOpenSpool(t, dir)
	if n, err := sp.Append(recent(ws, withIDs(events(30)))); n != 30 || err != nil {
		t.Fatalf("Append() = %d, %v", n, err)
	}
	if _, err := sp.Replay(context.Background(), &lostCommit{db: db, lose: 2}, 10); err == nil {
		t.Fatal("Replay() with the second commit's answer lost err = nil")
	}
	sp = reopen(t, sp, dir) // the next start
	res, err := sp.Replay(context.Background(), db, 10)
	if err != nil {
		t.Fatalf("resumed Replay() err = %v", err)
	}
	if n := dbCount(t, db, `SELECT count(*) FROM audit_log WHERE workspace_id = $1`, ws); n != 30 {
		t.Fatalf("audit rows = %d after the replay was repeated (%d events replayed again), want 30", n, res.Replayed)
	}
	if n := dbCount(t, db, `SELECT count(DISTINCT action) FROM audit_log WHERE workspace_id = $1`, ws); n != 30 {
		t.Fatalf("distinct events = %d, want 30", n)
	}
	if n := dbCount(t, db, `SELECT coalesce(sum(calls), 0) FROM audit_hourly WHERE workspace_id = $1`, ws); n != 30 {
		t.Fatalf("hourly rollup counts %d calls, want 30", n)
	}
}

// TestSpool_ReplayRepeatedFromTheStart: a crash after the whole replay was
// stored but before the spool was emptied, with no progress recorded (a
// full disk): the next start replays everything again and writes nothing.
func TestSpool_ReplayRepeatedFromTheStart(t *testing.T) {
	db := storetest.Open(t)
	ws := mustWorkspaceID(t, db)
	dir := t.TempDir()
	sp := mustOpenSpool(t, dir)
	evs := recent(ws, withIDs(events(25)))
	_, _ = sp.Append(evs)
	if err := db.InsertAudit(context.Background(), evs); err != nil { // the replay that crashed
		t.Fatal(err)
	}
	sp = reopen(t, sp, dir)
	audit.InjectSpoolFaults(sp, audit.SpoolFaults{Room: 0, ProgressErr: syscall.ENOSPC})
	if res, err := sp.Replay(context.Background(), db, 10); err != nil || res.Replayed != 25 {
		t.Fatalf("Replay() = %+v, %v", res, err)
	}
	if n := dbCount(t, db, `SELECT count(*) FROM audit_log WHERE workspace_id = $1`, ws); n != 25 {
		t.Fatalf("audit rows = %d, want 25", n)
	}
}

// TestWriter_OutageOnANearlyFullDisk is the stop during an outage
// with a disk that fills: the writer's counts are exact (every event either
// spooled or lost, as logged) and the next start writes every spooled event
// once.
func TestWriter_OutageOnANearlyFullDisk(t *testing.T) {
	db := storetest.Open(t)
	ws := mustWorkspaceID(t, db)
	dir := t.TempDir()
	const total = 400
	all := recent(ws, events(total)) // real times, for the log's partitions
	// The outage runs on synctest's fake clock, so how many calls are
	// answered before the queue saturates does not depend on scheduling;
	// the database is used only outside the bubble.
	var st audit.SpoolStats
	synctest.Test(t, func(t *testing.T) {
		sp := mustOpenSpool(t, dir)
		defer sp.Close()
		audit.InjectSpoolFaults(sp, audit.SpoolFaults{Room: encodedSize(t, all[:150]) + 77}) // some 120 events with their ids
		var logs bytes.Buffer
		w := newWriter(t, audit.Options{Sink: downSink{}, Spool: sp, QueueSize: 100, BatchSize: 25, FlushEvery: 5 * time.Millisecond,
			Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		// A tool call is refused while the queue is saturated (as the service
		// does), so every event recorded is a call that was answered.
		answered := int64(0)
		for _, ev := range all {
			if !eventually(2*time.Second, func() bool { return !w.Saturated() }) {
				break
			}
			w.Record(context.Background(), ev)
			answered++
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		closeErr := w.Close(ctx)
		st = w.SpoolStats()
		if answered < 200 || st.Spooled+st.Lost != answered || st.Spooled == 0 || st.Lost == 0 || int64(st.Events) != st.Spooled || !st.Full {
			t.Fatalf("SpoolStats() = %+v; want the %d answered either spooled (what the disk had room for, all in the file) "+
				"or lost, and the spool full", st, answered)
		}
		t.Logf("%d answered: %d spooled, %d lost", answered, st.Spooled, st.Lost)
		if closeErr == nil {
			t.Error("Close() err = nil with events lost")
		}
		lost, spooled := logged(logs.String(), "audit events lost at shutdown"),
			logged(logs.String(), "audit events spooled at shutdown")+logged(logs.String(), "audit events spooled during the database outage")
		if int64(lost) != st.Lost || int64(spooled) != st.Spooled {
			t.Errorf("log says %d spooled and %d lost, want %d and %d", spooled, lost, st.Spooled, st.Lost)
		}
	})
	sp := mustOpenSpool(t, dir)
	defer sp.Close()
	if res, err := sp.Replay(context.Background(), db, 100); err != nil || int64(res.Replayed) != st.Spooled || res.Damaged != 0 {
		t.Fatalf("Replay() = %+v, %v; want the %d spooled events, none damaged", res, err, st.Spooled)
	}
	if n := dbCount(t, db, `SELECT count(*) FROM audit_log WHERE workspace_id = $1`, ws); int64(n) != st.Spooled {
		t.Fatalf("audit rows = %d, want %d", n, st.Spooled)
	}
}
