package audit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/audit"
)

// flakySink fails while down is set, and keeps what it stored and how many
// writes it was asked for.
type flakySink struct {
	mu       sync.Mutex
	down     bool
	stored   []mcpgate.AuditEvent
	attempts int
}

func (s *flakySink) InsertAudit(_ context.Context, evs []mcpgate.AuditEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.down {
		return errors.New("database unavailable")
	}
	s.stored = append(s.stored, evs...)
	return nil
}

func (s *flakySink) set(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

func (s *flakySink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.stored)
}

func TestWriter_RetriesAndDrainsOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &flakySink{down: true}
		w := newWriter(t, audit.Options{Sink: sink, QueueSize: 100, BatchSize: 7, FlushEvery: 10 * time.Millisecond})
		for i := range 30 {
			w.Record(context.Background(), mcpgate.AuditEvent{WorkspaceID: "ws", Action: "a", DurationMS: float64(i)})
		}
		time.Sleep(50 * time.Millisecond)
		if n := sink.count(); n != 0 {
			t.Fatalf("stored %d events while the database was down", n)
		}
		sink.set(false)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			t.Fatalf("Close() err = %v", err)
		}
		if n := sink.count(); n != 30 {
			t.Fatalf("stored %d events after Close, want all 30", n)
		}
	})
}

func TestWriter_Saturated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &flakySink{down: true}
		w := newWriter(t, audit.Options{Sink: sink, QueueSize: 10, BatchSize: 1, FlushEvery: time.Hour})
		// The loop holds one event (the batch it retries); the queue fills behind it.
		for range 11 {
			w.Record(context.Background(), mcpgate.AuditEvent{WorkspaceID: "ws", Action: "a"})
		}
		deadline := time.Now().Add(5 * time.Second)
		for !w.Saturated() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !w.Saturated() {
			t.Fatalf("Saturated() = false with %d of 10 queued while the database is down", w.Len())
		}
		sink.set(false)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			t.Fatalf("Close() err = %v", err)
		}
		if w.Saturated() || sink.count() != 11 {
			t.Fatalf("after recovery: Saturated() = %v, stored %d; want false, 11", w.Saturated(), sink.count())
		}
	})
}

// TestWriter_SpoolsThroughALongOutage: with a spool, an outage longer than
// the queue holds does not saturate it (calls would be refused): once the
// queue is half full, batches go to the spool; when the database is back,
// the spool is written to it without a restart, every event exactly once.
func TestWriter_SpoolsThroughALongOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &flakySink{down: true}
		spool, err := audit.OpenSpool(t.TempDir(), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer spool.Close()
		w := newWriter(t, audit.Options{Sink: sink, Spool: spool, QueueSize: 100, BatchSize: 10, FlushEvery: 5 * time.Millisecond})
		const events = 1000 // ten queues' worth, at about 500 calls/s
		for i := range events {
			time.Sleep(2 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			w.Record(ctx, mcpgate.AuditEvent{WorkspaceID: "ws", Action: "a", DurationMS: float64(i)})
			cancel()
			if w.Saturated() {
				t.Fatalf("Saturated() after %d events of an outage, with a spool to take them", i+1)
			}
		}
		if !eventually(5*time.Second, func() bool { return spool.Size() > 0 && w.Len() < 100 }) {
			t.Fatalf("nothing spooled in the outage (spool %d bytes, queue %d)", spool.Size(), w.Len())
		}
		if n := sink.count(); n != 0 {
			t.Fatalf("stored %d events while the database was down", n)
		}
		sink.set(false)
		if !eventually(10*time.Second, func() bool { return sink.count() == events && spool.Size() == 0 }) {
			t.Fatalf("after the outage: stored %d of %d, spool %d bytes; want every event written and the spool empty",
				sink.count(), events, spool.Size())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			t.Fatalf("Close() err = %v", err)
		}
		seen := map[float64]int{}
		for _, ev := range sink.stored {
			seen[ev.DurationMS]++
		}
		for i := range events {
			if seen[float64(i)] != 1 {
				t.Fatalf("event %d stored %d times, want once", i, seen[float64(i)])
			}
		}
	})
}

