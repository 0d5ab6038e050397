// Package app wires the gateway's parts into one running instance: store,
// vault keyring, connectors, the MCP gateway, the JSON API, the dashboard,
// metrics and the background work (cross-replica invalidation, vault
// maintenance, pruning). `mcpgate serve` and the in-process benchmark use the
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
	"github.com/mcpgate/mcpgate/internal/metrics"
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
	JWTSecret       mcpgate.Secret
	PublicURL       string
	Signup          string
	E2BAPIURL       string
	E2BDashboardURL string
	// E2BHTTPClient, when set, replaces the E2B connector's own client.
	E2BHTTPClient *http.Client
	KeyRate       rate.Limit
	KeyBurst      int
	Version       string
	// AuditRetention is how long audit rows are kept; 0 keeps everything.
	AuditRetention time.Duration
}

// Gateway is a wired, running instance: HTTP handler and background work.
type Gateway struct {
	// Keyring, MCP, API and Creds are exposed for tests and tools that need
	// to reach inside a running instance.
	Keyring *vault.Keyring
	MCP     *mcp.Gateway
	API     *api.Server
	Creds   *store.CredentialCache

	db      *store.DB
	log     *slog.Logger
	audit   *audit.Writer
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
	gw.metrics = metrics.New(metrics.Options{Version: version, AuditQueue: gw.audit.Len, DBStats: db.Pool.Stat})
	gw.Creds = db.NewCredentialCache(30 * time.Second)
	registry := connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: o.E2BAPIURL, DashboardURL: o.E2BDashboardURL,
		HTTPClient: o.E2BHTTPClient}))
	gw.MCP = mcp.New(mcp.Options{
		Registry: registry, Backend: backend{db, keyring, gw.Creds}, Audit: gw.audit, Metrics: gw.metrics, Logger: log,
		PublicURL: o.PublicURL, Version: version,
		ConfirmationSecret: deriveKey(o.JWTSecret.Reveal(), "mcpgate confirmation tokens"),
		KeyRate:            o.KeyRate, KeyBurst: o.KeyBurst,
	})
	gw.API = api.New(api.Options{
		Store:     db,
		Logger:    log,
		PublicURL: o.PublicURL,
		Signup:    api.SignupMode(o.Signup),
		JWTSecret: deriveKey(o.JWTSecret.Reveal(), "mcpgate dashboard sessions"),
		Ready:     db.Ready,
		Audit:     gw.audit,
		Gateway:   gw.MCP,
		Keys:      db,
		AuditLog:  db,
		MCP:       gw.MCP.Handler(),
		Metrics:   gw.metrics.Handler(),
		Web: web.New(web.Options{Data: webData{DB: db, Gateway: gw.MCP}, Logger: log,
			PublicURL: o.PublicURL, Version: version}),
	})
	listening := make(chan struct{})
	gw.goBackground(func() {
		db.Listen(ctx, log, listening, func(inv store.Invalidation) {
			gw.MCP.Invalidate(inv.Kind, inv.WorkspaceID)
			if inv.Kind == store.InvalidateConn || inv.Kind == "" {
				gw.Creds.Invalidate(inv.WorkspaceID)
			}
		})
	})
	gw.goBackground(func() { gw.pruneLoop(ctx) })
	gw.goBackground(func() { db.RunAuditMaintenance(ctx, log, o.AuditRetention, time.Hour) })
	gw.goBackground(func() {
		_ = keyring.Maintain(ctx, func(err error) { log.Warn("vault maintenance", "err", err) })
	})
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
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
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

// backend adapts the store and the keyring to what the MCP gateway needs:
// credentials are sealed and opened with the keyring (from a cache of
// ciphertexts, so a call needs no query), everything else is the store's.
type backend struct {
	*store.DB
	keyring *vault.Keyring
	creds   *store.CredentialCache
}

func (b backend) OpenCredential(ctx context.Context, workspaceID, connector string) (mcpgate.Secret, error) {
	return b.creds.Open(ctx, b.keyring, workspaceID, connector)
}

func (b backend) PutConnection(ctx context.Context, c *mcpgate.Connection, credential mcpgate.Secret) error {
	if err := b.DB.PutConnection(ctx, b.keyring, c, credential); err != nil {
		return err
	}
	// This replica drops its copy at once; the others on the notification.
	b.creds.Invalidate(c.WorkspaceID)
	return nil
}

func (b backend) DeleteConnection(ctx context.Context, workspaceID, connector string) error {
	if err := b.DB.DeleteConnection(ctx, workspaceID, connector); err != nil {
		return err
	}
	b.creds.Invalidate(workspaceID)
	return nil
}

// webData gives the dashboard the store's reads and the gateway's tools.
type webData struct {
	*store.DB
	*mcp.Gateway
}

// CallsPerHour maps store.DB.AuditHourly to the dashboard's type.
func (d webData) CallsPerHour(ctx context.Context, workspaceID, actorID string, since time.Time) ([]web.HourCount, error) {
	buckets, err := d.DB.AuditHourly(ctx, workspaceID, actorID, since)
	if err != nil {
		return nil, err
	}
	out := make([]web.HourCount, len(buckets))
	for i, b := range buckets {
		out[i] = web.HourCount{Hour: b.Hour, Calls: b.Calls, Errors: b.Errors}
	}
	return out, nil
}
