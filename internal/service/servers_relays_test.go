package service_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/upstream/upstreamtest"
)

// TestServers_RelaySettings: a new server relays neither sampling nor
// roots and allows no URL-mode host; an admin turns them on and sets the
// hosts (normalized), which the server's answer shows, the audit records
// and every replica is told of at commit; the cached view relays
// elicitation always and sampling and roots as set. A malformed host is
// refused naming it, nothing changed; a member may not change them, and
// another workspace cannot reach them.
func TestServers_RelaySettings(t *testing.T) {
	ctx := context.Background()
	e := newServersEnv(t, loopbackNetwork)
	up := upstreamtest.New(t, fixtureTools()...)
	_, a := e.NewUser(t, "a@example.com")
	_, b := e.NewUser(t, "b@example.com")
	srv := mustAddServer(t, e, a, "files", up.URL)
	if srv.AllowSampling || srv.AllowRoots || srv.ElicitationURLHosts == nil || len(srv.ElicitationURLHosts) != 0 {
		t.Fatalf("new server = sampling %t, roots %t, hosts %#v; want off, off, []", srv.AllowSampling, srv.AllowRoots, srv.ElicitationURLHosts)
	}
	row, _ := e.DB.FindServer(ctx, a.WorkspaceID, "files")
	if caps, hosts := service.RelaysOf(row); caps != (mcpgate.ClientCapabilities{ElicitationForm: true, ElicitationURL: true}) || len(hosts) != 0 {
		t.Errorf("a new server's cached relays = %+v, %q; want elicitation alone", caps, hosts)
	}

	ready, notified := make(chan struct{}), make(chan store.Invalidation, 8)
	listenCtx, stop := context.WithCancel(ctx)
	defer stop()
	go e.DB.Listen(listenCtx, slog.New(slog.DiscardHandler), ready, func(inv store.Invalidation) { notified <- inv }, nil)
	<-ready
	yes := true
	hosts := []string{" Pay.Example.com", "*.auth.example.org", "pay.example.com"}
	srv, err := e.svc.UpdateServer(ctx, a, "files", mcpgate.ServerUpdate{AllowSampling: &yes, AllowRoots: &yes, ElicitationURLHosts: &hosts})
	want := []string{"pay.example.com", "*.auth.example.org"}
	if err != nil || !srv.AllowSampling || !srv.AllowRoots || !cmp.Equal(srv.ElicitationURLHosts, want) {
		t.Fatalf("UpdateServer(relays) = %+v, %v; want both on and hosts %q", srv, err, want)
	}
	if inv := <-notified; inv.Kind != store.InvalidatePolicy || inv.WorkspaceID != a.WorkspaceID {
		t.Errorf("notification = %+v, want the policy of a's workspace", inv)
	}
	ev := e.Audit.Last()
	if ev.Action != string(mcpgate.ActionServerUpdated) || ev.Arguments["allow_sampling"] != true || ev.Arguments["allow_roots"] != true ||
		!cmp.Equal(ev.Arguments["elicitation_url_hosts"], want) {
		t.Errorf("audit = %s %v, want server.updated with the settings", ev.Action, ev.Arguments)
	}
	row, _ = e.DB.FindServer(ctx, a.WorkspaceID, "files")
	caps, cached := service.RelaysOf(row)
	if caps != (mcpgate.ClientCapabilities{Sampling: true, SamplingTools: true, Roots: true, ElicitationForm: true, ElicitationURL: true}) ||
		!cmp.Equal(cached, want) {
		t.Errorf("cached relays = %+v, %q; want everything and %q", caps, cached, want)
	}

	no := false
	if srv, err = e.svc.UpdateServer(ctx, a, "files", mcpgate.ServerUpdate{AllowRoots: &no}); err != nil || !srv.AllowSampling || srv.AllowRoots {
		t.Errorf("UpdateServer(allow_roots false) = %+v, %v; want sampling kept, roots off", srv, err)
	}
	if _, ok := e.Audit.Last().Arguments["allow_sampling"]; ok {
		t.Errorf("audit of a roots change names sampling: %v", e.Audit.Last().Arguments)
	}
	bad := []string{"ok.example.com", "https://evil.example/path"}
	_, err = e.svc.UpdateServer(ctx, a, "files", mcpgate.ServerUpdate{ElicitationURLHosts: &bad, AllowRoots: &yes})
	if mcpgate.ErrorCode(err) != mcpgate.EInvalid || !strings.Contains(mcpgate.ErrorMessage(err), `"https://evil.example/path"`) {
		t.Errorf("UpdateServer(malformed host) err = %v, want invalid naming it", err)
	}
	member := *a
	member.Role = mcpgate.RoleMember
	if _, err := e.svc.UpdateServer(ctx, &member, "files", mcpgate.ServerUpdate{AllowRoots: &yes}); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("UpdateServer() as a member err = %v, want forbidden", err)
	}
	if _, err := e.svc.UpdateServer(ctx, b, "files", mcpgate.ServerUpdate{AllowRoots: &yes}); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("UpdateServer() as another workspace err = %v, want not_found", err)
	}
	if srv, _ := e.svc.Server(ctx, a, "files"); srv.AllowRoots || !cmp.Equal(srv.ElicitationURLHosts, want) {
		t.Errorf("after refused changes = roots %t, hosts %q; want off and %q", srv.AllowRoots, srv.ElicitationURLHosts, want)
	}
}

// TestTools_RecordElicitationHost: the hosts the call path records are on
// the server's page for everyone in its workspace, counted; an empty host
// or an unknown server records nothing and fails no one.
func TestTools_RecordElicitationHost(t *testing.T) {
	ctx := context.Background()
	e := newServersEnv(t, loopbackNetwork)
	up := upstreamtest.New(t, fixtureTools()...)
	_, a := e.NewUser(t, "a@example.com")
	_, b := e.NewUser(t, "b@example.com")
	mustAddServer(t, e, a, "files", up.URL)
	mustAddServer(t, e, b, "files", up.URL)
	tools := e.Service.Tools
	host, _ := mcpgate.ElicitationHostAllowed(nil, "https://Pay.Example.com/checkout")
	tools.RecordElicitationHost(ctx, a.WorkspaceID, "files", host)
	tools.RecordElicitationHost(ctx, a.WorkspaceID, "files", host)
	tools.RecordElicitationHost(ctx, a.WorkspaceID, "files", "")
	tools.RecordElicitationHost(ctx, a.WorkspaceID, "nope", host)
	member := *a
	member.Role = mcpgate.RoleMember
	srv, err := e.svc.Server(ctx, &member, "files")
	if err != nil || len(srv.ElicitationHostsSeen) != 1 || srv.ElicitationHostsSeen[0].Host != "pay.example.com" || srv.ElicitationHostsSeen[0].Times != 2 {
		t.Fatalf("Server().ElicitationHostsSeen = %+v, %v; want pay.example.com twice", srv.ElicitationHostsSeen, err)
	}
	if srv, _ := e.svc.Server(ctx, b, "files"); len(srv.ElicitationHostsSeen) != 0 {
		t.Errorf("another workspace's server of the same name sees %+v", srv.ElicitationHostsSeen)
	}
	if list, _ := e.svc.Servers(ctx, a); len(list) != 1 || list[0].ElicitationHostsSeen != nil {
		t.Errorf("the list carries the hosts seen: %+v", list)
	}
}
