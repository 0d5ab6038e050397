package mcp

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// Backend is what the gateway needs from the database and the vault.
type Backend interface {
	FindKeyForAuth(ctx context.Context, id string) (*mcpgate.APIKey, []byte, error)
	TouchKeys(ctx context.Context, used map[string]time.Time) error
	ToolPolicies(ctx context.Context, workspaceID string) (map[string]mcpgate.ToolPolicy, error)
	SetToolPolicy(ctx context.Context, workspaceID, userID string, p mcpgate.ToolPolicy) error
	// OpenCredential returns the workspace's credential for a connector in
	// plain text; ENotFound when none is stored.
	OpenCredential(ctx context.Context, workspaceID, connector string) (mcpgate.Secret, error)
	PutConnection(ctx context.Context, c *mcpgate.Connection, credential mcpgate.Secret) error
	FindConnection(ctx context.Context, workspaceID, connector string) (*mcpgate.Connection, error)
	DeleteConnection(ctx context.Context, workspaceID, connector string) error
	MarkAuthFailure(ctx context.Context, workspaceID, connector string) error
	// SpendToken marks a single-use token spent; false means it already was.
	SpendToken(ctx context.Context, id string, expiresAt time.Time) (bool, error)
}

// Auditor records audit events without blocking the call.
type Auditor interface {
	Record(ctx context.Context, ev mcpgate.AuditEvent)
	// Saturated reports that events cannot be taken for now (the audit log's
	// database has been away too long). Tool calls are then refused rather
	// than run unaudited.
	Saturated() bool
}

// Metrics observes the gateway. Labels are low-cardinality: tool names,
// outcomes, reasons, statuses.
type Metrics interface {
	ToolCall(tool string, outcome mcpgate.Outcome, gateway, upstream time.Duration)
	UpstreamError(status int)
	AuthFailure(reason string)
	RateLimited()
}

type nopMetrics struct{}

func (nopMetrics) ToolCall(string, mcpgate.Outcome, time.Duration, time.Duration) {}
func (nopMetrics) UpstreamError(int)                                              {}
func (nopMetrics) AuthFailure(string)                                             {}
func (nopMetrics) RateLimited()                                                   {}

// Options configure a Gateway.
type Options struct {
	Registry  *connectors.Registry
	Backend   Backend
	Audit     Auditor
	Metrics   Metrics
	Logger    *slog.Logger
	PublicURL string
	Version   string
	// ConfirmationSecret keys the HMAC of confirmation tokens and request
	// states; at least 32 bytes.
	ConfirmationSecret []byte
	// CallTimeout bounds one tool call (default 30 s; idle detection gets
	// twice that).
	CallTimeout time.Duration
	// KeyRate and KeyBurst limit calls per key (default 20/s, burst 40).
	KeyRate  rate.Limit
	KeyBurst int
	// CacheTTL bounds how long a cached key or policy is trusted even
	// without a notification (default 30 s): a safety net, not the mechanism.
	CacheTTL time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// Gateway serves MCP and runs tools for workspaces.
type Gateway struct {
	opts    Options
	log     *slog.Logger
	metrics Metrics
	now     func() time.Time

	keys     sync.Map // key id -> *cachedKey
	policies sync.Map // workspace id -> *workspaceTools
	// gen counts invalidations. A load that overlapped one may have read
	// the database before the change committed, so it is not kept in the
	// cache (see storeIfCurrent).
	gen       atomic.Uint64
	limiters  limiterSet
	authFails limiterSet

	touchMu sync.Mutex
	touched map[string]time.Time

	stop chan struct{}
	done chan struct{}
}

// New returns a gateway and starts its background loop (last-used flush);
// Close stops it.
func New(opts Options) *Gateway {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = nopMetrics{}
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = 30 * time.Second
	}
	if opts.KeyRate == 0 {
		opts.KeyRate, opts.KeyBurst = 20, 40
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	g := &Gateway{opts: opts, log: opts.Logger, metrics: opts.Metrics, now: opts.Now,
		limiters:  limiterSet{rate: opts.KeyRate, burst: opts.KeyBurst},
		authFails: limiterSet{rate: 1, burst: 20}, // 20 bad keys, then one a second per address
		touched:   map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go g.loop()
	return g
}

// Close flushes last-used times and stops the background loop.
func (g *Gateway) Close() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	<-g.done
}

func (g *Gateway) loop() {
	defer close(g.done)
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			g.flushTouched()
			return
		case <-t.C:
			g.flushTouched()
			g.limiters.sweep(g.now())
			g.authFails.sweep(g.now())
		}
	}
}

