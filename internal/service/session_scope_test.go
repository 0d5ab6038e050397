package service_test

import (
	"context"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/upstream"
	"github.com/mcpgate/mcpgate/internal/upstream/upstreamtest"
)

// TestServers_SessionScope: an admin sets a server's session scope, which
// the server's answers show and its endpoint follows; an unknown scope is
// refused, and another workspace cannot set it.
func TestServers_SessionScope(t *testing.T) {
	ctx := context.Background()
	e := newServersEnv(t, loopbackNetwork)
	up := upstreamtest.New(t, fixtureTools()...)
	_, a := e.NewUser(t, "a@example.com")
	_, b := e.NewUser(t, "b@example.com")
	if srv := mustAddServer(t, e, a, "files", up.URL); srv.SessionScope != mcpgate.ScopePerson {
		t.Fatalf("new server's scope = %q, want person", srv.SessionScope)
	}
	client := mcpgate.ScopeClient
	srv, err := e.svc.UpdateServer(ctx, a, "files", mcpgate.ServerUpdate{SessionScope: &client})
	if err != nil || srv.SessionScope != mcpgate.ScopeClient {
		t.Fatalf("UpdateServer(session_scope) = %+v, %v; want client", srv, err)
	}
	bad := mcpgate.SessionScope("everyone")
	if _, err := e.svc.UpdateServer(ctx, a, "files", mcpgate.ServerUpdate{SessionScope: &bad}); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Errorf("UpdateServer(unknown scope) err = %v, want invalid", err)
	}
	person := mcpgate.ScopePerson
	if _, err := e.svc.UpdateServer(ctx, b, "files", mcpgate.ServerUpdate{SessionScope: &person}); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("UpdateServer() as another workspace err = %v, want not_found", err)
	}
	eps := service.NewEndpoints(e.svc, everyToolCallable{}, nil)
	if ep, err := eps.ServerEndpoint(ctx, a, "files"); err != nil || !ep.ClientSessions {
		t.Errorf("ServerEndpoint() = %+v, %v; want client sessions", ep, err)
	}
	// A client session's requests share its one upstream session.
	if n := (service.UpstreamKey{ClientSession: "x"}).SessionBound(); n != 1 {
		t.Errorf("a client session's bound = %d, want 1", n)
	}
	if n := (service.UpstreamKey{UserID: "u"}).SessionBound(); n != 0 {
		t.Errorf("a person's bound = %d, want the pool's (0)", n)
	}
}

// TestEndpoints_ClientSessionsOwnUpstreamSessions: requests of two client
// sessions of one person go on two upstream sessions, each client's again
// on its own, a request outside one on the person's; ending a client
// session closes its upstream session, and the client's next request
// opens a new one.
func TestEndpoints_ClientSessionsOwnUpstreamSessions(t *testing.T) {
	ctx := context.Background()
	env := newServersEnv(t, loopbackNetwork)
	up := upstreamtest.New(t, fixtureTools()...)
	_, a := env.NewUser(t, "a@example.com")
	mustAddServer(t, env, a, "files", up.URL)
	eps := service.NewEndpoints(env.svc, everyToolCallable{}, nil)
	// The upstream session of the last request sent.
	relay := func(client string) string {
		t.Helper()
		c := ctx
		if client != "" {
			c = mcpgate.NewContextWithClientSession(ctx, mcpgate.ClientSession{Server: "files", ID: client})
		}
		n := len(up.Received())
		if _, err := eps.RelayToServer(c, a, "files", upstream.MethodPromptsList, nil); err != nil && mcpgate.ErrorCode(err) == mcpgate.EUnavailable {
			t.Fatalf("RelayToServer() err = %v", err)
		}
		sid := ""
		for _, h := range up.Received()[n:] {
			if v := h.Get("Mcp-Session-Id"); v != "" {
				sid = v
			}
		}
		if sid == "" {
			t.Fatal("the relay carried no upstream session")
		}
		return sid
	}
	x, y := relay("x"), relay("y")
	if x == y {
		t.Fatalf("two client sessions shared upstream session %q", x)
	}
	if again := relay("x"); again != x {
		t.Errorf("client x's second request on %q, want its own %q", again, x)
	}
	if p := relay(""); p == x || p == y {
		t.Errorf("a request outside a client session went on a client's upstream session %q", p)
	}
	if err := eps.EndClientSession(ctx, a, "files", "x"); err != nil {
		t.Fatal(err)
	}
	if next := relay("x"); next == x || next == y {
		t.Errorf("client x's request after its session ended went on %q, want a new upstream session", next)
	}
}
