package replicas_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/replicas"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// replica is one membership running on the test database, told of joins
// and leaves by the store's real listener, as the wiring does.
type replica struct {
	m      *replicas.Membership
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// heartbeats far apart: a count that changes in this test changed because
// of a notification (or, for a killed replica, the stale row), not a tick.
const every = time.Hour

func start(t *testing.T, db *store.DB, o replicas.Options) *replica {
	t.Helper()
	if o.Store == nil {
		o.Store = db
	}
	m := replicas.New(o)
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{m: m, cancel: cancel}
	listening := make(chan struct{})
	r.done.Add(2)
	go func() {
		defer r.done.Done()
		db.Listen(ctx, slog.New(slog.DiscardHandler), listening, func(inv store.Invalidation) {
			if inv.Kind == store.InvalidateReplicas || inv.Kind == "" {
				m.Refresh()
			}
		}, nil)
	}()
	<-listening
	go func() { defer r.done.Done(); m.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *replica) stop() { r.cancel(); r.done.Wait() }

// waitCount waits for the membership to count want replicas (a generous
// deadline: it is a notification's round trip).
func waitCount(t *testing.T, r *replica, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.m.Count() != want {
		if time.Now().After(deadline) {
			t.Fatalf("replica %s counts %d replicas, want %d", r.m.ID(), r.m.Count(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMembership_JoinLeave: replicas count each other as they start, at
// once (the joining one's first heartbeat notifies the others), and a clean
// stop is counted at once too.
func TestMembership_JoinLeave(t *testing.T) {
	db := storetest.Open(t)
	a := start(t, db, replicas.Options{Every: every})
	waitCount(t, a, 1)
	b := start(t, db, replicas.Options{Every: every})
	waitCount(t, b, 2)
	waitCount(t, a, 2)
	c := start(t, db, replicas.Options{Every: every})
	for _, r := range []*replica{a, b, c} {
		waitCount(t, r, 3)
	}
	b.stop()
	waitCount(t, a, 2)
	waitCount(t, c, 2)
	if n, err := db.LiveReplicas(context.Background(), time.Minute); err != nil || n != 2 {
		t.Fatalf("LiveReplicas() = %d, %v; want 2 after a clean stop", n, err)
	}
}

// TestMembership_StaleReplicaDropsOut: a replica killed without a clean stop
// (its row stays) drops out of the count once its heartbeat is older than
// the TTL, at the others' next heartbeat.
func TestMembership_StaleReplicaDropsOut(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	// The dead replica: one heartbeat, then nothing.
	if _, err := db.HeartbeatReplica(ctx, "00000000-0000-4000-8000-000000000001", time.Minute); err != nil {
		t.Fatal(err)
	}
	a := start(t, db, replicas.Options{Every: 50 * time.Millisecond, TTL: 2 * time.Second})
	waitCount(t, a, 2) // counted while its heartbeat is fresh
	waitCount(t, a, 1)
}

// TestMembership_DatabaseAway: while the database is away the last count
// stands (a replica never believes it is alone because it cannot ask).
func TestMembership_DatabaseAway(t *testing.T) {
	db := storetest.Open(t)
	other, err := db.HeartbeatReplica(context.Background(), "00000000-0000-4000-8000-000000000002", time.Hour)
	if err != nil || other != 1 {
		t.Fatalf("HeartbeatReplica() = %d, %v", other, err)
	}
	beats := &refusedBeats{DB: db, refused: make(chan struct{}, 8)}
	a := start(t, db, replicas.Options{Store: beats, Every: 20 * time.Millisecond, TTL: time.Hour})
	waitCount(t, a, 2)
	db.Pool.Close()
	// Four refused heartbeats: Run beats one at a time, so the first three
	// have been answered by the time the fourth is refused.
	for i := range 4 {
		select {
		case <-beats.refused:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d heartbeats refused with the database away, want 4", i)
		}
	}
	if n := a.m.Count(); n != 2 {
		t.Fatalf("count with the database away = %d, want the last one, 2", n)
	}
}

// refusedBeats is the test database as a replica's store, telling the test
// of every heartbeat it refuses, so that the test waits for failed
// heartbeats rather than for a time it hopes is long enough.
type refusedBeats struct {
	*store.DB
	refused chan struct{}
}

func (s *refusedBeats) HeartbeatReplica(ctx context.Context, id string, ttl time.Duration) (int, error) {
	n, err := s.DB.HeartbeatReplica(ctx, id, ttl)
	if err != nil {
		select {
		case s.refused <- struct{}{}:
		default: // the test has seen enough
		}
	}
	return n, err
}
