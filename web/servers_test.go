package web

import (
	"context"
	"encoding/json"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
)

// fakeServers is a workspace's servers as the service would answer them.
type fakeServers struct {
	mcpgate.ServerService // any other method panics: the pages only read
	servers               []mcpgate.Server
}

func (f *fakeServers) Servers(context.Context, *mcpgate.Actor) ([]mcpgate.Server, error) {
	return f.servers, nil
}

func (f *fakeServers) Server(_ context.Context, _ *mcpgate.Actor, name string) (*mcpgate.Server, error) {
	for i := range f.servers {
		if f.servers[i].Name == name {
			return &f.servers[i], nil
		}
	}
	return nil, mcpgate.Errorf(mcpgate.ENotFound, "no upstream server of that name in this workspace")
}

func newFakeServers() *fakeServers {
	yes, no := true, false
	at := testNow.Add(-time.Hour)
	return &fakeServers{servers: []mcpgate.Server{{
		Name: "docs", URL: "https://mcp.example.com/mcp", Enabled: true, Health: mcpgate.HealthOK, LastDiscoveredAt: &at,
		ProtocolVersion: "2025-11-25", ServerInfo: mcpgate.ServerInfo{Name: "Docs", Version: "1.0"},
		Headers:   []mcpgate.HeaderHint{{Name: "Authorization", Hint: "…9f3c"}},
		ToolCount: 3, EnabledTools: 1, Quarantined: 1, NameProblems: 1,
		Tools: []mcpgate.ServerTool{
			{Name: "search", ExposedName: "docs_search", Enabled: true, Approval: mcpgate.ApprovalNone, Pinned: true, Listed: true,
				Annotations: mcpgate.ToolHints{ReadOnly: &yes}, Definition: json.RawMessage(`{"name":"search"}`)},
			{Name: "remove", ExposedName: "docs_remove", Enabled: true, Approval: mcpgate.ApprovalHuman, Pinned: true, Quarantined: true, Listed: true,
				Annotations: mcpgate.ToolHints{Destructive: &yes}, Definition: json.RawMessage(`{"name":"remove","description":"removes"}`),
				Change: &mcpgate.ToolChange{Pin: "v1:5eed", Fields: []string{"description", "annotations"}, Definition: json.RawMessage(`{"name":"remove","description":"removes <b>all</b>"}`),
					Loosened: []mcpgate.HintLoosened{{Hint: "destructiveHint", Before: &yes, After: &no}}}},
			{Name: strings.Repeat("x", 50), Listed: true, NameProblem: "is longer than 48 characters", Approval: mcpgate.ApprovalHuman,
				Definition: json.RawMessage(`{"name":"x"}`)},
		},
		ElicitationURLHosts: []string{"pay.example.com", "*.auth.example.org"},
		ElicitationHostsSeen: []mcpgate.ElicitationHost{
			{Host: "sso.auth.example.org", FirstSeen: at, LastSeen: at, Times: 2},
			{Host: "evil.example:8443", FirstSeen: at, LastSeen: testNow, Times: 7},
		},
	}, {Name: "down", URL: "https://down.example.com/mcp", Enabled: false, Health: mcpgate.HealthError, LastError: "the server cannot be reached"}}}
}

func mustServersHandler(t *testing.T, role mcpgate.Role) http.Handler {
	t.Helper()
	h, err := newHandler(Options{Services: newFake(role).services(), Servers: newFakeServers(),
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), PublicURL: "https://gw.example.com/", Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatalf("newHandler() err = %v", err)
	}
	return h
}

func TestServersPages_Admin(t *testing.T) {
	h := mustServersHandler(t, mcpgate.RoleOwner)
	res, body := get(t, h, "/app/w/ws1/servers", testUser)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("servers page = %d", res.StatusCode)
	}
	for _, want := range []string{`href="/app/w/ws1/servers/docs"`, "https://mcp.example.com/mcp", "1 of 3 on", "1 to review",
		`<span class="pill pill-paused">disabled</span>`, "the server cannot be reached", `data-api-path="/api/v1/workspaces/ws1/servers"`,
		`data-pairs="headers"`, `aria-current="page">`} {
		if !strings.Contains(body, want) {
			t.Errorf("servers page lacks %q", want)
		}
	}
	res, body = get(t, h, "/app/w/ws1/servers/docs", testUser)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("server page = %d", res.StatusCode)
	}
	for _, want := range []string{
		`data-api-path="/api/v1/workspaces/ws1/servers/docs/discover"`,
		`data-api-path="/api/v1/workspaces/ws1/servers/docs/tools/remove/approve"`,
		`<input type="hidden" name="expected_pin" value="v1:5eed">`,
		`data-api-path="/api/v1/workspaces/ws1/servers/docs/tools/search"`,
		"removes &lt;b&gt;all&lt;/b&gt;", "description, annotations", "<code>destructiveHint</code> hint now claims less risk",
		`placeholder="unchanged (…9f3c)"`, "No name: is longer than 48 characters", `data-pairs="aliases"`,
		`<span class="tag">readOnly: true</span>`, "Docs 1.0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("server page lacks %q", want)
		}
	}
	if res, _ := get(t, h, "/app/w/ws1/servers/nope", testUser); res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown server page = %d, want 404", res.StatusCode)
	}
}

