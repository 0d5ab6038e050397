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
	"github.com/mcpgate/mcpgate/internal/limiter"
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
	// Authenticators are asked in turn about the credential the request
	// presents (auth.go reads it); the first that recognises its kind
	// decides.
	Authenticators []mcpgate.Authenticator
	// Challenge, when set, is the WWW-Authenticate of a 401 (the OAuth
	// authorization server's, naming its resource metadata).
	Challenge string
	// ServerChallenge, when set with Challenge, is the WWW-Authenticate of
	// a 401 from a server's own endpoint, /mcp/<server> (naming that
	// endpoint's resource metadata).
	ServerChallenge func(server string) string
	// TokenFor, when set, says whether an OAuth access token whose grant
	// names resource may be used at the endpoint at path (/mcp or
	// /mcp/<server>): the audience rule (oauth.TokenFor). A token it
	// refuses is answered as any refused credential is.
	TokenFor  func(resource, path string) bool
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
	// RelayAnswers, when set, carries a client's answer to a relayed
	// request between replicas (streamrelay.go); nil: an answer reaches
	// only a call waiting on the replica its POST reached.
	RelayAnswers RelayAnswers
	// SessionEnds, when set, tells every replica that a client ended its
	// session (sessionend.go); nil: only the replica that took the DELETE
	// knows.
	SessionEnds SessionEnds
	// StreamOps, when set, carries a 2025 client's subscriptions to the
	// replica holding its session's standalone stream (streamops.go);
	// nil: a subscription is made only where its stream is.
	StreamOps StreamOps
	// ReplicaID names this replica in its acknowledgements of a session's
	// end (replicas.Membership.ID).
	ReplicaID string
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
	limiters        *limiter.Buckets
	userLimits      *limiter.Buckets
	workspaceLimits *limiter.Buckets
	origins         map[string]bool
	authFails       *limiter.Buckets
	// relayLists limits the lists a server's endpoint relays (serverendpoint.go).
	relayLists *limiter.Buckets
	refused    refusals // rate-limited calls, audited in aggregate (limits.go)
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
	// push holds the streams that get tools list changes (listen.go).
	push pushHub
	// relays are the calls waiting for a client's answer (streamrelay.go).
	relays relayWaits
	// ended are the client sessions ended (sessionend.go).
	ended endedSessions
	// endAcks are the DELETEs waiting for the replicas (sessionend.go).
	endAcks endAcks
	// heldSlots count the calls held per credential (heldcall.go).
	heldSlots heldSlots
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
		limiters:        limiter.New(limiter.Options{Rate: opts.KeyRate, Burst: opts.KeyBurst, Replicas: opts.Replicas}),
		userLimits:      limiter.New(limiter.Options{Rate: opts.UserRate, Burst: opts.UserBurst, Replicas: opts.Replicas}),
		workspaceLimits: limiter.New(limiter.Options{Rate: opts.WorkspaceRate, Burst: opts.WorkspaceBurst, Replicas: opts.Replicas}),
		origins:         allowedOrigins(opts.PublicURL, opts.AllowedOrigins),
		// 20 bad credentials, then one a second per address.
		authFails:  limiter.New(limiter.Options{Rate: 1, Burst: 20, Replicas: opts.Replicas}),
		relayLists: limiter.New(limiter.Options{Rate: relayListRate, Burst: relayListBurst, Replicas: opts.Replicas}),
		stop:       make(chan struct{}), done: make(chan struct{})}
	g.push.resources.stopping = g.stop
	g.sdkLog = slog.New(levelHandler{min: slog.LevelWarn, Handler: opts.Logger.Handler()})
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
	g.push.stop()
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
			for _, b := range []*limiter.Buckets{g.limiters, g.userLimits, g.workspaceLimits, g.authFails, g.relayLists} {
				b.Sweep(g.now())
			}
		}
	}
}
