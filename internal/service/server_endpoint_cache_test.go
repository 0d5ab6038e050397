package service_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/upstream"
	"github.com/mcpgate/mcpgate/internal/upstream/upstreamtest"
)

// replicaOn builds one replica's server and endpoint services on db.
func replicaOn(t *testing.T, db *store.DB, opts service.Options, callable ...string) (*servicetest.Env, *service.Servers, *service.Endpoints) {
	t.Helper()
	opts.DB = db
	env := servicetest.New(t, opts)
	pool := upstream.New[service.UpstreamKey](upstream.Options{Network: loopbackNetwork, ConnectTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = pool.Close() })
	svc := service.NewServers(service.ServersOptions{DB: db, Keyring: env.Keyring, Audit: env.Audit, Pool: pool,
		Network: loopbackNetwork, PublicURL: "http://localhost:8080"})
	return env, svc, service.NewEndpoints(svc, everyToolCallable{names: callable}, env.Service.CacheTrust())
}

// relayReached reports whether a relayed request reached the upstream:
// its answer, or its own JSON-RPC error (upstreamtest has no prompts).
func relayReached(err error) bool {
	var rpcErr *mcpgate.UpstreamRPCError
	return err == nil || errors.As(err, &rpcErr)
}

// TestEndpoints_CachedReads: once a server has been read, its endpoint
// and relays are served without the database: with the database taken
// away (and no outage grace, so that nothing stale may stand in), N more
// requests of each kind still work, and the relays still carry the
// workspace's credential.
func TestEndpoints_CachedReads(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.NewDatabase(t)
	proxy, viaProxy := newDBProxy(t, dsn)
	db, err := store.Open(ctx, viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	env, svc, eps := replicaOn(t, db, service.Options{OutageGrace: -1}, "files_read")
	up := upstreamtest.New(t, fixtureTools()...)
	_, a := env.NewUser(t, "a@example.com")
	if _, err := svc.AddServer(ctx, a, mcpgate.ServerInput{Name: "files", URL: up.URL,
		Headers: map[string]mcpgate.Secret{"authorization": upstreamSecret}}); err != nil {
		t.Fatal(err)
	}
	if _, err := eps.ServerEndpoint(ctx, a, "files"); err != nil {
		t.Fatal(err)
	}
	if _, err := eps.RelayToServer(ctx, a, "files", "prompts/list", nil); !relayReached(err) {
		t.Fatal(err)
	}
	proxy.setDown(true)
	defer proxy.setDown(false)
	const n = 5
	for i := range n {
		ep, err := eps.ServerEndpoint(ctx, a, "files")
		if err != nil || len(ep.Tools) != 1 {
			t.Fatalf("request %d without the database: ServerEndpoint() = %+v, %v, want the cached server", i, ep, err)
		}
		before := len(up.Received())
		if _, err := eps.RelayToServer(ctx, a, "files", "prompts/list", nil); !relayReached(err) {
			t.Fatalf("relay %d without the database: %v, want the cached server and credential", i, err)
		}
		got := up.Received()
		if len(got) == before || got[len(got)-1].Get("Authorization") != upstreamSecret {
			t.Fatalf("relay %d reached the upstream %d times, last with the credential %v", i, len(got)-before,
				len(got) > 0 && got[len(got)-1].Get("Authorization") == upstreamSecret)
		}
	}
	// What was never read is not made up: another name needs the database.
	if _, err := eps.ServerEndpoint(ctx, a, "other"); mcpgate.ErrorCode(err) == mcpgate.ENotFound || err == nil {
		t.Errorf("an uncached server without the database: err = %v, want the database's failure", err)
	}
}

// TestEndpoints_CacheAcrossReplicas: a change made on another replica
// (another service set on the same database) is served by this one once
// its notification has arrived, and not before; a server turned off on
// this replica is gone at once; one workspace's cached server is never
// another's.
func TestEndpoints_CacheAcrossReplicas(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := storetest.Open(t)
	env, svc, eps := replicaOn(t, db, service.Options{}, "files_read", "files_write")
	_, other, _ := replicaOn(t, db, service.Options{Keyring: env.Keyring})
	up := upstreamtest.New(t, fixtureTools()...)
	_, a := env.NewUser(t, "a@example.com")
	_, b := env.NewUser(t, "b@example.com")
	for _, who := range []*mcpgate.Actor{a, b} {
		if _, err := svc.AddServer(ctx, who, mcpgate.ServerInput{Name: "files", URL: up.URL}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(who *mcpgate.Actor) []string {
		t.Helper()
		ep, err := eps.ServerEndpoint(ctx, who, "files")
		if err != nil {
			t.Fatalf("ServerEndpoint() err = %v", err)
		}
		var out []string
		for _, tool := range ep.Tools {
			out = append(out, tool.Name)
		}
		return out
	}
	if got := names(a); !slices.Equal(got, []string{"read"}) {
		t.Fatalf("tools = %v, want read", got)
	}
	// This replica's listener, held at each notification until released.
	gate, applied := make(chan struct{}), make(chan store.Invalidation, 8)
	ready := make(chan struct{})
	go db.Listen(ctx, slog.New(slog.DiscardHandler), ready, func(inv store.Invalidation) {
		if inv.Kind != store.InvalidatePolicy {
			return
		}
		<-gate
		eps.Invalidate(inv.Kind, inv.WorkspaceID)
		applied <- inv
	}, nil)
	<-ready
	on := true
	if _, err := other.SetServerTool(ctx, a, "files", "write", mcpgate.ToolUpdate{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	if got := names(a); !slices.Equal(got, []string{"read"}) {
		t.Errorf("before the notification: tools = %v, want the cached read alone", got)
	}
	close(gate)
	if inv := <-applied; inv.WorkspaceID != a.WorkspaceID {
		t.Fatalf("notification for workspace %q, want a's", inv.WorkspaceID)
	}
	if got := names(a); !slices.Equal(got, []string{"read", "write"}) {
		t.Errorf("after the notification: tools = %v, want read and write", got)
	}
	// b's server of the same name is its own: write stayed off there.
	if got := names(b); !slices.Equal(got, []string{"read"}) {
		t.Errorf("another workspace's server: tools = %v, want its own read alone", got)
	}
	off := false
	if _, err := svc.UpdateServer(ctx, a, "files", mcpgate.ServerUpdate{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	if _, err := eps.ServerEndpoint(ctx, a, "files"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("a server turned off here: err = %v, want not_found at once", err)
	}
	if _, err := eps.RelayToServer(ctx, a, "files", "prompts/list", nil); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("a relay to a server turned off here: err = %v, want not_found at once", err)
	}
	if got := names(b); !slices.Equal(got, []string{"read"}) {
		t.Errorf("b's server after a's was turned off: tools = %v, want read", got)
	}
}

// TestEndpoints_NoCredentialNoQuery: a server that takes no credential at
// all, behind the OAuth credential hook as serve wires it, is relayed from
// its cached row alone: the row says it does not sign in with OAuth, so no
// grant is looked up (that lookup cost a query per call, and failed with
// the database away).
func TestEndpoints_NoCredentialNoQuery(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.NewDatabase(t)
	proxy, viaProxy := newDBProxy(t, dsn)
	db, err := store.Open(ctx, viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	env := servicetest.New(t, service.Options{DB: db, OutageGrace: -1})
	pool := upstream.New[service.UpstreamKey](upstream.Options{Network: loopbackNetwork, ConnectTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = pool.Close() })
	creds := service.NewUpstreamCredentials(service.UpstreamCredentialsOptions{DB: db, Keyring: env.Keyring, Audit: env.Audit,
		Network: loopbackNetwork, PublicURL: "http://localhost:8080"})
	svc := service.NewServers(service.ServersOptions{DB: db, Keyring: env.Keyring, Audit: env.Audit, Pool: pool,
		Network: loopbackNetwork, PublicURL: "http://localhost:8080", Credentials: creds})
	eps := service.NewEndpoints(svc, everyToolCallable{names: []string{"files_read"}}, env.Service.CacheTrust())
	up := upstreamtest.New(t, fixtureTools()...)
	_, a := env.NewUser(t, "a@example.com")
	if _, err := svc.AddServer(ctx, a, mcpgate.ServerInput{Name: "files", URL: up.URL}); err != nil {
		t.Fatal(err)
	}
	if _, err := eps.RelayToServer(ctx, a, "files", "prompts/list", nil); !relayReached(err) {
		t.Fatal(err)
	}
	proxy.setDown(true)
	defer proxy.setDown(false)
	for i := range 3 {
		if _, err := eps.RelayToServer(ctx, a, "files", "prompts/list", nil); !relayReached(err) {
			t.Fatalf("relay %d without the database: %v, want the cached server alone", i, err)
		}
	}
}
