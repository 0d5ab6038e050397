package audit_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/audit"
)

// sinkOf collects inserted events; failAfter, when positive, makes the
// insert after that many batches fail once.
type sinkOf struct {
	mu        sync.Mutex
	events    []mcpgate.AuditEvent
	batches   int
	failAfter int
}

func (s *sinkOf) InsertAudit(_ context.Context, evs []mcpgate.AuditEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAfter > 0 && s.batches == s.failAfter {
		s.failAfter = 0
		return errors.New("database away")
	}
	s.batches++
	s.events = append(s.events, evs...)
	return nil
}

func events(n int) []mcpgate.AuditEvent {
	out := make([]mcpgate.AuditEvent, n)
	for i := range out {
		out[i] = mcpgate.AuditEvent{WorkspaceID: "ws", Kind: mcpgate.KindToolCall, Action: fmt.Sprintf("tool_%d", i),
			Outcome: mcpgate.OutcomeOK, Arguments: map[string]any{"i": float64(i)}, CreatedAt: time.Unix(int64(i), 0).UTC()}
	}
	return out
}

// mustOpenSpool opens the spool in dir, bounded at 1 MiB.
func mustOpenSpool(t *testing.T, dir string) *audit.Spool {
	t.Helper()
	sp, err := audit.OpenSpool(dir, 1<<20)
	if err != nil {
		t.Fatalf("OpenSpool() err = %v", err)
	}
	return sp
}

// reopen closes sp and opens its directory again, as the next process does.
func reopen(t *testing.T, sp *audit.Spool, dir string) *audit.Spool {
	t.Helper()
	_ = sp.Close()
	return mustOpenSpool(t, dir)
}

func TestSpool_RoundTrip(t *testing.T) {
	dir := t.TempDir()
	sp := mustOpenSpool(t, dir)
	if n, err := sp.Append(events(25)); n != 25 || err != nil {
		t.Fatalf("Append() = %d, %v", n, err)
	}
	if st, _ := os.Stat(sp.Path()); st.Mode().Perm() != 0o600 {
		t.Errorf("spool mode = %v, want 0600", st.Mode().Perm())
	}
	// A new process opens it and replays.
	sp = reopen(t, sp, dir)
	sink := &sinkOf{}
	res, err := sp.Replay(context.Background(), sink, 10)
	if err != nil || res.Replayed != 25 || res.Damaged != 0 || len(sink.events) != 25 || sink.batches != 3 {
		t.Fatalf("Replay() = %+v, %v; sink has %d events in %d batches", res, err, len(sink.events), sink.batches)
	}
	if sink.events[24].Action != "tool_24" || !sink.events[24].CreatedAt.Equal(time.Unix(24, 0)) {
		t.Errorf("replayed event = %+v", sink.events[24])
	}
	if sp.Size() != 0 {
		t.Errorf("spool size after replay = %d, want 0", sp.Size())
	}
	if res, _ := sp.Replay(context.Background(), sink, 10); res.Replayed != 0 {
		t.Errorf("second replay wrote %d events again", res.Replayed)
	}
}

// A crash while appending leaves a torn last record: it is counted as
// damaged and the records before it are all replayed.
func TestSpool_TornTail(t *testing.T) {
	dir := t.TempDir()
	sp := mustOpenSpool(t, dir)
	_, _ = sp.Append(events(5))
	_ = sp.Close()
	b, _ := os.ReadFile(filepath.Join(dir, audit.SpoolFile))
	if err := os.WriteFile(filepath.Join(dir, audit.SpoolFile), b[:len(b)-7], 0o600); err != nil {
		t.Fatal(err)
	}
	sp = mustOpenSpool(t, dir)
	sink := &sinkOf{}
	res, err := sp.Replay(context.Background(), sink, 100)
	if err != nil || res.Replayed != 4 || res.Damaged != 1 {
		t.Fatalf("Replay() = %+v, %v; want 4 replayed and 1 damaged", res, err)
	}
}

// A replay interrupted by the database leaves what was inserted marked, so
// the next replay inserts each event exactly once.
func TestSpool_ReplayResumesWithoutDuplicates(t *testing.T) {
	dir := t.TempDir()
	sp := mustOpenSpool(t, dir)
	_, _ = sp.Append(events(30))
	sink := &sinkOf{failAfter: 2}
	if _, err := sp.Replay(context.Background(), sink, 10); err == nil {
		t.Fatal("Replay() with a failing database err = nil")
	}
	sp = reopen(t, sp, dir)
	res, err := sp.Replay(context.Background(), sink, 10)
	if err != nil || res.Replayed != 10 {
		t.Fatalf("resumed Replay() = %+v, %v; want the last 10", res, err)
	}
	seen := map[string]int{}
	for _, ev := range sink.events {
		seen[ev.Action]++
	}
	if len(sink.events) != 30 || len(seen) != 30 {
		t.Fatalf("database has %d events, %d distinct; want each of 30 once", len(sink.events), len(seen))
	}
}

