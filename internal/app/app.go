// Package app wires the gateway's parts into one running instance: store,
// vault keyring, connectors, the services built once on them, the MCP
// endpoint, the JSON API, the dashboard, metrics and the background work
// (cross-replica invalidation, vault maintenance and re-sealing, pruning). `mcpgate serve` and the in-process benchmark use the
// same wiring, so what is measured is what runs; `mcpgate user` runs on the
// operator's admin service, wired here too (Operator). It holds no business logic.
//
// Imports from this module: api, connectors, connectors/e2b, internal/audit, internal/auth, internal/httpx,
// internal/mail, internal/metrics, internal/netguard, internal/oauth, internal/password, internal/replicas, internal/reseal,
// internal/service, internal/store, internal/upstream, internal/webhook, mcp, mcpgate, vault, web.
package app

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/httpx"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/metrics"
	"github.com/mcpgate/mcpgate/internal/netguard"
	"github.com/mcpgate/mcpgate/internal/oauth"
	"github.com/mcpgate/mcpgate/internal/replicas"
	"github.com/mcpgate/mcpgate/internal/reseal"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/upstream"
	"github.com/mcpgate/mcpgate/internal/webhook"
	"github.com/mcpgate/mcpgate/mcp"
	"github.com/mcpgate/mcpgate/vault"
	"github.com/mcpgate/mcpgate/web"
)

// Options are the values the gateway is built from; cmd fills them from its
// configuration.
type Options struct {
	DB     *store.DB
	Logger *slog.Logger
	// RootKey is ENCRYPTION_KEY, base64.
	RootKey mcpgate.Secret
	// JWTSecret keys sessions and confirmation tokens (one derived key each).
	JWTSecret mcpgate.Secret
	PublicURL string
	Signup    string
	// Mail, when set, sends the account emails (SMTP_URL and MAIL_FROM).
	Mail *mail.Options
	// SignupVerify is SIGNUP_VERIFY: "required" holds back invitations and
	// keys until an address is confirmed (only with Mail).
	SignupVerify    string
	E2BAPIURL       string
	E2BDashboardURL string
	// E2BHTTPClient, when set, replaces the E2B connector's own client.
	E2BHTTPClient *http.Client
	KeyRate       rate.Limit
	KeyBurst      int
	// UserRate, UserBurst, WorkspaceRate and WorkspaceBurst are the
	// per-person and per-workspace limits (mcp.Options).
	UserRate, WorkspaceRate   rate.Limit
	UserBurst, WorkspaceBurst int
	// OutageGrace is how long cached state serves while the database is
	// unreachable (0: service.DefaultOutageGrace; negative: never).
	OutageGrace time.Duration
	Version     string
	// MaxKeysPerUser and MaxWorkspacesPerUser cap what one person may
	// create (0: the services' defaults).
	MaxKeysPerUser, MaxWorkspacesPerUser int
	// AllowedOrigins are browser origins allowed on /mcp besides PublicURL.
	AllowedOrigins []string
	// TrustedProxies give the client address behind a proxy (nil: none).
	TrustedProxies *httpx.Proxies
	// PrivateNetworks are UPSTREAM_PRIVATE_NETWORKS: the inner networks
	// approval webhooks and upstream MCP servers may reach.
	PrivateNetworks []netip.Prefix
	// Webhook, when set, tunes the approval webhooks' sender (tests: short
	// backoff); PrivateNetworks, Logger and Queue are the wiring's.
	Webhook webhook.Options
	// DataDir holds the audit spool (DATA_DIR); empty runs without one.
	DataDir string
	// AuditRetention is how long audit rows are kept; 0 keeps everything.
	AuditRetention time.Duration
	// OAuthCIMD configures fetching client ID metadata documents; only
	// tests set it (to reach a local TLS server).
	OAuthCIMD oauth.CIMDOptions
}

// StreamWriteTimeout is how long one write of a streamed answer (an MCP
// tool call's events) may take; the server's WriteTimeout, which fits the
// JSON routes, does not apply to them (httpx.WriteDeadlinePerWrite).
const StreamWriteTimeout = 30 * time.Second

