package outbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Claim is one row claimed for one attempt.
type Claim[T any] struct {
	ID string
	// Attempt is the attempt about to be made, from 1 (counted at the
	// claim, so that a runner dying during it still uses one up).
	Attempt int
	Item    T
}

// Outcome is what one attempt came to.
type Outcome struct {
	ID       string
	Attempts int
	// Status is the other side's status code (HTTP, SMTP), 0 without one.
	Status int
	// Err says why the attempt failed, in words safe to show an admin.
	Err error
	// Final is the last attempt: done, refused for good, or out of
	// attempts.
	Final bool
}

// Queue is where the rows wait between attempts.
type Queue[T any] interface {
	// Claim takes up to limit rows whose next attempt is due at now and
	// that no unexpired claim holds, for owner until now+lease, in one
	// statement. The attempt about to be made counts already.
	Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]Claim[T], error)
	// Record stores an attempt's outcome and ends the claim: next is when
	// the next attempt is due (unused when o.Final). It reports false, and
	// records nothing, when owner no longer held the claim (it expired and
	// another runner took the row over).
	Record(ctx context.Context, owner string, c Claim[T], o Outcome, next time.Time) (bool, error)
	// Release ends a claim without an attempt counted (the runner stopped
	// during it), the row due at now for any runner.
	Release(ctx context.Context, owner, id string, now time.Time) error
}

// Options configure a Runner.
type Options[T any] struct {
	// Name says what is sent ("webhook", "mail") in the log lines.
	Name  string
	Queue Queue[T]
	// Attempt makes one attempt under ctx (cut short by Close's deadline)
	// and returns the other side's status, if any.
	Attempt func(ctx context.Context, c Claim[T]) (status int, err error)
	// Permanent says a failed attempt's status means that retrying will
	// not help (nil: every failure is retried).
	Permanent func(status int) bool
	// Attempts is how many times a row is tried (default 5), waiting
	// Backoff (default 2 s) doubled after each failure.
	Attempts int
	Backoff  time.Duration
	// Workers attempt at once (default 4), so that one slow receiver does
	// not hold up the others.
	Workers int
	// Poll is how often the queue is looked at besides at start, on Wake
	// and when a retry this runner scheduled is due (default 30 s).
	// Negative: never in the background (tests call RunDue).
	Poll time.Duration
	// Lease is how long a claim holds before another runner may take the
	// row over; longer than an attempt (default 1 min).
	Lease time.Duration
	// Now is the clock due times and leases are read on (default
	// time.Now); replicas on one database should agree on it to well
	// within Lease.
	Now    func() time.Time
	Logger *slog.Logger
	// Done is told every final outcome this runner recorded, once.
	Done func(Claim[T], Outcome)
}

// Runner attempts the Queue's rows in the background.
type Runner[T any] struct {
	opts  Options[T]
	owner string // this runner's name on its claims

	wake chan struct{}
	// hard ends the attempts under way when Close's deadline passes.
	hard     context.Context
	hardStop context.CancelFunc
	stopLoop context.CancelFunc
	loopDone chan struct{}

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
	retries  []time.Time // when the retries this runner scheduled are due
}

// ErrClosed is RunDue's answer after Close.
var ErrClosed = errors.New("outbox runner closed")

