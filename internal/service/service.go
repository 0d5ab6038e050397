package service

import (
	"cmp"
	"context"
	"crypto/rand"
	"log/slog"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/password"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/trustcache"
	"github.com/mcpgate/mcpgate/internal/upstream"
	"github.com/mcpgate/mcpgate/vault"
)

// Auditor records audit events without blocking the caller.
type Auditor interface {
	Record(ctx context.Context, ev mcpgate.AuditEvent)
	// Saturated reports that events cannot be taken for now (the audit
	// log's database has been away too long). Tool calls are then refused
	// rather than run unaudited.
	Saturated() bool
}

// Metrics observes tool calls and authentication. Labels are
// low-cardinality: tool names, outcomes, reasons, statuses.
type Metrics interface {
	ToolCall(tool string, outcome mcpgate.Outcome, gateway, upstream time.Duration)
	UpstreamError(status int)
	AuthFailure(reason string)
}

type nopMetrics struct{}

func (nopMetrics) ToolCall(string, mcpgate.Outcome, time.Duration, time.Duration) {}
func (nopMetrics) UpstreamError(int)                                              {}
func (nopMetrics) AuthFailure(string)                                             {}

type nopAuditor struct{}

func (nopAuditor) Record(context.Context, mcpgate.AuditEvent) {}
func (nopAuditor) Saturated() bool                            { return false }

// SignupMode says who may create an account.
type SignupMode string

// The signup modes.
const (
	SignupOpen   SignupMode = "open"
	SignupInvite SignupMode = "invite"
)

// Options configure the services.
type Options struct {
	DB       *store.DB
	Keyring  *vault.Keyring
	Registry *connectors.Registry
	Audit    Auditor
	Metrics  Metrics
	Logger   *slog.Logger
	// PublicURL is where people reach the gateway; messages that send
	// them to a dashboard page use it.
	PublicURL string
	Signup    SignupMode
	// Mailer sends the account emails; nil means the instance has no
	// SMTP_URL, and the features that need email say so.
	Mailer Mailer
	// Webhooks sends the approval webhooks; nil: none can be set.
	Webhooks Webhooks
	// RequireVerifiedEmail is SIGNUP_VERIFY=required: until a person has
	// confirmed their address they cannot accept invitations or create
	// keys. It needs a Mailer.
	RequireVerifiedEmail bool
	// MaxKeysPerUser caps the working MCP keys one person may hold across
	// workspaces (0: DefaultMaxKeysPerUser); MaxWorkspacesPerUser caps the
	// shared workspaces one person may own (0: DefaultMaxWorkspacesPerUser).
	// Negative means no cap.
	MaxKeysPerUser       int
	MaxWorkspacesPerUser int
	// SignupsPerAddress bounds sign-up attempts per client address in 15
	// minutes (default 10).
	SignupsPerAddress int
	// PasswordParams default to password.Default; tests lower them.
	PasswordParams *password.Params
	// CallTimeout bounds one tool call unless its tool sets its own
	// (default 30 s).
	CallTimeout time.Duration
	// LockWait bounds how long a tool call waits for another call that
	// changes the same resource, or starts one where the workspace limits
	// how many run (default 10 s; see lockChanged).
	LockWait time.Duration
	// CacheTTL bounds how long a cached key, policy or credential is
	// trusted even without a notification (default 30 s): a safety net,
	// not the mechanism.
	CacheTTL time.Duration
	// OutageGrace is how long what was cached may stand in while the
	// database cannot be reached (0: DefaultOutageGrace; negative: never).
	OutageGrace time.Duration
	// Now is the clock (tests).
	Now func() time.Time
	// Upstreams relays calls of the workspaces' upstream servers' tools
	// (nil: they are listed, but their calls refused); the server service
	// discovers with the same pool. UpstreamAnswerBytes caps one answer
	// (0: the pool's default).
	Upstreams           *upstream.Pool[UpstreamKey]
	UpstreamAnswerBytes int64
	// UpstreamCredentials sends OAuth servers' bearer tokens (nil: servers
	// take headers only).
	UpstreamCredentials *UpstreamCredentials
	// UpstreamHealth counts the calls that could not reach a server and
	// marks it down (nil: calls count nothing); the server service and
	// the monitor share it.
	UpstreamHealth *UpstreamHealth
	// ApprovalKey keys the binding of approvals to their arguments; every
	// replica needs the same one (the wiring derives it from JWT_SECRET).
	// Unset, a random key is drawn: fine for one process (tests).
	ApprovalKey []byte
	// WaitTimer makes the timers of calls waiting for a person's decision
	// (default: real timers; tests fire their own).
	WaitTimer WaitTimer
}

