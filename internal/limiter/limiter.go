package limiter

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultIdle is how long an unused bucket is kept when Options.Idle is
// zero.
const DefaultIdle = 10 * time.Minute

// Options configure a set of Buckets.
type Options struct {
	// Rate and Burst are the limit of each bucket: of the whole deployment
	// when Replicas is set, of this process otherwise.
	Rate  rate.Limit
	Burst int
	// Replicas, when set, says how many replicas share the limit; each
	// bucket holds this replica's share of it. It is read on every use, so
	// it must be cheap (an atomic read).
	Replicas func() int
	// Idle is how long a bucket is kept after its last use (DefaultIdle
	// when zero). A forgotten bucket comes back full, so Idle should be at
	// least the time a bucket takes to refill (Burst / Rate): shorter, and
	// sweeping would hand out bursts the limit does not allow.
	Idle time.Duration
}

// Buckets is a set of token buckets by name, safe for concurrent use. Idle
// buckets are dropped by Sweep, which the owner calls off the request path
// (or before a use, where uses are rare).
type Buckets struct {
	opts Options
	m    sync.Map // name -> *entry
}

type entry struct {
	lim    *rate.Limiter
	mu     sync.Mutex
	last   time.Time
	shares int // the replica count lim's share was set for
}

// New returns an empty set.
func New(o Options) *Buckets {
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	return &Buckets{opts: o}
}

// shares is how many replicas the limit is shared by now, at least 1.
func (b *Buckets) shares() int {
	if b.opts.Replicas == nil {
		return 1
	}
	return max(b.opts.Replicas(), 1)
}

// share is one replica's part of the limit when n share it: the rate
// divided by n, and the burst too (rounded down, so that the replicas
// together never allow more than the configured burst, but at least one
// call).
func (b *Buckets) share(n int) (rate.Limit, int) {
	return b.opts.Rate / rate.Limit(n), max(b.opts.Burst/n, 1)
}

// get returns name's bucket, set to the share of the replicas serving now:
// a count that changed since its last use re-shares it, keeping what it
// has spent.
func (b *Buckets) get(name string, now time.Time) *entry {
	n := b.shares()
	v, ok := b.m.Load(name)
	if !ok {
		v, _ = b.m.LoadOrStore(name, &entry{lim: rate.NewLimiter(b.share(n)), shares: n})
	}
	e := v.(*entry)
	e.mu.Lock()
	e.last = now
	if e.shares != n {
		r, burst := b.share(n)
		e.lim.SetLimitAt(now, r)
		e.lim.SetBurstAt(now, burst)
		e.shares = n
	}
	e.mu.Unlock()
	return e
}

// Allow takes a token from name's bucket; when none is left it takes
// nothing and returns how long until one is.
func (b *Buckets) Allow(name string, now time.Time) (bool, time.Duration) {
	e := b.get(name, now)
	r := e.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Exhausted reports whether name's bucket is empty, and how long until it
// holds a token, without taking one (a name never used is not).
func (b *Buckets) Exhausted(name string, now time.Time) (bool, time.Duration) {
	v, ok := b.m.Load(name)
	if !ok {
		return false, 0
	}
	lim := v.(*entry).lim
	if lim.TokensAt(now) >= 1 {
		return false, 0
	}
	return true, time.Duration((1 - lim.TokensAt(now)) / float64(lim.Limit()) * float64(time.Second))
}

// Sweep drops the buckets unused for longer than Options.Idle.
func (b *Buckets) Sweep(now time.Time) {
	b.m.Range(func(k, v any) bool {
		e := v.(*entry)
		e.mu.Lock()
		idle := now.Sub(e.last) > b.opts.Idle
		e.mu.Unlock()
		if idle {
			b.m.Delete(k)
		}
		return true
	})
}