// New returns a running Runner, which looks for due rows at once (unless
// Poll is negative); Close stops it.
func New[T any](opts Options[T]) *Runner[T] {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 2 * time.Second
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Poll == 0 {
		opts.Poll = 30 * time.Second
	}
	if opts.Lease <= 0 {
		opts.Lease = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Permanent == nil {
		opts.Permanent = func(int) bool { return false }
	}
	r := &Runner[T]{opts: opts, owner: newOwner(), wake: make(chan struct{}, 1), loopDone: make(chan struct{})}
	r.hard, r.hardStop = context.WithCancel(context.Background())
	loop, stop := context.WithCancel(context.Background())
	r.stopLoop = stop
	if opts.Poll > 0 {
		go r.loop(loop)
	} else {
		close(r.loopDone)
	}
	return r
}

// newOwner names a runner on its claims: random, so that a restarted
// process never mistakes its predecessor's claims for its own.
func newOwner() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Wake tells the runner that a row was queued: it claims it at once rather
// than at the next poll. It never waits.
func (r *Runner[T]) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Close stops looking for rows and waits for the attempts under way until
// ctx ends; those still running then are cut short and released, due at
// once for the next runner, which makes them again. What waits for a later
// attempt stays in the Queue.
func (r *Runner[T]) Close(ctx context.Context) {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.stopLoop()
	// The loop may be in an attempt: it is waited for with the others,
	// under the same deadline (closed is set, so nothing new starts).
	done := make(chan struct{})
	go func() { r.inflight.Wait(); <-r.loopDone; close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		r.hardStop()
		<-done // the cut attempts release their claims, each within a few seconds
	}
	r.hardStop()
}

// loop runs the due rows at start, on Wake, when a retry it scheduled is
// due and every Poll.
func (r *Runner[T]) loop(ctx context.Context) {
	defer close(r.loopDone)
	for {
		for {
			n, err := r.RunDue(ctx)
			if err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
				r.opts.Logger.Warn(r.opts.Name+" queue not claimed", "err", err)
			}
			if err != nil || n < r.opts.Workers {
				break
			}
		}
		t := time.NewTimer(r.nextWait())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// nextWait is how long the loop sleeps: until the soonest retry this
// runner scheduled, at most Poll. Retries already due are forgotten (the
// run that follows claims them, or another runner did).
func (r *Runner[T]) nextWait() time.Duration {
	now := r.opts.Now()
	wait := r.opts.Poll
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.retries[:0]
	for _, at := range r.retries {
		if !at.After(now) {
			wait = 0
			continue
		}
		kept = append(kept, at)
		wait = min(wait, at.Sub(now))
	}
	r.retries = kept
	return wait
}

// RunDue claims the rows due now (up to Workers), attempts each once,
// records the outcomes and returns how many it attempted. The background
// loop calls it; tests call it on a runner without one.
func (r *Runner[T]) RunDue(ctx context.Context) (int, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return 0, ErrClosed
	}
	r.inflight.Add(1)
	r.mu.Unlock()
	defer r.inflight.Done()
	// A claim still waiting on the database when Close's deadline passes
	// gives up: Close waits for nothing unbounded.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.hard, cancel)()
	cs, err := r.opts.Queue.Claim(ctx, r.owner, r.opts.Now(), r.opts.Lease, r.opts.Workers)
	if err != nil {
		return 0, fmt.Errorf("claim %s queue: %w", r.opts.Name, err)
	}
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); r.try(c) }()
	}
	wg.Wait()
	return len(cs), nil
}

// try makes c's attempt and records the outcome: done, refused for good
// (Permanent) or out of attempts is final; otherwise the next attempt is
// due after Backoff, doubled for each attempt made. An attempt cut short
// by Close is released.
func (r *Runner[T]) try(c Claim[T]) {
	status, err := r.opts.Attempt(r.hard, c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r.hard.Err() != nil {
		if rerr := r.opts.Queue.Release(ctx, r.owner, c.ID, r.opts.Now()); rerr != nil {
			r.opts.Logger.Warn(r.opts.Name+" not released; its claim will expire", "id", c.ID, "err", rerr)
		}
		return
	}
	final := err == nil || c.Attempt >= r.opts.Attempts || r.opts.Permanent(status)
	o := Outcome{ID: c.ID, Attempts: c.Attempt, Status: status, Err: err, Final: final}
	var next time.Time
	if !final {
		next = r.opts.Now().Add(r.opts.Backoff << (c.Attempt - 1))
	}
	held, rerr := r.opts.Queue.Record(ctx, r.owner, c, o, next)
	switch {
	case rerr != nil:
		// The claim expires and another attempt follows: at least once.
		r.opts.Logger.Error(r.opts.Name+" attempt not recorded", "id", c.ID, "attempt", c.Attempt, "err", rerr)
	case !held:
		r.opts.Logger.Warn(r.opts.Name+" claim expired during the attempt; another runner took it over", "id", c.ID)
	case !final:
		r.opts.Logger.Warn(r.opts.Name+" not sent; retrying", "id", c.ID, "attempt", c.Attempt, "status", status, "err", err)
		r.mu.Lock()
		r.retries = append(r.retries, next)
		r.mu.Unlock()
	default:
		if err != nil {
			r.opts.Logger.Error(r.opts.Name+" not sent", "id", c.ID, "attempts", c.Attempt, "status", status, "err", err)
		} else {
			r.opts.Logger.Info(r.opts.Name+" sent", "id", c.ID, "attempts", c.Attempt)
		}
		if r.opts.Done != nil {
			r.opts.Done(c, o)
		}
	}
}