// The defaults of the settings the services enforce (serve's
// MAX_KEYS_PER_USER, MAX_WORKSPACES_PER_USER and OUTAGE_GRACE take them as
// theirs). A hundred keys and twenty workspaces are more than one person
// needs and still bound what one account, or a script using it, can make
// the database hold. The grace is also the longest a key revoked during an
// outage keeps working on a replica cut off from the database, so it is
// minutes, not hours.
const (
	DefaultMaxKeysPerUser       = 100
	DefaultMaxWorkspacesPerUser = 20
	DefaultOutageGrace          = 10 * time.Minute
)

// core is what every service is built on: the store, the audit log, the
// log, the clock and the costs of password hashes. Service (and through it
// every service of the Set), Admin and Deliveries embed it, so that an
// account event or a password hash is made one way whoever asks.
type core struct {
	db       *store.DB
	log      *slog.Logger
	audit    Auditor
	now      func() time.Time
	pwParams password.Params
}

// newCore builds the core from options New or NewAdmin has defaulted.
func newCore(opts Options) core {
	c := core{db: opts.DB, log: opts.Logger, audit: opts.Audit, now: opts.Now, pwParams: password.Default}
	if opts.PasswordParams != nil {
		c.pwParams = *opts.PasswordParams
	}
	return c
}

// Service is the state the services share, made once by New: the options,
// the login throttle, the caches (policies, sealed credentials) and the
// trust that decides how long their entries stand, the advisory locker and
// the key binding approvals to their arguments. Every service of the Set
// points to the one Service, so that a cache one of them fills or a lock
// one of them takes is the others' too. It implements no service itself:
// its methods are the checks several services make alike (requireAdminChange,
// the current password, the mail throttle).
type Service struct {
	core
	opts     Options
	metrics  Metrics
	throttle loginThrottle
	creds    *store.CredentialCache
	locks    *store.Locker
	trust    *cacheTrust
	argsKey  []byte

	policies *trustcache.Cache[*workspacePolicy] // by workspace id
	// waits are the calls of this replica waiting for a person's decision.
	waits approvalWaits

	// beforeCache, when set (tests), runs between a cache load's read and
	// its store, to stage a race with an invalidation.
	beforeCache func()
}

// Set is the services built together on one Service, each the
// implementation of services of the root package. A front door is given
// those it uses; a service that works with another (a tool call that asks
// for an approval, an approval that notifies) holds it in a field.
type Set struct {
	*Service
	Accounts      *Accounts
	TwoFactor     *TwoFactor
	Workspaces    *Workspaces
	Keys          *Keys
	Connections   *Connections
	Tools         *Tools
	Approvals     *Approvals
	Notifications *Notifications
	Audit         *Audit
	Resources     *Resources
	Grants        *Grants
	Deliveries    *Deliveries
}

// The services implement the root package's interfaces.
var (
	_ mcpgate.AccountService      = (*Accounts)(nil)
	_ mcpgate.TwoFactorService    = (*TwoFactor)(nil)
	_ mcpgate.WorkspaceService    = (*Workspaces)(nil)
	_ mcpgate.KeyService          = (*Keys)(nil)
	_ mcpgate.ConnectionService   = (*Connections)(nil)
	_ mcpgate.ToolService         = (*Tools)(nil)
	_ mcpgate.GuardrailService    = (*Tools)(nil)
	_ mcpgate.ApprovalService     = (*Approvals)(nil)
	_ mcpgate.ApprovalWaiter      = (*Approvals)(nil)
	_ mcpgate.NotificationService = (*Notifications)(nil)
	_ mcpgate.AuditService        = (*Audit)(nil)
	_ mcpgate.ResourceService     = (*Resources)(nil)
	_ mcpgate.GrantService        = (*Grants)(nil)
)

// Accounts implements mcpgate.AccountService: sign-up, login, passwords,
// email addresses and their verification, reset links, sessions and the
// deletion of an account. A login's second factor is TwoFactor's.
type Accounts struct {
	*Service
	twoFactor *TwoFactor
}