// Gateway is a wired, running instance: HTTP handler and background work.
type Gateway struct {
	// Keyring, Service, Keys, MCP and API are exposed for tests and tools
	// that need to reach inside a running instance.
	Keyring *vault.Keyring
	Service *service.Set
	Keys    *auth.Keys
	OAuth   *oauth.Server
	Tokens  *auth.Tokens
	MCP     *mcp.Gateway
	API     *api.Server
	// Servers are the workspaces' upstream MCP servers; upstreams is
	// their pool of client sessions.
	Servers   *service.Servers
	upstreams *upstream.Pool[service.UpstreamKey]
	// Endpoints serve each server's own MCP endpoint.
	Endpoints *service.Endpoints

	db      *store.DB
	log     *slog.Logger
	audit   *audit.Writer
	mailer  *mail.Mailer
	hooks   *webhook.Sender
	metrics *metrics.Registry
	spool   *audit.Spool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New wires the gateway and starts its background work: the cross-replica
// invalidation listener, vault maintenance and pruning. It refuses a root key
// that does not open the database's vault.
func New(ctx context.Context, o Options) (*Gateway, error) {
	db, log, version := o.DB, o.Logger, o.Version
	rootKey, err := vault.ParseRootKey(o.RootKey.Reveal())
	if err != nil {
		return nil, err
	}
	keyring, err := vault.Open(ctx, rootKey, db.VaultKeys(), vault.Options{})
	if err != nil {
		if errors.Is(err, vault.ErrWrongRootKey) {
			return nil, fmt.Errorf("ENCRYPTION_KEY does not match this database: it is not the key the stored credentials "+
				"were sealed with (or the vault was rekeyed since). Start with the right key; nothing was changed: %w", err)
		}
		return nil, fmt.Errorf("open vault: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	gw := &Gateway{db: db, log: log, Keyring: keyring, cancel: cancel}
	spool := openSpool(ctx, o.DataDir, db, log)
	gw.spool = spool
	gw.audit = audit.New(audit.Options{Sink: db, Logger: log, Spool: spool})

	registry := connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: o.E2BAPIURL, DashboardURL: o.E2BDashboardURL,
		HTTPClient: o.E2BHTTPClient}))
	// The replicas on this database share the rate limits out (mcp).
	members := replicas.New(replicas.Options{Store: db, Logger: log})
	// The metrics read the invalidation listener's state at scrape time;
	// the wiring keeps it, and tells the services' caches too (below).
	var listenerUp atomic.Bool
	gw.metrics = metrics.New(metrics.Options{Version: version, AuditQueue: gw.audit.Len, DBStats: db.Pool.Stat,
		Listening: listenerUp.Load, Replicas: members.Count,
		SpoolBytes: func() int64 { return spoolSize(spool) },
		AuditSpool: func() metrics.AuditSpool {
			st := gw.audit.SpoolStats()
			return metrics.AuditSpool{Events: st.Events, Spooled: st.Spooled, Lost: st.Lost, Full: st.Full, FreeBytes: st.FreeBytes}
		}})
	so := service.Options{DB: db, Keyring: keyring, Registry: registry, Audit: gw.audit,
		Metrics: gw.metrics, Logger: log, PublicURL: o.PublicURL, Signup: service.SignupMode(o.Signup),
		MaxKeysPerUser: o.MaxKeysPerUser, MaxWorkspacesPerUser: o.MaxWorkspacesPerUser,
		OutageGrace: o.OutageGrace, ApprovalKey: deriveKey(o.JWTSecret.Reveal(), "mcpgate approval arguments")}
	// The mailer and the webhook sender report each outcome to Deliveries,
	// which records and audits it; it needs neither, so it comes first.
	deliveries := service.NewDeliveries(so)
	if o.Mail != nil {
		mo := *o.Mail
		// Approval mails wait in the database (the outbox) until sent;
		// the links' mails, which carry a credential, only in memory.
		mo.Logger, mo.Done, mo.Outbox = log, deliveries.MailDone, deliveries.MailOutbox()
		if gw.mailer, err = mail.New(mo); err != nil {
			cancel()
			return nil, err
		}
		so.Mailer = gw.mailer
		so.RequireVerifiedEmail = o.SignupVerify == "required"
	}
	wo := o.Webhook
	// The deliveries wait in the database (Deliveries is the Queue): the
	// sender claims, at start and every 30 s, those due that no live
	// replica holds, so that a stop or a crash loses none.
	wo.PrivateNetworks, wo.Logger, wo.Queue = o.PrivateNetworks, log, deliveries
	gw.hooks = webhook.New(wo)
	so.Webhooks = gw.hooks
	// One pool for the server service's discoveries and the tool
	// service's calls, so that both honour the same hop policy.
	// A server's notice that its tools changed schedules its re-discovery
	// by the monitor, built once the server service is.
	var monitor atomic.Pointer[service.Monitor]
	network, pool := newUpstreams(o, func(t upstream.Target) {
		if m := monitor.Load(); m != nil {
			m.ToolListChanged(t)
		}
	})
	so.Upstreams = pool
	// OAuth servers' bearer tokens, for calls, relays and discoveries alike.
	creds := service.NewUpstreamCredentials(service.UpstreamCredentialsOptions{DB: o.DB, Keyring: keyring, Audit: gw.audit,
		Logger: o.Logger, Network: network, PublicURL: o.PublicURL})
	so.UpstreamCredentials = creds
	// One count of the calls that could not reach a server, for the tool
	// service's calls and the servers' endpoints alike.
	health := service.NewUpstreamHealth(service.UpstreamHealthOptions{DB: db, Logger: log})
	so.UpstreamHealth = health
	gw.Service = service.New(so)
	set := gw.Service
	set.SetListening(false) // until the invalidation listener is connected
	gw.metrics.CountApprovalWaits(set.ApprovalWaits)
	// The MCP endpoint's authenticators follow the services' trust, so that
	// keys and tokens have the revocation and outage guarantees of every
	// other cache.
	gw.Keys = auth.NewKeys(auth.KeysOptions{Store: db, Trust: set.CacheTrust(), Logger: log})
	gw.Tokens = auth.NewTokens(auth.TokensOptions{Store: db, OwnsResource: oauth.OwnsResource(o.PublicURL),
		Trust: set.CacheTrust(), Logger: log})
	gw.upstreams = pool
	gw.Servers = service.NewServers(service.ServersOptions{DB: o.DB, Keyring: keyring, Audit: gw.audit, Logger: o.Logger,
		Registry: registry, Pool: pool, Network: network, PublicURL: o.PublicURL, Invalidate: set.Invalidate,
		Credentials: creds, Health: health})
	// The monitor probes the servers that are down and re-discovers those
	// that are up; it stops with the gateway's context.
	monitor.Store(service.NewMonitor(service.MonitorOptions{Servers: gw.Servers, Logger: log}))
	gw.goBackground(func() { monitor.Load().Run(ctx) })
	gw.Endpoints = service.NewEndpoints(gw.Servers, set.Tools, set.CacheTrust())
	demos := connectors.DemoProbes(registry)
	dashboard := web.New(web.Options{Services: webServices(set), Servers: gw.Servers, Logger: log, PublicURL: o.PublicURL, Version: version,
		Demo: func(connector string) bool { return demos[connector].On() }})
	gw.OAuth = oauth.New(oauth.Options{DB: db, Workspaces: set.Workspaces, Consent: dashboard,
		Audit: gw.audit, Logger: log, PublicURL: o.PublicURL, CIMD: o.OAuthCIMD, Tokens: gw.Tokens})
	// The login page an authorization request starts with names its app.
	dashboard.SetOAuthApp(gw.OAuth.AppName)
	gw.MCP = mcp.New(mcp.Options{
		Tools: set.Tools, Approvals: set.Approvals, Registry: registry, Tokens: db,
		// Access tokens first: the key authenticator refuses any bearer
		// that is not a key, and an access token is not one.
		Authenticators: []mcpgate.Authenticator{gw.Tokens, gw.Keys}, Challenge: gw.OAuth.Challenge(),
		ServerChallenge: gw.OAuth.ServerChallenge, TokenFor: oauth.TokenFor(o.PublicURL),
		Audit: gw.audit, Metrics: gw.metrics, Logger: log, PublicURL: o.PublicURL, Version: version,
		ConfirmationSecret: deriveKey(o.JWTSecret.Reveal(), "mcpgate confirmation tokens"),
		KeyRate:            o.KeyRate, KeyBurst: o.KeyBurst, UserRate: o.UserRate, UserBurst: o.UserBurst,
		WorkspaceRate: o.WorkspaceRate, WorkspaceBurst: o.WorkspaceBurst, AllowedOrigins: o.AllowedOrigins,
		Replicas: members.Count,
		// A client's answer to a relayed request reaches the replica
		// whose call waits for it through the database.
		RelayAnswers: db, SessionEnds: db, StreamOps: db, ReplicaID: members.ID(),
	})
	gw.metrics.CountHeldCalls(gw.MCP.HeldCalls)
	gw.API = api.New(api.Options{
		Services:       apiServices(set, gw.Tokens),
		Sessions:       db,
		Logger:         log,
		PublicURL:      o.PublicURL,
		JWTSecret:      deriveKey(o.JWTSecret.Reveal(), "mcpgate dashboard sessions"),
		Ready:          db.Ready,
		TrustedProxies: o.TrustedProxies,
		MCP:            httpx.WriteDeadlinePerWrite(gw.MCP.Handler(), StreamWriteTimeout),
		ServerMCP:      httpx.WriteDeadlinePerWrite(gw.MCP.ServerHandler(gw.Endpoints), StreamWriteTimeout),
		Metrics:        gw.metrics.Handler(),
		Web:            dashboard,
		OAuth:          gw.OAuth.Handler(),
		Servers:        gw.Servers,
		ServerOAuth:    gw.Servers,
	})
	// Is a connector's upstream its bundled simulator? Asked once in the
	// background, so that no call waits for it; the dashboard says "demo
	// mode" when it is.
	for _, probe := range demos {
		gw.goBackground(func() { probe.Run(ctx) })
	}
	listening := make(chan struct{})
	gw.goBackground(func() {
		db.Listen(ctx, log, listening, func(inv store.Invalidation) {
			// Logged once every cache has dropped what it names, so that a
			// reader of the log (an operator, the end-to-end tests) knows
			// from when on this replica serves the change.
			defer log.Debug("invalidation applied", "kind", inv.Kind, "workspace_id", inv.WorkspaceID)
			switch inv.Kind {
			case store.InvalidateReplicas: // a replica joined or left
				members.Refresh()
				return
			case store.InvalidateApproval: // a person decided: the calls waiting here read it
				gw.Service.WakeApprovalWaits(inv.WorkspaceID, inv.ID)
				return
			case store.InvalidateRelayAnswer: // a client answered a relayed request on another replica
				gw.MCP.RelayAnswerStored(inv.WorkspaceID, inv.ID)
				return
			case store.InvalidateSessionEnd: // a client ended its session on another replica
				gw.MCP.ClientSessionEnded(inv.WorkspaceID, inv.ID)
				return
			case store.InvalidateStreamOp: // a subscription waits for a stream, maybe one held here
				gw.MCP.StreamOpStored(inv.WorkspaceID, inv.ID)
				return
			case store.InvalidateStreamOpAnswered: // the replica holding the stream answered a subscription
				gw.MCP.StreamOpAnswered(inv.WorkspaceID, inv.ID)
				return
			case store.InvalidateSessionEndAck: // a replica heard of a session's end
				id, replica, _ := strings.Cut(inv.ID, "/")
				gw.MCP.SessionEndAcked(inv.WorkspaceID, id, replica)
				return
			case "": // notifications may have been missed, a join, a leave or a decision too
				members.Refresh()
				gw.Service.WakeApprovalWaits("", "")
				gw.MCP.RelayAnswerStored("", "")
				gw.MCP.StreamOpStored("", "")
				gw.MCP.StreamOpAnswered("", "")
			}
			gw.Keys.Invalidate(inv.Kind, inv.WorkspaceID)
			gw.Tokens.Invalidate(inv.Kind, inv.WorkspaceID)
			set.Invalidate(inv.Kind, inv.WorkspaceID)
			gw.Endpoints.Invalidate(inv.Kind, inv.WorkspaceID)
			// Last, once the caches are dropped: the MCP streams of the
			// workspace check their tools lists and push what changed.
			gw.MCP.CatalogChanged(inv.Kind, inv.WorkspaceID)
		}, func(on bool) { listenerUp.Store(on); set.SetListening(on) })
	})
	gw.goBackground(func() { members.Run(ctx) })
	gw.goBackground(func() { gw.pruneLoop(ctx) })
	gw.goBackground(func() { db.RunAuditMaintenance(ctx, log, o.AuditRetention, time.Hour) })
	gw.goBackground(func() {
		_ = keyring.Maintain(ctx, func(err error) { log.Warn("vault maintenance", "err", err) })
	})
	gw.goBackground(func() { _ = reseal.Watch(ctx, db, keyring, log, reseal.Options{}) })
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		log.Warn("invalidation listener not connected yet; caches fall back to their TTL")
	}
	return gw, nil
}

