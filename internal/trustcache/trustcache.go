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
}

// Cache maps string keys to entries of type V.
type Cache[V any] struct {
	opts Options
	// gen counts invalidations; a load that overlapped one is not kept.
	gen     atomic.Uint64
	entries sync.Map // key -> *entry[V]
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
// lets a cached entry that is still stale stand in.
func (c *Cache[V]) Get(ctx context.Context, key string, load func(context.Context) (V, error)) (V, error) {
	cached, _ := c.entries.Load(key)
	old, _ := cached.(*entry[V])
	trust := c.opts.Trust
	if old != nil && (trust.Fresh(old.fetched) || trust.SkipReload(old.fetched)) {
		return old.val, nil
	}
	gen := c.gen.Load()
	fetched := c.opts.Now()
	v, err := load(ctx)
	switch {
	case mcpgate.ErrorCode(err) == mcpgate.ENotFound:
		return v, err
	case err != nil:
		trust.Failed()
		if old != nil && trust.Stale(old.fetched) {
			return old.val, nil // the database is away: what was known before stands in
		}
		return v, err
	}
	e := &entry[V]{val: v, fetched: fetched}
	if c.opts.BeforeStore != nil {
		c.opts.BeforeStore()
	}
	// Store, then check: an invalidation between the load and the store
	// takes the entry back out, so no change is missed.
	c.entries.Store(key, e)
	if c.gen.Load() != gen {
		c.entries.CompareAndDelete(key, e)
	}
	return v, nil
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