// TwoFactor implements mcpgate.TwoFactorService: TOTP enrolment, recovery
// codes, and the second factor of a login.
type TwoFactor struct{ *Service }

// Workspaces implements mcpgate.WorkspaceService: workspaces, members,
// invitations and workspace settings.
type Workspaces struct{ *Service }

// Keys implements mcpgate.KeyService.
type Keys struct{ *Service }

// Connections implements mcpgate.ConnectionService.
type Connections struct{ *Service }

// Tools implements mcpgate.ToolService and mcpgate.GuardrailService: the
// workspace's tool policy (cached), its guardrails and the call path. A call
// that needs a person's approval or confirmation asks Approvals.
type Tools struct {
	*Service
	approvals *Approvals
}

// Approvals implements mcpgate.ApprovalService: approval requests, their
// binding to a call's arguments and the decisions on them. The calls it
// refuses are audited as Tools audits calls, and every step is told to
// Notifications.
type Approvals struct {
	*Service
	tools         *Tools
	notifications *Notifications
}

// Notifications implements mcpgate.NotificationService: the workspace's
// approval notification settings, and the mails and webhooks of every
// approval step. What became of them is recorded by Deliveries.
type Notifications struct {
	*Service
	approvals *Approvals
}

// Audit implements mcpgate.AuditService.
type Audit struct{ *Service }

// Resources implements mcpgate.ResourceService: the connectors' resources
// as the dashboard browses them, read through the tool path.
type Resources struct {
	*Service
	tools *Tools
}

// Grants implements mcpgate.GrantService.
type Grants struct{ *Service }

// withCoreDefaults fills in what the core needs and was not given.
func (opts Options) withCoreDefaults() Options {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.Audit = cmp.Or[Auditor](opts.Audit, nopAuditor{})
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return opts
}

// New returns the services, built on one Service.
func New(opts Options) *Set {
	opts = opts.withCoreDefaults()
	opts.Metrics = cmp.Or[Metrics](opts.Metrics, nopMetrics{})
	opts.CallTimeout = cmp.Or(opts.CallTimeout, 30*time.Second)
	opts.LockWait = cmp.Or(opts.LockWait, 10*time.Second)
	opts.CacheTTL = cmp.Or(opts.CacheTTL, 30*time.Second)
	opts.OutageGrace = cmp.Or(opts.OutageGrace, DefaultOutageGrace)
	opts.MaxKeysPerUser = cmp.Or(opts.MaxKeysPerUser, DefaultMaxKeysPerUser)
	opts.MaxWorkspacesPerUser = cmp.Or(opts.MaxWorkspacesPerUser, DefaultMaxWorkspacesPerUser)
	opts.SignupsPerAddress = cmp.Or(opts.SignupsPerAddress, defaultSignupsPerAddress)
	opts.Signup = cmp.Or(opts.Signup, SignupOpen)
	trust := &cacheTrust{ttl: opts.CacheTTL, grace: max(opts.OutageGrace, 0), now: opts.Now}
	// Until the wiring says otherwise (SetListening), the caches trust their
	// TTL: tests and tools run without a listener.
	trust.listening.Store(true)
	s := &Service{core: newCore(opts), opts: opts, metrics: opts.Metrics, trust: trust,
		creds: opts.DB.NewCredentialCache(trust), locks: opts.DB.NewLocker(opts.LockWait)}
	// beforeCache is installed after New (tests), so the hook reads it late.
	s.policies = trustcache.New[*workspacePolicy](trustcache.Options{Trust: trust, Now: opts.Now, BeforeStore: func() {
		if s.beforeCache != nil {
			s.beforeCache()
		}
	}})
	s.argsKey = opts.ApprovalKey
	if len(s.argsKey) == 0 {
		s.argsKey = make([]byte, 32)
		_, _ = rand.Read(s.argsKey)
	}
	s.throttle = loginThrottle{db: opts.DB, period: 15 * time.Minute, perPair: 5, perAddress: 30, perEmail: 100}
	set := &Set{Service: s, TwoFactor: &TwoFactor{s}, Workspaces: &Workspaces{s}, Keys: &Keys{s},
		Connections: &Connections{s}, Audit: &Audit{s}, Grants: &Grants{s}, Deliveries: &Deliveries{core: s.core, keyring: opts.Keyring}}
	set.Accounts = &Accounts{Service: s, twoFactor: set.TwoFactor}
	set.Tools = &Tools{Service: s}
	set.Notifications = &Notifications{Service: s}
	set.Approvals = &Approvals{Service: s, tools: set.Tools, notifications: set.Notifications}
	set.Tools.approvals, set.Notifications.approvals = set.Approvals, set.Approvals
	set.Resources = &Resources{Service: s, tools: set.Tools}
	return set
}