// newUpstreams builds the hop's policy and the upstream pool. The hop
// reaches the public internet over https, and the operator's private
// networks (UPSTREAM_PRIVATE_NETWORKS) besides; "public" is the gateway's
// one table of special-use ranges, never this host's own addresses. The
// connect timeout stays under the JSON routes' 15 s, so that a discovery
// that fails says why instead of being cut off.
func newUpstreams(o Options, onToolListChanged func(upstream.Target)) (upstream.Network, *upstream.Pool[service.UpstreamKey]) {
	network := upstream.Network{Private: o.PrivateNetworks,
		Public: func(a netip.Addr) bool { return netguard.Public(a) && !netguard.Own(a) }}
	pool := upstream.New[service.UpstreamKey](upstream.Options{Network: network, Logger: o.Logger,
		ClientName: "mcpgate", ClientVersion: cmp.Or(o.Version, "dev"), ConnectTimeout: 12 * time.Second,
		OnToolListChanged: onToolListChanged})
	return network, pool
}

func (gw *Gateway) goBackground(fn func()) {
	gw.wg.Add(1)
	go func() { defer gw.wg.Done(); fn() }()
}

func spoolSize(s *audit.Spool) int64 {
	if s == nil {
		return 0
	}
	return s.Size()
}

// spoolMaxBytes bounds the audit spool: about a million events.
const spoolMaxBytes = 512 << 20