func TestSpool_Bounded(t *testing.T) {
	sp, _ := audit.OpenSpool(t.TempDir(), 1000)
	n, err := sp.Append(events(100))
	if !errors.Is(err, audit.ErrSpoolFull) || n == 0 || n >= 100 || sp.Size() > 1000 {
		t.Fatalf("Append() over the bound = %d, %v (size %d)", n, err, sp.Size())
	}
}

func TestSpool_UnwritableDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if os.Geteuid() == 0 {
		t.Log("running as root: permissions do not stop root; checking a path under a file instead")
		f := filepath.Join(dir, "file")
		_ = os.Chmod(dir, 0o700)
		_ = os.WriteFile(f, nil, 0o600)
		dir = filepath.Join(f, "sub")
	}
	if _, err := audit.OpenSpool(dir, 1<<20); err == nil {
		t.Fatal("OpenSpool() in an unwritable place err = nil")
	}
}

// downSink is a database that is away.
type downSink struct{}

func (downSink) InsertAudit(context.Context, []mcpgate.AuditEvent) error {
	return errors.New("database away")
}

// TestWriter_CloseSpoolsWhatTheDatabaseRefuses: a clean stop while the
// database is away puts every queued event in the spool, promptly, and the
// next start's replay writes each one once.
func TestWriter_CloseSpoolsWhatTheDatabaseRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		sp := mustOpenSpool(t, dir)
		w := newWriter(t, audit.Options{Sink: downSink{}, Spool: sp, FlushEvery: time.Hour, BatchSize: 50})
		for _, ev := range events(325) {
			w.Record(context.Background(), ev)
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			t.Fatalf("Close() err = %v", err)
		}
		if w.Spooled() != 325 {
			t.Fatalf("Spooled() = %d, want 325", w.Spooled())
		}
		if took := time.Since(start); took > 12*time.Second {
			t.Errorf("Close took %s, want it to spool at once rather than wait for the database", took)
		}
		sp = reopen(t, sp, dir)
		sink := &sinkOf{}
		res, err := sp.Replay(context.Background(), sink, 100)
		if err != nil || res.Replayed != 325 || len(sink.events) != 325 {
			t.Fatalf("Replay() = %+v, %v; want 325 events", res, err)
		}
	})
}

