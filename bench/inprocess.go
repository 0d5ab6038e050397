package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/logctx"
	"github.com/mcpgate/mcpgate/internal/store"
)

// inprocGateway is the gateway running inside this process, so that pprof
// sees it. It is wired by internal/app exactly as `mcpgate serve` wires it.
type inprocGateway struct {
	url string
	srv *http.Server
	db  *store.DB
	gw  *app.Gateway
}

type inprocOptions struct {
	dsn, e2bURL, jwtSecret, encryptionKey string
	// e2bHTTP, when set, is the E2B client's HTTP client (to compare
	// transports); nil keeps the connector's default, as serve does.
	e2bHTTP *http.Client
}

func startInProcess(ctx context.Context, o inprocOptions) (*inprocGateway, error) {
	// The handler serve builds (logctx), so that what is measured is what runs.
	log := slog.New(logctx.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	db, err := store.Open(ctx, o.dsn)
	if err != nil {
		return nil, err
	}
	if _, err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	gw, err := app.New(ctx, app.Options{
		DB: db, Logger: log, RootKey: mcpgate.Secret(o.encryptionKey), JWTSecret: mcpgate.Secret(o.jwtSecret),
		PublicURL: "http://127.0.0.1", Signup: "open", E2BAPIURL: o.e2bURL, E2BDashboardURL: o.e2bURL,
		E2BHTTPClient: o.e2bHTTP, Version: "bench",
		// The benchmark measures the gateway, not its per-key limit.
		KeyRate: rate.Inf, KeyBurst: 1,
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	g := &inprocGateway{db: db, gw: gw}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.close()
		return nil, err
	}
	g.url = "http://" + ln.Addr().String()
	g.srv = &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

func (g *inprocGateway) close() {
	if g.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = g.srv.Shutdown(ctx)
		cancel()
	}
	g.gw.Close()
	g.db.Close()
}
