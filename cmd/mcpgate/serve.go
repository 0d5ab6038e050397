package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/metrics"
	"github.com/mcpgate/mcpgate/internal/pgembed"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/mcp"
	"github.com/mcpgate/mcpgate/vault"
	"github.com/mcpgate/mcpgate/web"
)

// serve runs the gateway until ctx ends. When ready is not nil it receives
// the address the server listens on, once it accepts connections.
func serve(ctx context.Context, args []string, getenv func(string) string, logOut io.Writer, ready chan<- string) error {
	cfg, err := LoadConfig(args, getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg, logOut)
	setGCDefaults(getenv, log)
	generated, err := cfg.ensureGeneratedSecrets()
	if err != nil {
		return err
	}
	for _, path := range generated {
		log.Warn("generated a secret for the embedded database; back it up, it cannot be recovered", "path", path)
	}
	dsn, stopDB, err := openDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopDB()

	db, err := store.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	n, err := db.Migrate(ctx)
	if err != nil {
		return err
	}
	log.Info("schema ready", "applied", n, "version", store.LatestMigration())

	gw, err := newGateway(ctx, cfg, db, log)
	if err != nil {
		return err
	}
	defer gw.Close()

	ln, err := net.Listen("tcp", cfg.HTTP.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTP.ListenAddr, err)
	}
	srv := &http.Server{
		Handler:           gw.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("mcpgate serving", "addr", ln.Addr().String(), "public_url", cfg.HTTP.PublicURL, "version", version)
	if ready != nil {
		ready <- ln.Addr().String()
	}

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("shutdown", "err", err)
	}
	return nil
}

// setGCDefaults trades memory for CPU unless the operator chose GOGC: the MCP
// SDK allocates hundreds of kilobytes of short-lived buffers per call, and at
// Go's default GOGC=100 the collector takes a large share of the CPU. A
// memory limit keeps the heap bounded all the same. /metrics reports both.
func setGCDefaults(getenv func(string) string, log *slog.Logger) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(400)
		log.Debug("GOGC not set; using 400")
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(1 << 30)
		log.Debug("GOMEMLIMIT not set; using 1 GiB")
	}
}

// openDatabase returns the DSN to use: DATABASE_URL, or an embedded
// PostgreSQL started under DATA_DIR (stopped by the returned func).
func openDatabase(ctx context.Context, cfg *Config, log *slog.Logger) (string, func(), error) {
	if !cfg.Embedded() {
		return cfg.DB.URL, func() {}, nil
	}
	cluster, err := pgembed.Start(ctx, pgembed.Options{Dir: cfg.DB.DataDir, Logger: log})
	if err != nil {
		return "", nil, err
	}
	log.Info("embedded postgres running", "data_dir", cfg.DB.DataDir)
	return cluster.DSN(), func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cluster.Stop(stopCtx); err != nil {
			log.Error("stop embedded postgres", "err", err)
		} else {
			log.Info("embedded postgres stopped")
		}
	}, nil
}

// gateway holds the wired parts of a running instance.
type gateway struct {
	cfg     *Config
	db      *store.DB
	log     *slog.Logger
	api     *api.Server
	mcp     *mcp.Gateway
	keyring *vault.Keyring
	audit   *audit.Writer
	metrics *metrics.Registry
	creds   *store.CredentialCache
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func newGateway(ctx context.Context, cfg *Config, db *store.DB, log *slog.Logger) (*gateway, error) {
	rootKey, err := vault.ParseRootKey(cfg.Vault.EncryptionKey.Reveal())
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
	gw := &gateway{cfg: cfg, db: db, log: log, keyring: keyring, cancel: cancel}
	gw.audit = audit.New(audit.Options{Sink: db, Logger: log})
	gw.metrics = metrics.New(metrics.Options{Version: version, AuditQueue: gw.audit.Len, DBStats: db.Pool.Stat})
	gw.creds = db.NewCredentialCache(30 * time.Second)
	registry := connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: cfg.E2B.APIURL, DashboardURL: cfg.E2B.DashboardAPIURL}))
	keyRate, keyBurst := cfg.KeyRate()
	gw.mcp = mcp.New(mcp.Options{
		Registry: registry, Backend: backend{db, keyring, gw.creds}, Audit: gw.audit, Metrics: gw.metrics, Logger: log,
		PublicURL: cfg.HTTP.PublicURL, Version: version,
		ConfirmationSecret: deriveKey(cfg.Session.JWTSecret.Reveal(), "mcpgate confirmation tokens"),
		KeyRate:            rate.Limit(keyRate), KeyBurst: keyBurst,
	})
	gw.api = api.New(api.Options{
		Store:     db,
		Logger:    log,
		PublicURL: cfg.HTTP.PublicURL,
		Signup:    api.SignupMode(cfg.Session.Signup),
		JWTSecret: deriveKey(cfg.Session.JWTSecret.Reveal(), "mcpgate dashboard sessions"),
		Ready:     db.Ready,
		Audit:     gw.audit,
		Gateway:   gw.mcp,
		Keys:      db,
		AuditLog:  db,
		MCP:       gw.mcp.Handler(),
		Metrics:   gw.metrics.Handler(),
		Web: web.New(web.Options{Data: webData{DB: db, Gateway: gw.mcp}, Logger: log,
			PublicURL: cfg.HTTP.PublicURL, Version: version}),
	})
	listening := make(chan struct{})
	gw.goBackground(func() {
		db.Listen(ctx, log, listening, func(inv store.Invalidation) {
			gw.mcp.Invalidate(inv.Kind, inv.WorkspaceID)
			if inv.Kind == store.InvalidateConn || inv.Kind == "" {
				gw.creds.Invalidate(inv.WorkspaceID)
			}
		})
	})
	gw.goBackground(func() { gw.pruneLoop(ctx) })
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

func (gw *gateway) goBackground(fn func()) {
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
func (gw *gateway) Handler() http.Handler { return gw.api.Handler() }

// Close stops background work and writes what is queued: last-used times,
// then the audit log.
func (gw *gateway) Close() {
	gw.cancel()
	gw.wg.Wait()
	gw.mcp.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := gw.audit.Close(ctx); err != nil {
		gw.log.Error("audit log not fully written at shutdown", "err", err)
	}
}

// pruneLoop deletes expired sessions, spent tokens and old login failures.
func (gw *gateway) pruneLoop(ctx context.Context) {
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
func (d webData) CallsPerHour(ctx context.Context, workspaceID string, since time.Time) ([]web.HourCount, error) {
	buckets, err := d.DB.AuditHourly(ctx, workspaceID, since)
	if err != nil {
		return nil, err
	}
	out := make([]web.HourCount, len(buckets))
	for i, b := range buckets {
		out[i] = web.HourCount{Hour: b.Hour, Calls: b.Calls, Errors: b.Errors}
	}
	return out, nil
}
