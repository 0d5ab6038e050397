package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// dbProxy stands between the services and PostgreSQL, so that a test can
// take the database away (every connection cut, new ones refused) and give
// it back, as an outage or a partition would.
type dbProxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	down     bool
	conns    []net.Conn
}

func newDBProxy(t *testing.T, dsn string) (*dbProxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dbProxy{ln: ln, upstream: u.Host}
	t.Cleanup(func() { _ = ln.Close(); p.setDown(true) })
	go p.serve()
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *dbProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		if !down {
			p.conns = append(p.conns, c)
		}
		p.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		go func() {
			up, err := net.Dial("tcp", p.upstream)
			if err != nil {
				_ = c.Close()
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			_, _ = io.Copy(c, up)
			_ = c.Close()
		}()
	}
}

func (p *dbProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.conns = nil
	}
}

// TestOutage: while the database cannot be reached, keys, policies and
// credentials known before keep calls working, up to the grace; what was
// never cached is refused as unavailable (never as a bad key); once the
// database answers, a revoke made meanwhile elsewhere is honoured at once,
// even before the listener is back.
func TestOutage(t *testing.T) {
	dsn := storetest.NewDatabase(t)
	proxy, viaProxy := newDBProxy(t, dsn)
	ctx := context.Background()
	db, err := store.Open(ctx, viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	clock := e2bsim.NewManualClock(time.Now())
	conn := newNoteConnector()
	env := servicetest.New(t, service.Options{DB: db, Registry: connectors.NewRegistry(conn), Now: clock.Now,
		OutageGrace: 10 * time.Minute})
	svc := env.Service
	_, owner := env.NewUser(t, "owner@example.com")
	if _, err := svc.Connections.PutConnection(ctx, owner, "notes", "notes-credential"); err != nil {
		t.Fatal(err)
	}
	_, used, err := svc.Keys.CreateKey(ctx, owner, mcpgate.NewKey{Name: "used"})
	if err != nil {
		t.Fatal(err)
	}
	_, unused, err := svc.Keys.CreateKey(ctx, owner, mcpgate.NewKey{Name: "never used"})
	if err != nil {
		t.Fatal(err)
	}
	keys := auth.NewKeys(auth.KeysOptions{Store: db, Trust: svc.CacheTrust(), Now: clock.Now})
	defer keys.Close()
	call := func(key string) error {
		a, err := keys.Authenticate(ctx, bearer(key))
		if err != nil {
			return err
		}
		_, err = svc.Tools.CallTool(ctx, a, mcpgate.ToolCall{Tool: "notes_add", Arguments: json.RawMessage(`{"text":"x"}`)})
		return err
	}
	if err := call(used); err != nil {
		t.Fatalf("call before the outage: %v", err)
	}

	// The outage: the listener is lost with the database.
	svc.SetListening(false)
	proxy.setDown(true)
	clock.Advance(time.Minute) // past every TTL
	if err := call(used); err != nil {
		t.Fatalf("call during the outage with a cached key, policy and credential: %v", err)
	}
	var ae *mcpgate.AuthError
	if err := call(unused); err == nil || errors.As(err, &ae) {
		t.Fatalf("a key never cached during the outage = %v; want an unavailable error, not a refusal", err)
	}
	clock.Advance(10 * time.Minute) // past the grace
	if err := call(used); mcpgate.ErrorCode(err) != mcpgate.EUnavailable {
		t.Fatalf("call past the grace = %v, want unavailable", err)
	}

	// The database answers again; meanwhile another replica revoked the key.
	proxy.setDown(false)
	other := servicetest.New(t, service.Options{DB: env.DB, Keyring: env.Keyring, Registry: connectors.NewRegistry(conn)})
	ks, err := other.Service.Keys.Keys(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		if err := other.Service.Keys.RevokeKey(ctx, owner, k.ID); err != nil {
			t.Fatal(err)
		}
	}
	// The listener is not back yet: nothing cached is trusted, so the
	// revoke holds at once.
	if _, err := keys.Authenticate(ctx, bearer(used)); !errors.As(err, &ae) || ae.Reason != "revoked" {
		t.Fatalf("revoked key before the listener is back = %v, want refused as revoked", err)
	}
}

// TestListenerDown_RevokeHoldsAtOnce: while the invalidation listener is
// away (the database still answering), a key revoked on another replica is
// refused on the very next call, although its cache entry is within the
// TTL: nothing cached is trusted while notifications may be missed.
func TestListenerDown_RevokeHoldsAtOnce(t *testing.T) {
	ctx := context.Background()
	env := servicetest.New(t, service.Options{Registry: connectors.NewRegistry(newNoteConnector())})
	_, owner := env.NewUser(t, "owner@example.com")
	k, secret, err := env.Service.Keys.CreateKey(ctx, owner, mcpgate.NewKey{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	keys := auth.NewKeys(auth.KeysOptions{Store: env.DB, Trust: env.Service.CacheTrust()})
	defer keys.Close()
	if _, err := keys.Authenticate(ctx, bearer(secret)); err != nil {
		t.Fatal(err)
	}
	other := servicetest.New(t, service.Options{DB: env.DB, Keyring: env.Keyring, Registry: connectors.NewRegistry(newNoteConnector())})
	if err := other.Service.Keys.RevokeKey(ctx, owner, k.ID); err != nil {
		t.Fatal(err)
	}
	// With the listener up, the notification would have dropped the entry;
	// it is not delivered here, so the cached key still passes...
	if a, err := keys.Authenticate(ctx, bearer(secret)); err != nil || a == nil {
		t.Fatalf("cached key with the listener up = %v, %v; want the TTL to hold (the test's premise)", a, err)
	}
	// ...and with the listener down, it does not.
	env.Service.SetListening(false)
	var ae *mcpgate.AuthError
	if _, err := keys.Authenticate(ctx, bearer(secret)); !errors.As(err, &ae) || ae.Reason != "revoked" {
		t.Fatalf("revoked key while the listener is down = %v, want refused as revoked", err)
	}
}

type awaySink struct{}

func (awaySink) InsertAudit(context.Context, []mcpgate.AuditEvent) error {
	return errors.New("database away")
}

// TestCall_FailsClosedOnAFullAuditQueue: with the real audit writer and a
// small queue, once the database has been away long enough for the queue to
// fill, tool calls are refused before they run (nothing unaudited happens),
// with a message asking to try again.
func TestCall_FailsClosedOnAFullAuditQueue(t *testing.T) {
	w := audit.New(audit.Options{Sink: awaySink{}, QueueSize: 10, BatchSize: 1, FlushEvery: time.Hour})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = w.Close(ctx)
	}()
	conn := newNoteConnector()
	env := servicetest.New(t, service.Options{Registry: connectors.NewRegistry(conn), Audit: w})
	_, owner := env.NewUser(t, "owner@example.com")
	if _, err := env.Service.Connections.PutConnection(context.Background(), owner, "notes", "notes-credential"); err != nil {
		t.Fatal(err)
	}
	var refused error
	for i := 0; i < 30 && refused == nil; i++ {
		_, err := env.Service.Tools.CallTool(context.Background(), owner, mcpgate.ToolCall{Tool: "notes_add", Arguments: json.RawMessage(`{"text":"x"}`)})
		if mcpgate.ErrorCode(err) == mcpgate.EUnavailable {
			refused = err
		}
	}
	if refused == nil || !strings.Contains(mcpgate.ErrorMessage(refused), "try again") {
		t.Fatalf("calls with a full audit queue were never refused (last: %v)", refused)
	}
	before := len(conn.notes)
	if _, err := env.Service.Tools.CallTool(context.Background(), owner, mcpgate.ToolCall{Tool: "notes_add", Arguments: json.RawMessage(`{"text":"y"}`)}); mcpgate.ErrorCode(err) != mcpgate.EUnavailable || len(conn.notes) != before {
		t.Fatalf("a call with the queue still full = %v (notes %d -> %d), want refused before it ran", err, before, len(conn.notes))
	}
}
