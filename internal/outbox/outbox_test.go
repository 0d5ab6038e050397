package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/outbox"
)

// memQueue holds rows in memory; held says whether a Record still finds
// the claim (false: it expired and another runner took the row).
type memQueue struct {
	mu       sync.Mutex
	rows     map[string]int // id -> attempts made
	due      map[string]time.Time
	held     bool
	outcomes []outbox.Outcome
	released []string
}

func newQueue(ids ...string) *memQueue {
	q := &memQueue{rows: map[string]int{}, due: map[string]time.Time{}, held: true}
	for _, id := range ids {
		q.rows[id], q.due[id] = 0, time.Time{}
	}
	return q
}

func (q *memQueue) Claim(_ context.Context, _ string, now time.Time, _ time.Duration, limit int) ([]outbox.Claim[string], error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []outbox.Claim[string]
	for id, at := range q.due {
		if len(out) == limit || at.After(now) {
			continue
		}
		q.rows[id]++
		out = append(out, outbox.Claim[string]{ID: id, Attempt: q.rows[id], Item: "item " + id})
		delete(q.due, id)
	}
	return out, nil
}

func (q *memQueue) Record(_ context.Context, _ string, c outbox.Claim[string], o outbox.Outcome, next time.Time) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.held {
		return false, nil
	}
	q.outcomes = append(q.outcomes, o)
	if !o.Final {
		q.due[c.ID] = next
	}
	return true, nil
}

func (q *memQueue) Release(_ context.Context, _ string, id string, _ time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.released = append(q.released, id)
	q.rows[id]--
	q.due[id] = time.Time{}
	return nil
}

// run calls RunDue until nothing is due, moving the runner's clock past
// each backoff instead of waiting for it.
func run(t *testing.T, r *outbox.Runner[string], clock *time.Time) {
	t.Helper()
	for range 20 {
		n, err := r.RunDue(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		*clock = clock.Add(time.Hour)
	}
	t.Fatal("still due after 20 runs")
}

// A failure is retried with the backoff doubled until the attempts are
// used up; a permanent answer ends the row at once; Done hears each final
// outcome once.
func TestRunner_RetriesUntilFinal(t *testing.T) {
	now := time.Unix(1e9, 0)
	q := newQueue("a", "b")
	var done []outbox.Outcome
	r := outbox.New(outbox.Options[string]{Queue: q, Poll: -1, Attempts: 3, Backoff: time.Second, Now: func() time.Time { return now },
		Attempt: func(_ context.Context, c outbox.Claim[string]) (int, error) {
			if c.ID == "b" {
				return 550, errors.New("no such mailbox")
			}
			return 451, errors.New("try later")
		},
		Permanent: func(s int) bool { return s >= 500 },
		Done:      func(_ outbox.Claim[string], o outbox.Outcome) { done = append(done, o) }})
	defer r.Close(context.Background())
	run(t, r, &now)
	if q.rows["a"] != 3 || q.rows["b"] != 1 {
		t.Errorf("attempts = %v, want a 3 (all used), b 1 (permanent)", q.rows)
	}
	if len(done) != 2 || !done[0].Final || !done[1].Final || done[0].Err == nil {
		t.Errorf("done = %+v", done)
	}
}

// A record that finds the claim gone (another runner took the row over)
// is not reported as final: that runner reports it.
func TestRunner_LostClaimNotReported(t *testing.T) {
	q := newQueue("a")
	q.held = false
	calls := 0
	r := outbox.New(outbox.Options[string]{Queue: q, Poll: -1,
		Attempt: func(context.Context, outbox.Claim[string]) (int, error) { return 250, nil },
		Done:    func(outbox.Claim[string], outbox.Outcome) { calls++ }})
	defer r.Close(context.Background())
	if _, err := r.RunDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Errorf("Done called %d times for a claim no longer held", calls)
	}
}

// Close's deadline cuts an attempt short and releases its row, due at once
// and its attempt not counted; RunDue after Close refuses.
func TestRunner_CloseReleasesCutAttempt(t *testing.T) {
	q := newQueue("a")
	started := make(chan struct{})
	r := outbox.New(outbox.Options[string]{Queue: q, Poll: -1,
		Attempt: func(ctx context.Context, _ outbox.Claim[string]) (int, error) {
			close(started)
			<-ctx.Done()
			return 0, ctx.Err()
		}})
	go func() { _, _ = r.RunDue(context.Background()) }()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace: cut at once
	r.Close(ctx)
	if len(q.released) != 1 || q.rows["a"] != 0 || len(q.outcomes) != 0 {
		t.Errorf("released %v, attempts %v, outcomes %v", q.released, q.rows, q.outcomes)
	}
	if _, err := r.RunDue(context.Background()); !errors.Is(err, outbox.ErrClosed) {
		t.Errorf("RunDue after Close err = %v", err)
	}
}