// lowSpoolDisk is the free space under which the start warns: a few
// thousand events, a few minutes of a busy gateway's outage.
const lowSpoolDisk = 1 << 20

// openSpool opens the audit spool under dir and writes what an earlier stop
// left in it to the database, before the gateway serves: the log then holds
// every event that was answered. Nothing here stops the gateway from
// starting: a replay needs no disk space (a full disk only keeps it from
// recording its progress, which the database's one-row-per-event makes
// safe to lose), and one the database refuses is left to the audit writer,
// which replays in the background while the gateway serves. Without a
// writable dir (a read-only container) the gateway runs without a spool and
// says at start, as an error, what that costs: it chooses serving over
// refusing to start, since a spool only matters when a stop meets an outage.
func openSpool(ctx context.Context, dir string, db *store.DB, log *slog.Logger) *audit.Spool {
	if dir == "" {
		return nil
	}
	spool, err := audit.OpenSpool(dir, spoolMaxBytes)
	if err != nil {
		// Loud, at every start: the gateway serves, but one of its
		// guarantees is gone until DATA_DIR is writable.
		log.Error("audit spool disabled: DATA_DIR is not writable, so a stop during a database outage loses the audit events "+
			"still queued (the log then says how many); give the gateway a writable DATA_DIR", "err", err)
		return nil
	}
	if free := spool.Free(); free >= 0 && free < lowSpoolDisk {
		log.Warn("audit spool: the disk under DATA_DIR is nearly full; the gateway serves, but a stop during a database "+
			"outage can spool little and loses the rest (the log then says how many); free some space",
			"free_bytes", free, "path", spool.Path())
	}
	if spool.Size() == 0 {
		return spool
	}
	waiting := spool.Events()
	res, err := spool.Replay(ctx, db, 500)
	if res.Replayed > 0 || res.Damaged > 0 {
		log.Info("audit spool replayed", "count", res.Replayed, "damaged_records", res.Damaged, "path", spool.Path())
	}
	if res.ProgressErr != nil {
		log.Warn("audit spool replay could not record its progress (is the disk full?); harmless: a replay repeated "+
			"from the start writes no event twice", "err", res.ProgressErr, "path", spool.Path())
	}
	if err != nil {
		log.Warn("audit events spooled at the last stop not written yet; the gateway serves and writes them as soon as "+
			"the database takes them", "count", waiting-res.Replayed, "path", spool.Path(), "err", err)
	}
	return spool
}

