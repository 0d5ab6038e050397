package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
)

func (f *fakeData) Grants(_ context.Context, a *mcpgate.Actor) ([]mcpgate.Grant, error) {
	var out []mcpgate.Grant
	for _, g := range f.grants {
		if g.WorkspaceID == a.WorkspaceID && (a.CanAdmin() || g.UserID == a.UserID) {
			out = append(out, g)
		}
	}
	return out, nil
}

func (f *fakeData) RevokeGrant(context.Context, *mcpgate.Actor, string) error { return nil }

// The Keys page lists connected apps with a Revoke form on the grants API,
// the person column for admins only, and names self-registered clients.
func TestKeys_ConnectedApps(t *testing.T) {
	for _, role := range []mcpgate.Role{mcpgate.RoleOwner, mcpgate.RoleMember} {
		f := newFake(role)
		f.grants = []mcpgate.Grant{{ID: "g-1", WorkspaceID: "ws1", UserID: testUser.ID, UserEmail: "someone@example.com",
			ClientName: "<b>Claude</b>", ClientKind: mcpgate.ClientDCR, Scope: mcpgate.ScopeReadOnly, CreatedAt: testNow}}
		_, body := get(t, mustHandler(t, f), "/app/w/ws1/keys", testUser)
		for _, want := range []string{`id="connected-apps"`, `data-api-path="/api/v1/workspaces/ws1/grants/g-1"`, "&lt;b&gt;Claude&lt;/b&gt;",
			"self-registered", "Read-only"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: keys page lacks %q", role, want)
			}
		}
		if got := strings.Contains(body, "someone@example.com"); got != (role == mcpgate.RoleOwner) {
			t.Errorf("%s: person column shown = %v", role, got)
		}
		// OAuth comes first for the clients that sign in by themselves.
		panel := body[strings.Index(body, `id="panel-claude-code"`):]
		if i, j := strings.Index(panel, `claude mcp add --transport http --scope user mcpgate https://gw.example.com/mcp</code>`),
			strings.Index(panel, "Or with an MCP key"); i < 0 || j < 0 || i > j {
			t.Errorf("%s: Claude Code's OAuth snippet missing or not first (%d, %d)", role, i, j)
		}
	}
}

// The consent page names the client, warns about a self-registered one,
// carries the request in hidden fields (escaped), and offers the user's
// workspaces and both access levels.
func TestRenderConsent(t *testing.T) {
	h, err := newHandler(Options{Services: newFake(mcpgate.RoleOwner).services(), PublicURL: "https://gw.example.com", Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/oauth/authorize", nil)
	r = r.WithContext(mcpgate.NewContextWithUser(r.Context(), testUser))
	w := httptest.NewRecorder()
	h.RenderConsent(w, r, mcpgate.ConsentPage{
		Client:       mcpgate.OAuthClient{ID: "mcpc_x", Name: "Evil \"app\"", Kind: mcpgate.ClientDCR},
		RedirectHost: "127.0.0.1:5555", RedirectLoopback: true, SelfRegistered: true, ReadOnly: true, Action: "/oauth/authorize",
		Resource:   "https://gw.example.com/mcp",
		Workspaces: []mcpgate.Workspace{{ID: "ws1", Name: "Team", Role: mcpgate.RoleOwner}},
		Fields:     map[string]string{"state": `"><script>`, "csrf_token": "tok"},
	})
	body := w.Body.String()
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d", w.Code)
	}
	for _, want := range []string{`id="consent-warning"`, "127.0.0.1:5555", `value="ws1"`, `name="csrf_token" value="tok"`,
		`value="read_only" id="access-read" checked`, `&#34;&gt;&lt;script&gt;`, `method="post" action="/oauth/authorize"`,
		// Which gateway, what is asked in words, the resource,
		// how the app is known, the cap, and no way out of the flow.
		`mcpgate at <strong>gw.example.com</strong>`, "Read-only access: to list and inspect", "https://gw.example.com/mcp",
		"registered itself with this gateway", `id="access-capped"`, `class="flow-origin">gw.example.com<`} {
		if !strings.Contains(body, want) {
			t.Errorf("consent page lacks %q", want)
		}
	}
	for _, bad := range []string{`"><script>`, `id="access-full"`, "Open dashboard", `href="/app"`} {
		if strings.Contains(body, bad) {
			t.Errorf("consent page has %q", bad)
		}
	}

	// A client known by its metadata document that asks for full access,
	// returning to a website.
	w = httptest.NewRecorder()
	h.RenderConsent(w, r, mcpgate.ConsentPage{
		Client:       mcpgate.OAuthClient{ID: "https://app.example.com/client.json", Name: "Docs app", Kind: mcpgate.ClientCIMD},
		RedirectHost: "app.example.com", DocumentHost: "app.example.com", Resource: "https://gw.example.com/mcp",
		Action: "/oauth/authorize", Workspaces: []mcpgate.Workspace{{ID: "ws1", Name: "Team", Role: mcpgate.RoleOwner}},
	})
	body = w.Body.String()
	for _, want := range []string{"verified by its client ID document at <code>app.example.com</code>", `id="access-full" checked`,
		"Full access: every tool", `id="access-read"`} {
		if !strings.Contains(body, want) {
			t.Errorf("metadata-document consent page lacks %q", want)
		}
	}
	for _, bad := range []string{`id="consent-warning"`, "an app on this computer", `id="access-capped"`} {
		if strings.Contains(body, bad) {
			t.Errorf("metadata-document consent page has %q", bad)
		}
	}
}

// The login page an authorization request leads through says which app
// asks and which gateway this is (before the fix, it said only "Log in").
func TestLoginDuringOAuth(t *testing.T) {
	h, err := newHandler(Options{Services: newFake(mcpgate.RoleOwner).services(), PublicURL: "https://gw.example.com",
		Now: func() time.Time { return testNow },
		OAuthApp: func(_ context.Context, id string) string {
			if id == "mcpc_x" {
				return "Claude <Code>"
			}
			return ""
		}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(next string) string {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/login?next="+url.QueryEscape(next), nil))
		return w.Body.String()
	}
	body := get("/oauth/authorize?client_id=mcpc_x&response_type=code")
	for _, want := range []string{"Log in to continue to Claude &lt;Code&gt;", `id="login-app"`, "mcpgate at <strong>gw.example.com</strong>"} {
		if !strings.Contains(body, want) {
			t.Errorf("login page during OAuth lacks %q", want)
		}
	}
	if strings.Contains(body, `href="/signup">Sign up</a>`) {
		t.Error("login page during OAuth offers the header's Sign up link")
	}
	if body := get("/app"); !strings.Contains(body, "<h1>Log in</h1>") || strings.Contains(body, `id="login-app"`) {
		t.Error("the ordinary login page changed")
	}
}

// The wiring builds the authorization server after the dashboard, whose
// consent pages it renders, and gives the dashboard its app names then
// (SetOAuthApp): the login page names the app as with OAuthApp set at New.
func TestLoginDuringOAuth_AppSetAfterNew(t *testing.T) {
	d := New(Options{Services: newFake(mcpgate.RoleOwner).services(), PublicURL: "https://gw.example.com",
		Now: func() time.Time { return testNow }})
	d.SetOAuthApp(func(context.Context, string) string { return "Late App" })
	w := httptest.NewRecorder()
	d.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/login?next="+url.QueryEscape("/oauth/authorize?client_id=mcpc_x"), nil))
	if body := w.Body.String(); !strings.Contains(body, "Log in to continue to Late App") {
		t.Errorf("login page during OAuth after SetOAuthApp lacks the app's name")
	}
}
