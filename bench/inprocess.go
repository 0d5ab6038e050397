package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
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
)

// inprocGateway is the gateway wired as cmd/mcpgate's serve wires it, inside
// this process, so that pprof sees it. Keep it in step with
// cmd/mcpgate/serve.go (newGateway).
type inprocGateway struct {
	url    string
	srv    *http.Server
	db     *store.DB
	gw     *mcp.Gateway
	audit  *audit.Writer
	cancel context.CancelFunc
	done   chan struct{}
}

type inprocOptions struct {
	dsn, e2bURL, jwtSecret, encryptionKey string
	// e2bHTTP, when set, is the E2B client's HTTP client (to compare
	// transports); nil keeps the connector's default, as serve does.
	e2bHTTP *http.Client
	// cacheSealed keeps each workspace's sealed credential (never the
	// plaintext) in memory, dropped on the "conn" notification, so that a
	// call opens it without a database round trip: the change proposed for
	// serve, measured here.
	cacheSealed bool
}

func startInProcess(ctx context.Context, o inprocOptions) (*inprocGateway, error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := store.Open(ctx, o.dsn)
	if err != nil {
		return nil, err
	}
	if _, err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	rootKey, err := base64.StdEncoding.DecodeString(o.encryptionKey)
	if err != nil {
		return nil, err
	}
	keyring, err := vault.Open(ctx, rootKey, db.VaultKeys(), vault.Options{})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open vault: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	g := &inprocGateway{db: db, cancel: cancel, done: make(chan struct{})}
	g.audit = audit.New(audit.Options{Sink: db, Logger: log})
	m := metrics.New(metrics.Options{Version: "bench", AuditQueue: g.audit.Len, DBStats: db.Pool.Stat})
	be := backend{DB: db, keyring: keyring}
	if o.cacheSealed {
		be.sealed = &sealedCache{m: map[string]sealedRow{}}
	}
	registry := connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: o.e2bURL, DashboardURL: o.e2bURL, HTTPClient: o.e2bHTTP}))
	g.gw = mcp.New(mcp.Options{
		Registry: registry, Backend: be, Audit: g.audit, Logger: log, Metrics: m,
		PublicURL: "http://127.0.0.1", Version: "bench",
		ConfirmationSecret: derive(o.jwtSecret, "mcpgate confirmation tokens"),
		// The benchmark measures the gateway, not its per-key limit.
		KeyRate: rate.Inf, KeyBurst: 1,
	})
	a := api.New(api.Options{
		Store: db, Logger: log, PublicURL: "http://127.0.0.1", Signup: api.SignupOpen,
		JWTSecret: derive(o.jwtSecret, "mcpgate dashboard sessions"), Ready: db.Ready, Audit: g.audit,
		Gateway: g.gw, Keys: db, AuditLog: db, MCP: g.gw.Handler(), Metrics: m.Handler(),
	})
	listening := make(chan struct{})
	go func() {
		defer close(g.done)
		db.Listen(ctx, log, listening, func(inv store.Invalidation) {
			g.gw.Invalidate(inv.Kind, inv.WorkspaceID)
			if be.sealed != nil && (inv.Kind == store.InvalidateConn || inv.Kind == "") {
				be.sealed.drop(inv.WorkspaceID)
			}
		})
	}()
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.close()
		return nil, err
	}
	g.url = "http://" + ln.Addr().String()
	g.srv = &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

func (g *inprocGateway) close() {
	if g.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = g.srv.Shutdown(ctx)
		cancel()
	}
	g.cancel()
	<-g.done
	g.gw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	_ = g.audit.Close(ctx)
	cancel()
	g.db.Close()
}

func derive(secret, purpose string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// backend is cmd/mcpgate's: the store, with credentials sealed and opened
// by the keyring.
type backend struct {
	*store.DB
	keyring *vault.Keyring
	sealed  *sealedCache
}

func (b backend) OpenCredential(ctx context.Context, workspaceID, connector string) (mcpgate.Secret, error) {
	if b.sealed == nil {
		return b.DB.OpenCredential(ctx, b.keyring, workspaceID, connector)
	}
	row, ok := b.sealed.get(workspaceID, connector)
	if !ok {
		err := b.DB.Pool.QueryRow(ctx, `SELECT id, ciphertext FROM connections WHERE workspace_id = $1 AND connector = $2`,
			workspaceID, connector).Scan(&row.id, &row.ct)
		if err != nil {
			return b.DB.OpenCredential(ctx, b.keyring, workspaceID, connector) // maps the error as serve does
		}
		b.sealed.put(workspaceID, connector, row)
	}
	pt, err := b.keyring.OpenContext(ctx, row.ct, []byte("cred|v1|"+workspaceID+"|"+row.id))
	if err != nil {
		return "", fmt.Errorf("open credential: %w", err)
	}
	return mcpgate.Secret(pt), nil
}

// sealedCache holds sealed credentials by workspace and connector, for at
// most 30 s without a notification.
type sealedCache struct {
	mu sync.RWMutex
	m  map[string]sealedRow
}

type sealedRow struct {
	id      string
	ct      []byte
	fetched time.Time
}

func (c *sealedCache) get(ws, connector string) (sealedRow, bool) {
	c.mu.RLock()
	r, ok := c.m[ws+"|"+connector]
	c.mu.RUnlock()
	return r, ok && time.Since(r.fetched) < 30*time.Second
}

func (c *sealedCache) put(ws, connector string, r sealedRow) {
	r.fetched = time.Now()
	c.mu.Lock()
	c.m[ws+"|"+connector] = r
	c.mu.Unlock()
}

func (c *sealedCache) drop(ws string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if ws == "" || strings.HasPrefix(k, ws+"|") {
			delete(c.m, k)
		}
	}
}

func (b backend) PutConnection(ctx context.Context, c *mcpgate.Connection, credential mcpgate.Secret) error {
	return b.DB.PutConnection(ctx, b.keyring, c, credential)
}