// TestWriter_FullSpoolBacksOff: when the spool is full, the outage's events
// wait for the database as without a spool: the writers back off (they do
// not retry at the rate events arrive) and the queue saturates, so tool
// calls are refused rather than run unaudited; nothing is lost once the
// database is back.
func TestWriter_FullSpoolBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &flakySink{down: true}
		spool, err := audit.OpenSpool(t.TempDir(), 256) // a record or two
		if err != nil {
			t.Fatal(err)
		}
		defer spool.Close()
		w := newWriter(t, audit.Options{Sink: sink, Spool: spool, QueueSize: 40, BatchSize: 5, FlushEvery: 5 * time.Millisecond})
		start := time.Now()
		for i := 0; !w.Saturated(); i++ {
			if time.Since(start) > 5*time.Second {
				t.Fatalf("not saturated after %d events with the spool full and the database down", i)
			}
			time.Sleep(time.Millisecond)
			w.Record(context.Background(), mcpgate.AuditEvent{WorkspaceID: "ws", Action: "a", DurationMS: float64(i)})
		}
		// Keep events arriving for a second: with backoff (100 ms doubling),
		// two writers make a few dozen attempts at most, not one per event.
		sink.mu.Lock()
		before := sink.attempts
		sink.mu.Unlock()
		recorded := 0
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			w.Record(ctx, mcpgate.AuditEvent{WorkspaceID: "ws", Action: "b"})
			cancel()
			recorded++
		}
		sink.mu.Lock()
		attempts := sink.attempts - before
		sink.mu.Unlock()
		if attempts > 40 {
			t.Errorf("%d database attempts in a second of a full spool (%d events offered), want a backoff", attempts, recorded)
		}
		sink.set(false)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			t.Fatalf("Close() err = %v", err)
		}
		if spool.Size() != 0 {
			t.Errorf("spool holds %d bytes after Close with the database back, want it written", spool.Size())
		}
	})
}

// newWriter starts a writer inside the test's synctest bubble and closes it
// when the test ends, so that a test failing half-way still stops the
// writer's goroutines (synctest.Test would report them as deadlocked and
// hide the failure's message).
func newWriter(t *testing.T, opts audit.Options) *audit.Writer {
	w := audit.New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = w.Close(ctx)
	})
	return w
}

func eventually(d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// TestWriter_ReplaysWhatAnEarlierRunLeft: a spool the start could not write
// (the database refused) does not keep the gateway from serving; the writer
// writes it in the background as soon as the database takes it, with no
// event recorded to set it off, and each event once.
func TestWriter_ReplaysWhatAnEarlierRunLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		sp, err := audit.OpenSpool(dir, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		for i := range 40 {
			if _, err := sp.Append([]mcpgate.AuditEvent{{WorkspaceID: "ws", Action: "a", DurationMS: float64(i)}}); err != nil {
				t.Fatal(err)
			}
		}
		sink := &flakySink{down: true}
		w := newWriter(t, audit.Options{Sink: sink, Spool: sp})
		if !eventually(5*time.Second, func() bool { sink.mu.Lock(); defer sink.mu.Unlock(); return sink.attempts > 0 }) {
			t.Fatal("no replay attempted")
		}
		sink.set(false)
		if !eventually(10*time.Second, func() bool { return sink.count() == 40 && sp.Size() == 0 }) {
			t.Fatalf("stored %d of 40 spooled events, spool %d bytes; want all written and the spool empty", sink.count(), sp.Size())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil || sink.count() != 40 {
			t.Fatalf("Close() = %v, stored %d; want nil, 40", err, sink.count())
		}
	})
}