// deriveKey gives each use of JWT_SECRET its own key, so that a session token
// can never pass as a confirmation token or the other way round.
func deriveKey(secret, purpose string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// BeginStop starts a stop: the tool calls still running after grace are
// answered with a tool error saying the gateway is stopping (mcp.Gateway.
// BeginStop). Close follows once the HTTP server has drained.
func (gw *Gateway) BeginStop(grace time.Duration) { gw.MCP.BeginStop(grace) }

// Handler returns the root HTTP handler.
func (gw *Gateway) Handler() http.Handler { return gw.API.Handler() }

// Close stops background work and writes what is queued: last-used times,
// then the audit log.
func (gw *Gateway) Close() {
	gw.cancel()
	gw.wg.Wait()
	gw.MCP.Close()
	_ = gw.upstreams.Close()
	gw.Keys.Close()
	gw.Tokens.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if gw.mailer != nil {
		gw.mailer.Close(ctx) // before the audit log, which records its outcomes
	}
	gw.hooks.Close(ctx) // so too the webhooks: an attempt cut short stays queued for the next start
	if err := gw.audit.Close(ctx); err != nil {
		gw.log.Error("audit log not fully written at shutdown", "err", err)
	}
	if gw.spool != nil {
		_ = gw.spool.Close()
	}
}

// pruneLoop deletes expired sessions, spent tokens and old login failures.
func (gw *Gateway) pruneLoop(ctx context.Context) {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := gw.db.PruneExpired(ctx, 15*time.Minute); err != nil && ctx.Err() == nil {
				gw.log.Warn("prune expired rows", "err", err)
			}
			if err := gw.Service.Approvals.ExpireApprovals(ctx); err != nil && ctx.Err() == nil {
				gw.log.Warn("expire approval requests", "err", err)
			}
			if err := gw.OAuth.Prune(ctx); err != nil && ctx.Err() == nil {
				gw.log.Warn("prune expired OAuth rows", "err", err)
			}
		}
	}
}

