package mcp

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate"
)

type eventSink struct {
	mu     sync.Mutex
	events []mcpgate.AuditEvent
}

func (s *eventSink) Record(_ context.Context, ev mcpgate.AuditEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
}

func (s *eventSink) all() []mcpgate.AuditEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]mcpgate.AuditEvent(nil), s.events...)
}

// An aggregate is written when its period ends, without a stop, with the
// times of its first and last refused call; the next refusal opens a new
// one.
func TestRefusals_FlushedEachPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &eventSink{}
		r := &refusals{period: 20 * time.Millisecond}
		a := &mcpgate.Actor{WorkspaceID: "ws", UserID: "u", KeyID: "k1", Source: mcpgate.SourceMCP}
		t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		for i := range 3 {
			r.add(a, "key", t0.Add(time.Duration(i)*time.Second), sink)
		}
		synctest.Wait()
		if evs := sink.all(); len(evs) != 0 {
			t.Fatalf("%d aggregate rows written before the period ended, want none", len(evs))
		}
		waitFor := func(n int) []mcpgate.AuditEvent {
			t.Helper()
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if evs := sink.all(); len(evs) >= n {
					return evs
				}
			}
			t.Fatalf("%d aggregate rows written, want %d", len(sink.all()), n)
			return nil
		}
		ev := waitFor(1)[0]
		if ev.Arguments["refused_calls"] != 3 || ev.Arguments["first"] != "2026-12-01T12:00:00Z" ||
			ev.Arguments["last"] != "2026-12-01T12:00:02Z" || !ev.CreatedAt.Equal(t0.Add(2*time.Second)) || ev.KeyID != "k1" {
			t.Fatalf("aggregate = %+v", ev)
		}
		r.add(a, "key", t0.Add(time.Minute), sink)
		if evs := waitFor(2); evs[1].Arguments["refused_calls"] != 1 {
			t.Fatalf("second aggregate = %+v, want 1 refused call", evs[1])
		}
	})
}
