package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/pgembed"
	"github.com/mcpgate/mcpgate/internal/store"
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
	db, closeDB, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeDB()
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
	srv := newHTTPServer(gw.Handler(), log)
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
	// New connections are refused at once; the calls in flight get
	// stopGrace to finish, then are answered with a tool error saying the
	// gateway is stopping (and audited; what the database cannot take goes
	// to the spool when gw closes). Nothing waits on the database longer
	// than its query timeout, so the handlers end soon after.
	gw.BeginStop(stopGrace)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), stopGrace+10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			log.Warn("shutdown", "err", err)
		}
		_ = srv.Close()
	}
	// What gw.Close still writes (last-use times, the audit queue) gets a
	// second per statement: a database that answers takes milliseconds,
	// and one that hangs must not hold the exit (the audit events go to
	// the spool instead).
	db.SetQueryTimeout(time.Second)
	return nil
}

// stopGrace is how long the tool calls in flight at a stop may run on
// before they are answered with "the gateway is stopping".
const stopGrace = 2 * time.Second

// newHTTPServer bounds what a client can hold: the headers within 10 s,
// the body within 60 s (bodies are capped by size too), an idle keep-alive
// connection 120 s, and an answer 30 s from the request. The JSON routes
// end their work in 15 s; the routes that stream for longer (MCP answers,
// the audit export) set a deadline per write for themselves through
// http.ResponseController, so a reader that stops reading holds them no
// longer than that per chunk.
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
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

// openStore connects to DATABASE_URL, or starts an embedded PostgreSQL
// under DATA_DIR and connects to it. The returned func closes the
// connection and stops the embedded database.
func openStore(ctx context.Context, cfg *Config, log *slog.Logger) (*store.DB, func(), error) {
	dsn, stop := cfg.DB.URL, func() {}
	if cfg.Embedded() {
		cluster, err := pgembed.Start(ctx, pgembed.Options{Dir: cfg.DB.DataDir, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		dsn, stop = cluster.DSN(), func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cluster.Stop(stopCtx); err != nil {
				log.Error("stop embedded postgres", "err", err)
			}
		}
	}
	db, err := store.OpenWith(ctx, dsn, store.Options{MaxConns: cfg.DB.MaxConns})
	if err != nil {
		stop()
		return nil, nil, err
	}
	log.Info("database pool", "max_conns", db.MaxConns(), "long_read_slots", db.LongReadSlots())
	return db, func() { db.Close(); stop() }, nil
}

// newGateway builds the gateway from serve's configuration.
func newGateway(ctx context.Context, cfg *Config, db *store.DB, log *slog.Logger) (*app.Gateway, error) {
	m := cfg.MCP
	return app.New(ctx, app.Options{
		DB: db, Logger: log, RootKey: cfg.Vault.EncryptionKey, JWTSecret: cfg.Session.JWTSecret,
		PublicURL: cfg.HTTP.PublicURL, Signup: cfg.Session.Signup, Mail: cfg.mailOptions(), SignupVerify: cfg.Mail.Verify,
		E2BAPIURL: cfg.E2B.APIURL, E2BDashboardURL: cfg.E2B.DashboardAPIURL,
		KeyRate: m.Key.Rate, KeyBurst: m.Key.Burst, UserRate: m.User.Rate, UserBurst: m.User.Burst,
		WorkspaceRate: m.Workspace.Rate, WorkspaceBurst: m.Workspace.Burst, OutageGrace: m.OutageGrace, Version: version,
		TrustedProxies: cfg.Proxy.Trusted, AllowedOrigins: cfg.Proxy.AllowedOrigins, PrivateNetworks: cfg.Proxy.PrivateNetworks,
		MaxKeysPerUser: cfg.Caps.KeysPerUser, MaxWorkspacesPerUser: cfg.Caps.WorkspacesPerUser,
		AuditRetention: cfg.Audit.Retention, DataDir: cfg.DB.DataDir,
		OAuthCIMD: testOAuthCIMD,
	})
}