// apiServices gives the API the services it calls. A grant revoked there is
// dropped from this replica's token cache at once (as /oauth/revoke does),
// ahead of the notification every replica gets: the app's next call here is
// refused, not served from the cache for the moment the notification takes.
func apiServices(set *service.Set, tokens *auth.Tokens) api.Services {
	return api.Services{Accounts: set.Accounts, TwoFactor: set.TwoFactor, Workspaces: set.Workspaces, Keys: set.Keys,
		Connections: set.Connections, Tools: set.Tools, Guardrails: set.Tools, Audit: set.Audit, Approvals: set.Approvals,
		Grants: grantsRevokedHere{GrantService: set.Grants, tokens: tokens}, Notifications: set.Notifications}
}

// webServices gives the dashboard the services its pages read (it lists
// grants and revokes none).
func webServices(set *service.Set) web.Services {
	return web.Services{Accounts: set.Accounts, TwoFactor: set.TwoFactor, Workspaces: set.Workspaces, Keys: set.Keys,
		Connections: set.Connections, Tools: set.Tools, Guardrails: set.Tools, Audit: set.Audit, Resources: set.Resources,
		Approvals: set.Approvals, Grants: set.Grants, Notifications: set.Notifications}
}

// grantsRevokedHere is the grant service with a revocation that also drops
// this replica's cached access tokens of the workspace.
type grantsRevokedHere struct {
	mcpgate.GrantService
	tokens *auth.Tokens
}

func (g grantsRevokedHere) RevokeGrant(ctx context.Context, a *mcpgate.Actor, id string) error {
	if err := g.GrantService.RevokeGrant(ctx, a, id); err != nil {
		return err
	}
	g.tokens.Invalidate(store.InvalidateGrants, a.WorkspaceID)
	return nil
}
