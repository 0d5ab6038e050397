package trustcache

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate"
)

// Trust decides how long a cached entry may be used.
type Trust interface {
	// Fresh reports whether an entry fetched then may be used without a
	// reload.
	Fresh(fetched time.Time) bool
	// Revalidate reports whether an entry fetched then, no longer fresh,
	// may still be answered while one reload runs in the background (the
	// next caller gets what it read).
	Revalidate(fetched time.Time) bool
	// Stale reports whether an entry fetched then may stand in for a reload
	// that could not reach the database.
	Stale(fetched time.Time) bool
	// SkipReload reports whether a reload should not even be tried: the
	// database failed a moment ago and the entry may stand in.
	SkipReload(fetched time.Time) bool
	// Failed records that a reload could not reach the database.
	Failed()
}

// Options configure a Cache.
type Options struct {
	Trust Trust
	// Now is the clock that stamps a load (default time.Now); it should be
	// the Trust's.
	Now func() time.Time
	// BeforeStore, when set (tests), runs between a load and storing what
	// it read: the window in which an invalidation must win.
	BeforeStore func()
	// Joined, when set (tests), runs when a caller waits for a load
	// another caller started.
	Joined func()
}

// Cache maps string keys to entries of type V.
type Cache[V any] struct {
	opts Options
	// gen counts invalidations; a load that overlapped one is not kept.
	gen     atomic.Uint64
	entries sync.Map // key -> *entry[V]
	// flights are the loads under way, one per key: callers that find a
	// key due while it loads wait for that load instead of each loading,
	// so a reload of a busy key costs one query, not one per call (with a
	// slow database, one per call took the whole pool).
	flights sync.Map // key -> *flight[V]
}

// flight is one load under way and, once done is closed, what it read.
type flight[V any] struct {
	done chan struct{}
	gen  uint64 // the invalidations counted when it started
	val  V
	err  error
}

type entry[V any] struct {
	val     V
	fetched time.Time
}

// New returns an empty cache.
func New[V any](opts Options) *Cache[V] {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Cache[V]{opts: opts}
}

// Get returns key's entry: the cached one while the Trust allows, or what
// load reads. An ENotFound from load is returned as it is; any other error
// lets a cached entry that is still stale stand in. Callers of one key
// share one load; a caller whose ctx ends stops waiting for it, and the
// load goes on for the others (it runs on ctx's values without its
// cancellation: the store bounds each query itself).
func (c *Cache[V]) Get(ctx context.Context, key string, load func(context.Context) (V, error)) (V, error) {
	cached, _ := c.entries.Load(key)
	old, _ := cached.(*entry[V])
	trust := c.opts.Trust
	if old != nil && (trust.Fresh(old.fetched) || trust.SkipReload(old.fetched)) {
		return old.val, nil
	}
	if old != nil && trust.Revalidate(old.fetched) {
		c.start(ctx, key, load) // the next caller gets what it reads
		return old.val, nil
	}
	f := c.start(ctx, key, load)
	select {
	case <-f.done:
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
	switch {
	case mcpgate.ErrorCode(f.err) == mcpgate.ENotFound:
		return f.val, f.err
	case f.err != nil:
		if old != nil && trust.Stale(old.fetched) {
			return old.val, nil // the database is away: what was known before stands in
		}
		return f.val, f.err
	}
	return f.val, nil
}

// start returns key's load under way, starting one if there is none.
func (c *Cache[V]) start(ctx context.Context, key string, load func(context.Context) (V, error)) *flight[V] {
	gen := c.gen.Load()
	f := &flight[V]{done: make(chan struct{}), gen: gen}
	for {
		running, loaded := c.flights.LoadOrStore(key, f)
		if !loaded {
			break
		}
		r := running.(*flight[V])
		if r.gen == gen {
			if c.opts.Joined != nil {
				c.opts.Joined()
			}
			return r
		}
		// A load that started before an invalidation may read what the
		// change replaced: a caller after it never takes that answer.
		if c.flights.CompareAndSwap(key, r, f) {
			break
		}
	}
	fetched := c.opts.Now()
	go func() {
		defer close(f.done)
		f.val, f.err = load(context.WithoutCancel(ctx))
		// Out of the flights before the store: a caller from now on loads
		// anew rather than wait on this one (what the store hook runs,
		// an invalidating change in a test, may itself read the key).
		c.flights.CompareAndDelete(key, f)
		if f.err != nil {
			if mcpgate.ErrorCode(f.err) != mcpgate.ENotFound {
				c.opts.Trust.Failed()
			}
			return
		}
		e := &entry[V]{val: f.val, fetched: fetched}
		if c.opts.BeforeStore != nil {
			c.opts.BeforeStore()
		}
		// Store, then check: an invalidation between the load and the
		// store takes the entry back out, so no change is missed.
		c.entries.Store(key, e)
		if c.gen.Load() != gen {
			c.entries.CompareAndDelete(key, e)
		}
	}()
	return f
}

// Delete drops key's entry.
func (c *Cache[V]) Delete(key string) { c.entries.Delete(key) }

// Invalidate drops every entry that match selects, and keeps loads under
// way from storing what they read.
func (c *Cache[V]) Invalidate(match func(V) bool) {
	c.gen.Add(1)
	c.entries.Range(func(k, v any) bool {
		if match(v.(*entry[V]).val) {
			c.entries.Delete(k)
		}
		return true
	})
}

// Sweep drops the entries that can serve neither as fresh nor through an
// outage, so that the cache holds only what is in use.
func (c *Cache[V]) Sweep() {
	c.entries.Range(func(k, v any) bool {
		if f := v.(*entry[V]).fetched; !c.opts.Trust.Fresh(f) && !c.opts.Trust.Stale(f) {
			c.entries.Delete(k)
		}
		return true
	})
}