// Without a spool the same stop loses the events, ends in about 10 s
// whatever the queue holds (one deadline for the whole drain, not one per
// batch), and says exactly how many were lost.
func TestWriter_CloseWithoutSpoolReportsLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		w := newWriter(t, audit.Options{Sink: downSink{}, FlushEvery: time.Hour, BatchSize: 50,
			Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		for _, ev := range events(325) {
			w.Record(context.Background(), ev)
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := w.Close(ctx)
		if err == nil || !strings.Contains(err.Error(), "325 audit events could not be written") {
			t.Fatalf("Close() with the database away and no spool err = %v, want the loss of 325 events reported", err)
		}
		if took := time.Since(start); took < 10*time.Second || took > 13*time.Second {
			t.Errorf("Close took %s, want about 10 s", took)
		}
		var total []string
		for line := range strings.Lines(logs.String()) {
			var rec struct {
				Msg   string `json:"msg"`
				Count int    `json:"count"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, "audit events lost at shutdown") {
				total = append(total, fmt.Sprint(rec.Count))
			}
		}
		if len(total) != 1 || total[0] != "325" {
			t.Errorf("log lines \"audit events lost at shutdown\" have counts %v, want one line with 325", total)
		}
	})
}

// withIDs gives events their EventIDs, as Writer.Record does.
func withIDs(evs []mcpgate.AuditEvent) []mcpgate.AuditEvent {
	for i := range evs {
		evs[i].EventID = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
	}
	return evs
}

// encodedSize is the bytes n events take in the spool.
func encodedSize(t *testing.T, evs []mcpgate.AuditEvent) int64 {
	t.Helper()
	sp := mustOpenSpool(t, t.TempDir())
	defer sp.Close()
	if _, err := sp.Append(evs); err != nil {
		t.Fatal(err)
	}
	return sp.Size()
}

// A disk that fills in the middle of an append writes some whole records
// and a torn one: Append counts exactly the whole ones, cuts the torn one
// off, and once there is room again the next append follows the last whole
// record, so a replay finds every counted event and nothing else.
func TestSpool_ShortWriteCountsWholeRecords(t *testing.T) {
	dir := t.TempDir()
	evs := withIDs(events(10))
	room := encodedSize(t, evs[:6]) + 20 // six records and part of the seventh
	sp := mustOpenSpool(t, dir)
	audit.InjectSpoolFaults(sp, audit.SpoolFaults{Room: room})
	n, err := sp.Append(evs)
	if n != 6 || err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append() on a disk with room for 6.x records = %d, %v; want 6, ENOSPC", n, err)
	}
	if sp.Events() != 6 || !sp.Full() {
		t.Fatalf("Events() = %d, Full() = %v; want 6, true", sp.Events(), sp.Full())
	}
	audit.SetRoom(sp, -1)
	if n, err := sp.Append(evs[6:]); n != 4 || err != nil {
		t.Fatalf("Append() with room again = %d, %v; want 4, nil", n, err)
	}
	if sp.Full() {
		t.Error("Full() after an append that took everything = true")
	}
	sp = reopen(t, sp, dir)
	sink := &sinkOf{}
	res, err := sp.Replay(context.Background(), sink, 100)
	if err != nil || res.Replayed != 10 || res.Damaged != 0 {
		t.Fatalf("Replay() = %+v, %v; want 10 replayed, none damaged", res, err)
	}
	for i, ev := range sink.events {
		if ev.Action != fmt.Sprintf("tool_%d", i) {
			t.Fatalf("replayed event %d = %s, want tool_%d", i, ev.Action, i)
		}
	}
}

// A disk that takes the bytes but fails the fsync: what is on disk is
// unknown, so none of it is counted, and none of it is replayed.
func TestSpool_FailedSyncCountsNothing(t *testing.T) {
	dir := t.TempDir()
	sp := mustOpenSpool(t, dir)
	audit.InjectSpoolFaults(sp, audit.SpoolFaults{Room: -1, SyncErr: syscall.EIO})
	if n, err := sp.Append(events(5)); n != 0 || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Append() with a failing fsync = %d, %v; want 0, EIO", n, err)
	}
	sp = reopen(t, sp, dir)
	if res, err := sp.Replay(context.Background(), &sinkOf{}, 100); err != nil || res.Replayed != 0 {
		t.Fatalf("Replay() = %+v, %v; want nothing: the events were counted as not spooled", res, err)
	}
}

// A spool written by an older gateway on a full disk has a torn record in
// the middle (later appends followed it): the replay skips the torn stretch
// and writes every intact record after it.
func TestSpool_TornRecordInTheMiddleIsSkipped(t *testing.T) {
	dir := t.TempDir()
	sp := mustOpenSpool(t, dir)
	_, _ = sp.Append(events(3))
	_ = sp.Close()
	head, _ := os.ReadFile(filepath.Join(dir, audit.SpoolFile))
	sp = mustOpenSpool(t, t.TempDir())
	_, _ = sp.Append(events(8)[3:])
	_ = sp.Close()
	tail, _ := os.ReadFile(sp.Path())
	// head's 3 records, the first half of tail's first record (torn), then
	// the rest of tail as a later append wrote it.
	firstLen := int(binary.BigEndian.Uint32(tail[:4])) + 8
	damaged := append(append(append([]byte{}, head...), tail[:firstLen/2]...), tail[firstLen:]...)
	if err := os.WriteFile(filepath.Join(dir, audit.SpoolFile), damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	sp = mustOpenSpool(t, dir)
	if sp.Events() != 7 {
		t.Errorf("Events() = %d, want 7 intact records", sp.Events())
	}
	sink := &sinkOf{}
	res, err := sp.Replay(context.Background(), sink, 100)
	if err != nil || res.Replayed != 7 || res.Damaged != 1 {
		t.Fatalf("Replay() = %+v, %v; want 7 replayed (3 before the torn record, 4 after) and 1 damaged", res, err)
	}
	if got := sink.events[3].Action; got != "tool_4" {
		t.Errorf("first event after the torn one = %s, want tool_4", got)
	}
}

// A full disk at the next start: the replay cannot record its progress,
// and writes everything anyway (the database stores an event once), and the
// spool is emptied, which frees the disk.
func TestSpool_ReplayOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	sp := mustOpenSpool(t, dir)
	_, _ = sp.Append(withIDs(events(25)))
	sp = reopen(t, sp, dir)
	audit.InjectSpoolFaults(sp, audit.SpoolFaults{Room: 0, ProgressErr: syscall.ENOSPC})
	sink := &sinkOf{}
	res, err := sp.Replay(context.Background(), sink, 10)
	if err != nil || res.Replayed != 25 || !errors.Is(res.ProgressErr, syscall.ENOSPC) {
		t.Fatalf("Replay() on a full disk = %+v, %v; want 25 replayed and the progress error reported", res, err)
	}
	if sp.Size() != 0 || sp.Events() != 0 {
		t.Errorf("spool after the replay: %d bytes, %d events; want empty", sp.Size(), sp.Events())
	}
}

// logged sums the "count" of the JSON log lines whose message starts with
// prefix.
func logged(logs, prefix string) int {
	n := 0
	for line := range strings.Lines(logs) {
		var rec struct {
			Msg   string `json:"msg"`
			Count int    `json:"count"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, prefix) {
			n += rec.Count
		}
	}
	return n
}
