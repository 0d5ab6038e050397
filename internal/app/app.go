// Package app wires the gateway's parts into one running instance: store,
// vault keyring, connectors, the services built once on them, the MCP
// endpoint, the JSON API, the dashboard, metrics and the background work
// (cross-replica invalidation, vault maintenance and re-sealing, pruning). `mcpgate serve` and the in-process benchmark use the
// same wiring, so what is measured is what runs. It holds no business logic.
package app

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/metrics"
	"github.com/mcpgate/mcpgate/internal/reseal"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/store"
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
	// OutageGrace is how long cached state serves while the database is
	// unreachable (default 10 minutes; negative: never).
	OutageGrace time.Duration
	Version     string
}

// Gateway is a wired, running instance: HTTP handler and background work.
type Gateway struct {
	// Keyring, Service, Keys, MCP and API are exposed for tests and tools
	// that need to reach inside a running instance.
	Keyring *vault.Keyring
	Service *service.Service
	Keys    *service.KeyAuthenticator
	MCP     *mcp.Gateway
	API     *api.Server

	db      *store.DB
	log     *slog.Logger
	audit   *audit.Writer
	mailer  *mail.Mailer
	metrics *metrics.Registry
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
	gw.audit = audit.New(audit.Options{Sink: db, Logger: log})

	registry := connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: o.E2BAPIURL, DashboardURL: o.E2BDashboardURL,
		HTTPClient: o.E2BHTTPClient}))
	// The metrics read the services' state at scrape time only.
	var svc *service.Service
	gw.metrics = metrics.New(metrics.Options{Version: version, AuditQueue: gw.audit.Len, DBStats: db.Pool.Stat,
		Listening: func() bool { return svc != nil && svc.Listening() }})
	var mailer service.Mailer
	if o.Mail != nil {
		mo := *o.Mail
		mo.Logger = log
		// The mailer reports each outcome to the services, which audit it.
		mo.Done = func(r mail.Result) { svc.MailDone(r) }
		if gw.mailer, err = mail.New(mo); err != nil {
			cancel()
			return nil, err
		}
		mailer = gw.mailer
	}
	gw.Service = service.New(service.Options{DB: db, Keyring: keyring, Registry: registry, Audit: gw.audit,
		Metrics: gw.metrics, Logger: log, PublicURL: o.PublicURL, Signup: service.SignupMode(o.Signup),
		OutageGrace: o.OutageGrace, Mailer: mailer,
		RequireVerifiedEmail: mailer != nil && o.SignupVerify == "required"})
	svc = gw.Service
	gw.Service.SetListening(false) // until the invalidation listener is connected
	gw.Keys = gw.Service.NewKeyAuthenticator()
	services := gw.Service.Services()
	gw.MCP = mcp.New(mcp.Options{
		Tools: services.Tools, Registry: registry, Authenticators: []mcpgate.Authenticator{gw.Keys}, Tokens: db,
		Audit: gw.audit, Metrics: gw.metrics, Logger: log, PublicURL: o.PublicURL, Version: version,
		ConfirmationSecret: deriveKey(o.JWTSecret.Reveal(), "mcpgate confirmation tokens"),
		KeyRate:            o.KeyRate, KeyBurst: o.KeyBurst,
	})
	demo := &web.DemoProbe{}
	gw.API = api.New(api.Options{
		Services:  services,
		Sessions:  db,
		Logger:    log,
		PublicURL: o.PublicURL,
		JWTSecret: deriveKey(o.JWTSecret.Reveal(), "mcpgate dashboard sessions"),
		Ready:     db.Ready,
		MCP:       gw.MCP.Handler(),
		Metrics:   gw.metrics.Handler(),
		Web: web.New(web.Options{Services: services, Logger: log,
			PublicURL: o.PublicURL, Version: version, Demo: demo.On}),
	})
	// Is E2B the bundled simulator? Asked once in the background, so that no
	// call waits for it; the dashboard says "demo mode" when it is.
	gw.goBackground(func() { demo.Run(ctx, o.E2BHTTPClient, o.E2BAPIURL) })
	listening := make(chan struct{})
	gw.goBackground(func() {
		db.Listen(ctx, log, listening, func(inv store.Invalidation) {
			gw.Keys.Invalidate(inv.Kind, inv.WorkspaceID)
			gw.Service.Invalidate(inv.Kind, inv.WorkspaceID)
		}, gw.Service.SetListening)
	})
	gw.goBackground(func() { gw.pruneLoop(ctx) })
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

func (gw *Gateway) goBackground(fn func()) {
	gw.wg.Add(1)
	go func() { defer gw.wg.Done(); fn() }()
}

// deriveKey gives each use of JWT_SECRET its own key, so that a session token
// can never pass as a confirmation token or the other way round.
func deriveKey(secret, purpose string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// Handler returns the root HTTP handler.
func (gw *Gateway) Handler() http.Handler { return gw.API.Handler() }

// Close stops background work and writes what is queued: last-used times,
// then the audit log.
func (gw *Gateway) Close() {
	gw.cancel()
	gw.wg.Wait()
	gw.MCP.Close()
	gw.Keys.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if gw.mailer != nil {
		gw.mailer.Close(ctx) // before the audit log, which records its outcomes
	}
	if err := gw.audit.Close(ctx); err != nil {
		gw.log.Error("audit log not fully written at shutdown", "err", err)
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
		}
	}
}
