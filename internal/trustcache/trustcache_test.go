package trustcache_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/trustcache"
)

// fixedTrust answers every entry the same way.
type fixedTrust struct{ fresh, stale, skip, revalidate bool }

func (t fixedTrust) Fresh(time.Time) bool      { return t.fresh }
func (t fixedTrust) Stale(time.Time) bool      { return t.stale }
func (t fixedTrust) SkipReload(time.Time) bool { return t.skip }
func (t fixedTrust) Revalidate(time.Time) bool { return t.revalidate }
func (fixedTrust) Failed()                     {}

var (
	errDown     = errors.New("connection refused")
	errNotFound = mcpgate.Errorf(mcpgate.ENotFound, "gone")
)

func TestCache_Get(t *testing.T) {
	tests := []struct {
		name    string
		trust   fixedTrust
		reload  error // what the second load answers
		want    string
		wantErr error
	}{
		{name: "fresh entry is used", trust: fixedTrust{fresh: true}, reload: errDown, want: "v1"},
		{name: "reload skipped after a failure", trust: fixedTrust{skip: true}, reload: errDown, want: "v1"},
		{name: "due entry is reloaded", reload: nil, want: "v2"},
		{name: "stale entry stands in while the database is away", trust: fixedTrust{stale: true}, reload: errDown, want: "v1"},
		{name: "too old to stand in", reload: errDown, wantErr: errDown},
		{name: "not found is never covered", trust: fixedTrust{stale: true}, reload: errNotFound, wantErr: errNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := trustcache.New[string](trustcache.Options{Trust: tt.trust})
			ctx := context.Background()
			if _, err := c.Get(ctx, "k", func(context.Context) (string, error) { return "v1", nil }); err != nil {
				t.Fatalf("first Get() err = %v", err)
			}
			got, err := c.Get(ctx, "k", func(context.Context) (string, error) {
				if tt.reload != nil {
					return "", tt.reload
				}
				return "v2", nil
			})
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("Get() = %q, %v, want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// An invalidation between a load and its store keeps what the load read
// out of the cache: it may predate the change the invalidation announced.
func TestCache_InvalidationDuringLoadWins(t *testing.T) {
	var c *trustcache.Cache[string]
	c = trustcache.New[string](trustcache.Options{Trust: fixedTrust{fresh: true},
		BeforeStore: func() { c.Invalidate(func(string) bool { return true }) }})
	ctx := context.Background()
	loads := 0
	load := func(context.Context) (string, error) { loads++; return "v", nil }
	for range 2 {
		if _, err := c.Get(ctx, "k", load); err != nil {
			t.Fatal(err)
		}
	}
	if loads != 2 {
		t.Fatalf("loads = %d, want 2 (the first load must not have been kept)", loads)
	}
}

// held is a load that blocks until release is closed, counting its calls.
type held struct {
	calls   atomic.Int32
	release chan struct{}
	val     string
}

func (h *held) load(context.Context) (string, error) {
	h.calls.Add(1)
	<-h.release
	return h.val, nil
}

// Callers of a key that is due share one load: ten calls of a busy key
// while its reload is slow cost one query, not ten (a slow database once
// had every call at a reload take a pool connection of its own).
func TestCache_CallersShareOneLoad(t *testing.T) {
	var joined sync.WaitGroup
	joined.Add(9)
	c := trustcache.New[string](trustcache.Options{Trust: fixedTrust{}, Joined: joined.Done})
	h := &held{release: make(chan struct{}), val: "v1"}
	var wg sync.WaitGroup
	got := make([]string, 10)
	for i := range 10 {
		wg.Go(func() {
			v, err := c.Get(context.Background(), "k", h.load)
			if err != nil {
				t.Errorf("Get() err = %v", err)
			}
			got[i] = v
		})
	}
	joined.Wait() // one caller loads, nine wait for it
	close(h.release)
	wg.Wait()
	if n := h.calls.Load(); n != 1 {
		t.Errorf("%d loads for ten callers, want 1", n)
	}
	for i, v := range got {
		if v != "v1" {
			t.Errorf("caller %d got %q", i, v)
		}
	}
}

// A caller that gives up stops waiting; the load goes on for the callers
// that wait for it with it.
func TestCache_CallerGivesUp(t *testing.T) {
	joined := make(chan struct{}, 1)
	c := trustcache.New[string](trustcache.Options{Trust: fixedTrust{}, Joined: func() { joined <- struct{}{} }})
	h := &held{release: make(chan struct{}), val: "v1"}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.Get(ctx, "k", h.load); errc <- err }()
	for h.calls.Load() == 0 {
		time.Sleep(time.Millisecond) // until the load has started
	}
	type answer struct {
		v   string
		err error
	}
	other := make(chan answer, 1)
	go func() { v, err := c.Get(context.Background(), "k", h.load); other <- answer{v, err} }()
	<-joined // the second caller waits for the first one's load
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Get() after its caller gave up err = %v", err)
	}
	close(h.release)
	if a := <-other; a.err != nil || a.v != "v1" || h.calls.Load() != 1 {
		t.Fatalf("the waiting caller's Get() = %q, %v after %d loads, want the one load's v1", a.v, a.err, h.calls.Load())
	}
}

// A caller after an invalidation never takes the answer of a load that
// started before it (it may have read what the change replaced).
func TestCache_NoJoiningAcrossInvalidation(t *testing.T) {
	c := trustcache.New[string](trustcache.Options{Trust: fixedTrust{}})
	before := &held{release: make(chan struct{}), val: "before"}
	done := make(chan string)
	go func() { v, _ := c.Get(context.Background(), "k", before.load); done <- v }()
	for before.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	c.Invalidate(func(string) bool { return true })
	v, err := c.Get(context.Background(), "k", func(context.Context) (string, error) { return "after", nil })
	if err != nil || v != "after" {
		t.Fatalf("Get() after the invalidation = %q, %v, want its own load's answer", v, err)
	}
	close(before.release)
	if v := <-done; v != "before" {
		t.Errorf("the caller before the invalidation got %q", v)
	}
}

// An entry the Trust lets revalidate is answered at once while one load
// runs in the background; the next caller gets what that load read.
func TestCache_Revalidate(t *testing.T) {
	trust := &switchTrust{}
	c := trustcache.New[string](trustcache.Options{Trust: trust})
	ctx := context.Background()
	if _, err := c.Get(ctx, "k", func(context.Context) (string, error) { return "v1", nil }); err != nil {
		t.Fatal(err)
	}
	trust.revalidate.Store(true)
	h := &held{release: make(chan struct{}), val: "v2"}
	for range 3 {
		if v, err := c.Get(ctx, "k", h.load); err != nil || v != "v1" {
			t.Fatalf("Get() while revalidating = %q, %v, want v1 at once", v, err)
		}
	}
	close(h.release)
	trust.revalidate.Store(false)
	trust.fresh.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, _ := c.Get(ctx, "k", func(context.Context) (string, error) { return "v3", nil })
		if v == "v2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Get() = %q, never the background load's v2", v)
		}
		time.Sleep(time.Millisecond) // the background load stores after it returns
	}
	if n := h.calls.Load(); n != 1 {
		t.Errorf("%d background loads, want 1", n)
	}
}

// switchTrust is a Trust the test turns.
type switchTrust struct{ fresh, revalidate atomic.Bool }

func (t *switchTrust) Fresh(time.Time) bool      { return t.fresh.Load() }
func (t *switchTrust) Revalidate(time.Time) bool { return t.revalidate.Load() }
func (*switchTrust) Stale(time.Time) bool        { return false }
func (*switchTrust) SkipReload(time.Time) bool   { return false }
func (*switchTrust) Failed()                     {}