// The kinds of change Invalidate is told about.
const (
	InvalidateKeys   = store.InvalidateKeys
	InvalidatePolicy = store.InvalidatePolicy
	InvalidateConn   = store.InvalidateConn
)

// Invalidate drops cached state of a workspace: kind "keys", "policy" or
// "conn", or "" for everything of every workspace (after a lost listener
// connection, when notifications may have been missed). Key caches are the
// authenticators' (internal/auth), which the wiring tells too.
func (s *Set) Invalidate(kind, workspaceID string) { s.invalidate(kind, workspaceID) }

// invalidate is Invalidate, for the services that change what is cached.
func (s *Service) invalidate(kind, workspaceID string) {
	switch kind {
	case InvalidatePolicy:
		s.policies.Invalidate(func(wp *workspacePolicy) bool { return wp.id == workspaceID })
	case InvalidateConn:
		s.creds.Invalidate(workspaceID)
	case InvalidateKeys:
	default:
		s.policies.Invalidate(func(*workspacePolicy) bool { return true })
		s.creds.Invalidate("")
	}
}

// SetListening tells the caches whether the invalidation listener is
// connected: while it is not, nothing cached is used without a reload (see
// cacheTrust).
func (s *Set) SetListening(on bool) { s.trust.listening.Store(on) }

// Listening reports what SetListening was last told.
func (s *Set) Listening() bool { return s.trust.listening.Load() }

// CacheTrust returns the services' rule for how long a cached entry may be
// used (see cacheTrust): fresh for the TTL only while the invalidation
// listener is connected, and standing in through a database outage for the
// grace. Caches outside the package that must honour revocations the same
// way (the OAuth access-token authenticator) follow it too.
func (s *Set) CacheTrust() trustcache.Trust { return s.trust }

func (c *core) record(ctx context.Context, ev mcpgate.AuditEvent) { c.audit.Record(ctx, ev) }

var errAdminOnly = mcpgate.Errorf(mcpgate.EForbidden, "only a workspace owner or admin can do this")

// requireAdmin refuses actors who are not owner or admin of their
// workspace.
func requireAdmin(a *mcpgate.Actor) error {
	if !a.CanAdmin() {
		return errAdminOnly
	}
	return nil
}

// requireAdminChange refuses what requireAdmin refuses, and an owner or admin
// the workspace's two-factor policy stops (see requireTwoFactor): the check
// of every change the policy covers (tools, guardrails, credentials).
func (s *Service) requireAdminChange(ctx context.Context, a *mcpgate.Actor) error {
	if err := requireAdmin(a); err != nil {
		return err
	}
	return s.requireTwoFactor(ctx, a)
}

// requireTwoFactor is the workspace's policy "require two-factor sign-in for
// owners and admins" for admin changes: while it is on, an owner or admin
// without TOTP is refused the changes it covers (tools, guardrails, the E2B
// key, roles and invitations, the workspace's settings, consent to an OAuth
// app). Decisions for the human in the loop are held to it whatever the
// role (requireDecider). Actors without a role (MCP keys, OAuth grants) are
// not concerned. It is read from the database on every such change, which
// is rare: no cache to fall behind.
func (s *Service) requireTwoFactor(ctx context.Context, a *mcpgate.Actor) error {
	if !a.CanAdmin() {
		return nil
	}
	required, enrolled, err := s.db.TwoFactorPolicy(ctx, a.WorkspaceID, a.UserID)
	if err != nil {
		return err
	}
	if required && !enrolled {
		return mcpgate.Errorf(mcpgate.ETOTPEnrolment, "this workspace requires owners and admins to use two-factor sign-in "+
			"before they change tools, roles, guardrails or the E2B key: turn it on in Account settings (%s/app/account)",
			s.opts.PublicURL)
	}
	return nil
}
