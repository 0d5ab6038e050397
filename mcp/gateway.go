package mcp

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// TokenSpender marks single-use confirmation tokens spent, on every replica.
type TokenSpender interface {
	// SpendToken marks a token id spent until expiry; false means it
	// already was (a replay).
	SpendToken(ctx context.Context, id string, expiresAt time.Time) (bool, error)
}

// Auditor records the confirmation steps of tool calls (asked, refused,
// cancelled); the calls themselves are audited by the tool service.
type Auditor interface {
	Record(ctx context.Context, ev mcpgate.AuditEvent)
}

// Metrics observes the endpoint. Labels are low-cardinality.
type Metrics interface {
	ToolCall(tool string, outcome mcpgate.Outcome, gateway, upstream time.Duration)
	AuthFailure(reason string)
	RateLimited()
}

type nopMetrics struct{}

func (nopMetrics) ToolCall(string, mcpgate.Outcome, time.Duration, time.Duration) {}
func (nopMetrics) AuthFailure(string)                                             {}
func (nopMetrics) RateLimited()                                                   {}

type nopAuditor struct{}

func (nopAuditor) Record(context.Context, mcpgate.AuditEvent) {}

// Options configure a Gateway.
type Options struct {
	// Tools lists and runs the workspace's tools under its policy.
	Tools mcpgate.ToolService
	// Approvals, when set, holds a call that needs a person's approval
	// open for the decision, as long as the workspace allows
	// (approval_wait.go); nil answers such a call with the link at once.
	Approvals mcpgate.ApprovalWaiter
	// Registry gives each tool's schemas and each connector's instructions
	// and prompts.
	Registry *connectors.Registry
	// Authenticators are asked in turn; the first that recognises the
	// request's credential decides.
	Authenticators []mcpgate.Authenticator
	// Challenge, when set, is the WWW-Authenticate of a 401 (the OAuth
	// authorization server's, naming its resource metadata).
	Challenge string
	Tokens    TokenSpender
	Audit     Auditor
	Metrics   Metrics
	Logger    *slog.Logger
	PublicURL string
	Version   string
	// ConfirmationSecret keys the HMAC of confirmation tokens and request
	// states; at least 32 bytes.
	ConfirmationSecret []byte
	// KeyRate and KeyBurst limit calls per credential; UserRate and
	// UserBurst per person, all their keys together; WorkspaceRate and
	// WorkspaceBurst per workspace, all its people together. A zero rate
	// takes the default below.
	KeyRate        rate.Limit
	KeyBurst       int
	UserRate       rate.Limit
	UserBurst      int
	WorkspaceRate  rate.Limit
	WorkspaceBurst int
	// AllowedOrigins are browser origins allowed on the endpoint besides
	// PublicURL's (ALLOWED_ORIGINS).
	AllowedOrigins []string
	// Replicas, when set, says how many replicas serve behind the same
	// load balancer; each enforces its share of every limit above (the rate
	// and burst divided by it), so that together they allow what is
	// configured. Asked every couple of seconds, never on a call.
	Replicas func() int
	// Now is the clock (tests).
	Now func() time.Time
}

// The default tool-call limits (serve's MCP_KEY_RATE, MCP_KEY_BURST and the
// rest take them as their defaults). A person's and a workspace's bursts
// are five times a key's and more, so that one busy client meets its key's
// limit first and the person's (or the team's) other clients keep working.
const (
	DefaultKeyRate        rate.Limit = 20
	DefaultKeyBurst                  = 40
	DefaultUserRate       rate.Limit = 40
	DefaultUserBurst                 = 200
	DefaultWorkspaceRate  rate.Limit = 100
	DefaultWorkspaceBurst            = 400
)

// Gateway serves MCP for workspaces.
type Gateway struct {
	opts            Options
	log             *slog.Logger
	metrics         Metrics
	audit           Auditor
	now             func() time.Time
	limiters        limiterSet
	userLimits      limiterSet
	workspaceLimits limiterSet
	origins         map[string]bool
	authFails       limiterSet
	refused         refusals // rate-limited calls, audited in aggregate (limits.go)
	// sdkLog is the logger go-sdk gets: the gateway's, at warn and above.
	sdkLog *slog.Logger
	// metas are _meta values the fast path has found valid (metaOK).
	metas      sync.Map
	metaCount  atomic.Int64
	fastServed fastCounter

	stop chan struct{}
	done chan struct{}
	// stopper ends the tool calls still running at a stop (unavailable.go).
	stopper stopper
}

