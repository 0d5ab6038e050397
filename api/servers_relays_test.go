package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgate/mcpgate"
)

// TestServers_APIRelaySettings: PATCH sets allow_sampling, allow_roots
// and elicitation_url_hosts, GET answers them with the hosts seen; a
// malformed host is a 400 naming it; a member reads them but cannot
// change them; another workspace can neither read nor change them.
func TestServers_APIRelaySettings(t *testing.T) {
	s := newServersServer(t)
	a := s.newClient(t)
	wsA := a.mustSignup("a@example.com").Workspaces[0].ID
	base := "/api/v1/workspaces/" + wsA + "/servers"
	var srv serverBody
	a.do("POST", base, map[string]any{"name": "docs", "url": s.up.URL}).wantStatus(t, http.StatusCreated).decode(t, &srv)
	if srv.AllowSampling || srv.AllowRoots || srv.ElicitationURLHosts == nil || len(srv.ElicitationURLHosts) != 0 {
		t.Fatalf("new server = %+v, want nothing allowed and hosts []", srv.Server)
	}
	a.do("PATCH", base+"/docs", map[string]any{"allow_sampling": true, "elicitation_url_hosts": []string{"Pay.Example.com", "*.auth.example.org"}}).
		wantStatus(t, http.StatusOK).decode(t, &srv)
	want := []string{"pay.example.com", "*.auth.example.org"}
	if !srv.AllowSampling || srv.AllowRoots || !cmp.Equal(srv.ElicitationURLHosts, want) {
		t.Errorf("PATCH answer = sampling %t, roots %t, hosts %q", srv.AllowSampling, srv.AllowRoots, srv.ElicitationURLHosts)
	}
	res := a.do("PATCH", base+"/docs", map[string]any{"elicitation_url_hosts": []string{"https://pay.example.com/x"}}).wantStatus(t, http.StatusBadRequest)
	if msg := res.message(t); !strings.Contains(msg, `"https://pay.example.com/x"`) {
		t.Errorf("malformed host message = %q, want it named", msg)
	}
	if err := s.db.RecordElicitationHost(context.Background(), wsA, "docs", "login.example.net:8443"); err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	a.do("GET", base+"/docs", nil).wantStatus(t, http.StatusOK).decode(t, &raw)
	seen, _ := raw["elicitation_hosts_seen"].([]any)
	if raw["allow_sampling"] != true || raw["allow_roots"] != false || len(seen) != 1 {
		t.Fatalf("GET = %v, want the settings and one host seen", raw)
	}
	if h, _ := seen[0].(map[string]any); h["host"] != "login.example.net:8443" || h["times"] != float64(1) || h["first_seen"] == nil || h["last_seen"] == nil {
		t.Errorf("host seen = %v", seen[0])
	}

	inv := a.mustInvite(wsA, "member@example.com", mcpgate.RoleMember)
	member := s.newClient(t)
	member.mustSignup("member@example.com")
	member.mustAccept(inv.Token)
	member.do("GET", base+"/docs", nil).wantStatus(t, http.StatusOK).decode(t, &srv)
	if !srv.AllowSampling || len(srv.ElicitationHostsSeen) != 1 {
		t.Errorf("a member reads %+v, want the settings", srv.Server)
	}
	member.do("PATCH", base+"/docs", map[string]any{"allow_roots": true}).wantStatus(t, http.StatusForbidden)

	b := s.newClient(t)
	b.mustSignup("b@example.com")
	if body := string(b.do("GET", base+"/docs", nil).wantStatus(t, http.StatusNotFound).Body); strings.Contains(body, "pay.example.com") {
		t.Errorf("another workspace's answer names a host: %s", body)
	}
	b.do("PATCH", base+"/docs", map[string]any{"allow_roots": true, "elicitation_url_hosts": []string{}}).wantStatus(t, http.StatusNotFound)
	a.do("GET", base+"/docs", nil).wantStatus(t, http.StatusOK).decode(t, &srv)
	if srv.AllowRoots || !cmp.Equal(srv.ElicitationURLHosts, want) {
		t.Errorf("after refused changes = roots %t, hosts %q; want off and %q", srv.AllowRoots, srv.ElicitationURLHosts, want)
	}
}