// flushTouched writes the keys' last-used times in one statement, off the
// call path.
func (g *Gateway) flushTouched() {
	g.touchMu.Lock()
	batch := g.touched
	g.touched = map[string]time.Time{}
	g.touchMu.Unlock()
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.opts.Backend.TouchKeys(ctx, batch); err != nil {
		g.log.Warn("record key last use", "err", err, "keys", len(batch))
	}
}

func (g *Gateway) touch(keyID string) {
	now := g.now()
	g.touchMu.Lock()
	g.touched[keyID] = now
	g.touchMu.Unlock()
}

// Invalidate drops cached state of a workspace: kind "keys", "policy" or
// "conn", or "" for everything of every workspace (after a lost listener
// connection, when notifications may have been missed).
func (g *Gateway) Invalidate(kind, workspaceID string) {
	// First the generation, then the deletes: a load that stored its entry
	// before this point is deleted below, one that stores it after sees
	// the new generation and takes it back.
	g.gen.Add(1)
	dropKeys := func() {
		g.keys.Range(func(k, v any) bool {
			if workspaceID == "" || v.(*cachedKey).key.WorkspaceID == workspaceID {
				g.keys.Delete(k)
			}
			return true
		})
	}
	switch kind {
	case "keys":
		dropKeys()
	case "policy":
		g.policies.Delete(workspaceID)
	case "conn":
		// Credentials are not cached.
	default:
		dropKeys()
		g.policies.Clear()
	}
}

// limiterSet is a set of token buckets by name, swept of idle entries.
type limiterSet struct {
	rate  rate.Limit
	burst int
	m     sync.Map // name -> *limiterEntry
}

type limiterEntry struct {
	lim  *rate.Limiter
	mu   sync.Mutex
	last time.Time
}

func (s *limiterSet) get(name string, now time.Time) *limiterEntry {
	v, ok := s.m.Load(name)
	if !ok {
		v, _ = s.m.LoadOrStore(name, &limiterEntry{lim: rate.NewLimiter(s.rate, s.burst)})
	}
	e := v.(*limiterEntry)
	e.mu.Lock()
	e.last = now
	e.mu.Unlock()
	return e
}

// allow takes a token; when none is left it returns how long to wait.
func (s *limiterSet) allow(name string, now time.Time) (bool, time.Duration) {
	e := s.get(name, now)
	r := e.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// exhausted reports whether the bucket is empty, without taking a token.
func (s *limiterSet) exhausted(name string, now time.Time) (bool, time.Duration) {
	v, ok := s.m.Load(name)
	if !ok {
		return false, 0
	}
	lim := v.(*limiterEntry).lim
	if lim.TokensAt(now) >= 1 {
		return false, 0
	}
	return true, time.Duration((1 - lim.TokensAt(now)) / float64(s.rate) * float64(time.Second))
}

func (s *limiterSet) sweep(now time.Time) {
	s.m.Range(func(k, v any) bool {
		e := v.(*limiterEntry)
		e.mu.Lock()
		idle := now.Sub(e.last) > 10*time.Minute
		e.mu.Unlock()
		if idle {
			s.m.Delete(k)
		}
		return true
	})
}

// storeIfCurrent caches v under k unless an invalidation happened since gen
// was read (before the load): the load may have read the database before
// the change that the invalidation announced.
func (g *Gateway) storeIfCurrent(m *sync.Map, k, v any, gen uint64) {
	m.Store(k, v)
	if g.gen.Load() != gen {
		m.CompareAndDelete(k, v)
	}
}