func TestServersPages_MemberReadsOnly(t *testing.T) {
	h := mustServersHandler(t, mcpgate.RoleMember)
	for _, path := range []string{"/app/w/ws1/servers", "/app/w/ws1/servers/docs"} {
		res, body := get(t, h, path, testUser)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s = %d", path, res.StatusCode)
		}
		if strings.Contains(body, "data-api-path=\"/api/v1/workspaces/ws1/servers") {
			t.Errorf("%s offers a member a change", path)
		}
	}
}

// Without a server service the pages and the navigation entry are absent.
func TestServersPages_AbsentWithoutService(t *testing.T) {
	h := mustHandler(t, newFake(mcpgate.RoleOwner))
	if res, _ := get(t, h, "/app/w/ws1/servers", testUser); res.StatusCode != http.StatusNotFound {
		t.Errorf("servers page without the service = %d, want 404", res.StatusCode)
	}
	if _, body := get(t, h, "/app/w/ws1", testUser); strings.Contains(body, "/servers") {
		t.Errorf("navigation links to servers without the service")
	}
}

// An upstream chooses its tool names, and the server page puts them into
// the paths the dashboard's script fetches: each is escaped as one path
// segment, so that a name with "../" segments (and a "#" to cut the rest)
// cannot send the admin's click, with the admin's session and CSRF token,
// to another API route of the workspace (here E2B's e2b_kill_sandbox).
// The service refuses such names; this holds for rows stored before.
func TestServerPage_ToolNameStaysInItsPath(t *testing.T) {
	fake := newFakeServers()
	for _, evil := range []string{"../../../tools/e2b_kill_sandbox#", "..", "."} {
		fake.servers[0].Tools = append(fake.servers[0].Tools, mcpgate.ServerTool{
			Name: evil, Title: "Search the docs", Listed: true, Approval: mcpgate.ApprovalNone, Quarantined: true,
			Definition: json.RawMessage(`{"name":"x"}`), Change: &mcpgate.ToolChange{Fields: []string{"description"}, Definition: json.RawMessage(`{"name":"x"}`)}})
	}
	h, err := newHandler(Options{Services: newFake(mcpgate.RoleOwner).services(), Servers: fake,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), PublicURL: "https://gw.example.com/", Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatalf("newHandler() err = %v", err)
	}
	res, body := get(t, h, "/app/w/ws1/servers/docs", testUser)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("server page = %d", res.StatusCode)
	}
	base, _ := url.Parse("https://gw.example.com/app/w/ws1/servers/docs")
	want := "/api/v1/workspaces/ws1/servers/docs/tools/"
	for _, m := range regexp.MustCompile(`data-api-path="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		raw := html.UnescapeString(m[1])
		if !strings.Contains(raw, "/tools/") {
			continue
		}
		u, err := base.Parse(raw)
		if err != nil {
			continue
		}
		// What fetch() requests: dot segments resolved, the fragment dropped.
		if !strings.HasPrefix(u.Path, want) || strings.HasSuffix(u.Path, "/tools/") || strings.HasSuffix(u.Path, "/tools/.") {
			t.Errorf("a tool form of server docs posts to %s (from %q), outside %s", u.Path, raw, want)
		}
	}
}

// The server page's "Requests to the client": an admin gets the sampling
// and roots switches (off), the allow-list in a textarea, and an "Allow"
// for a host seen that the list does not cover, which sends the list with
// it; a member reads the same settings with no form.
func TestServerPage_Relays(t *testing.T) {
	_, body := get(t, mustServersHandler(t, mcpgate.RoleOwner), "/app/w/ws1/servers/docs", testUser)
	for _, want := range []string{`id="server-relays"`, "Allow sampling (the server may ask the person’s AI client to run a model prompt)",
		"Allow roots (the server may read the client’s root folders)", "deprecated in the 2026-07-28",
		`name="allow_sampling" id="allow-sampling">`, `name="allow_roots" id="allow-roots">`,
		"pay.example.com\n*.auth.example.org</textarea>",
		`<input type="hidden" name="elicitation_url_hosts" data-type="list" value="pay.example.com *.auth.example.org evil.example:8443">`,
		`aria-label="Allow evil.example:8443"`} {
		if !strings.Contains(body, want) {
			t.Errorf("admin's server page lacks %q", want)
		}
	}
	// sso.auth.example.org is covered by the wildcard: no button for it.
	if strings.Contains(body, `aria-label="Allow sso.auth.example.org"`) {
		t.Error("an allowed host has an Allow button")
	}
	_, body = get(t, mustServersHandler(t, mcpgate.RoleMember), "/app/w/ws1/servers/docs", testUser)
	for _, want := range []string{`id="server-relays"`, `data-testid="allow-sampling">not allowed`, "<code>pay.example.com</code>",
		"evil.example:8443", `<span class="pill pill-ok">allowed</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("member's server page lacks %q", want)
		}
	}
	for _, no := range []string{`name="allow_sampling"`, `name="elicitation_url_hosts"`, "<textarea"} {
		if strings.Contains(body, no) {
			t.Errorf("member's server page offers %q", no)
		}
	}
}