// New returns a gateway and starts its background loop (limiter sweeps);
// Close stops it.
func New(opts Options) *Gateway {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.Metrics = cmp.Or[Metrics](opts.Metrics, nopMetrics{})
	opts.Audit = cmp.Or[Auditor](opts.Audit, nopAuditor{})
	if opts.KeyRate == 0 {
		opts.KeyRate, opts.KeyBurst = DefaultKeyRate, DefaultKeyBurst
	}
	if opts.UserRate == 0 {
		opts.UserRate, opts.UserBurst = DefaultUserRate, DefaultUserBurst
	}
	if opts.WorkspaceRate == 0 {
		opts.WorkspaceRate, opts.WorkspaceBurst = DefaultWorkspaceRate, DefaultWorkspaceBurst
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	g := &Gateway{opts: opts, log: opts.Logger, metrics: opts.Metrics, audit: opts.Audit, now: opts.Now,
		limiters:        limiterSet{rate: opts.KeyRate, burst: opts.KeyBurst},
		userLimits:      limiterSet{rate: opts.UserRate, burst: opts.UserBurst},
		workspaceLimits: limiterSet{rate: opts.WorkspaceRate, burst: opts.WorkspaceBurst},
		origins:         allowedOrigins(opts.PublicURL, opts.AllowedOrigins),
		authFails:       limiterSet{rate: 1, burst: 20}, // 20 bad credentials, then one a second per address
		stop:            make(chan struct{}), done: make(chan struct{})}
	g.sdkLog = slog.New(levelHandler{min: slog.LevelWarn, Handler: opts.Logger.Handler()})
	for _, s := range []*limiterSet{&g.limiters, &g.userLimits, &g.workspaceLimits, &g.authFails} {
		s.replicas = opts.Replicas
	}
	go g.loop()
	return g
}

// Close stops the background loop.
func (g *Gateway) Close() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	<-g.done
	g.refused.flushAll()
}

func (g *Gateway) loop() {
	defer close(g.done)
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			g.limiters.sweep(g.now())
			g.userLimits.sweep(g.now())
			g.workspaceLimits.sweep(g.now())
			g.authFails.sweep(g.now())
		}
	}
}

// limiterSet is a set of token buckets by name, swept of idle entries. rate
// and burst are the limit of the whole deployment; each bucket holds this
// replica's share of it.
type limiterSet struct {
	rate  rate.Limit
	burst int
	// replicas, when set, says how many replicas share the limit (an
	// atomic read, Options.Replicas).
	replicas func() int
	m        sync.Map // name -> *limiterEntry
}

// shares is how many replicas the limit is shared by now, at least 1.
func (s *limiterSet) shares() int {
	if s.replicas == nil {
		return 1
	}
	return max(s.replicas(), 1)
}

// share is one replica's part of the limit when n share it: the rate
// divided by n, and the burst too (rounded down, so that the replicas
// together never allow more than the configured burst, but at least one
// call).
func (s *limiterSet) share(n int) (rate.Limit, int) {
	return s.rate / rate.Limit(n), max(s.burst/n, 1)
}

type limiterEntry struct {
	lim    *rate.Limiter
	mu     sync.Mutex
	last   time.Time
	shares int // the replica count lim's share was set for
}

// get returns name's bucket, set to the share of the replicas serving now:
// a count that changed since its last use re-shares it, keeping what it
// has spent (a replica joining mid-burst hands out no fresh burst).
func (s *limiterSet) get(name string, now time.Time) *limiterEntry {
	n := s.shares()
	v, ok := s.m.Load(name)
	if !ok {
		v, _ = s.m.LoadOrStore(name, &limiterEntry{lim: rate.NewLimiter(s.share(n)), shares: n})
	}
	e := v.(*limiterEntry)
	e.mu.Lock()
	e.last = now
	if e.shares != n {
		r, b := s.share(n)
		e.lim.SetLimitAt(now, r)
		e.lim.SetBurstAt(now, b)
		e.shares = n
	}
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
	return true, time.Duration((1 - lim.TokensAt(now)) / float64(lim.Limit()) * float64(time.Second))
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
