package web

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
)

const evil = `<script>alert("x")</script>`

var testNow = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

// EmailVerified, MailEnabled and EmailVerificationRequired are what the
// account page asks: a confirmed address, no mail, nothing required, unless
// the fake says otherwise.
func (f *fakeData) EmailVerified(context.Context, *mcpgate.User) (bool, error) {
	return !f.unverified, nil
}
func (f *fakeData) MailEnabled() bool               { return f.mail }
func (f *fakeData) EmailVerificationRequired() bool { return f.verifyRequired }

// TOTPEnabled is what the account and settings pages ask: on when the fake
// says so.
func (f *fakeData) TOTPEnabled(context.Context, *mcpgate.User) (bool, error) { return f.totp, nil }

// Sessions is the account page's list: this browser only.
func (f *fakeData) Sessions(context.Context, *mcpgate.User, string) ([]mcpgate.Session, error) {
	return []mcpgate.Session{{ID: "s1", Current: true, UserAgent: evil, Address: "192.0.2.1", CreatedAt: testNow}}, nil
}

// fakeData is a hand-written fake of the services the pages read, with one
// workspace, "ws1". The embedded interfaces stand for the methods the pages
// never call (a call would panic).
type fakeData struct {
	// more are connectors registered after E2B.
	more []mcpgate.ConnectorInfo
	mcpgate.AccountService
	mcpgate.TwoFactorService
	mcpgate.WorkspaceService
	mcpgate.KeyService
	mcpgate.ConnectionService
	mcpgate.ToolService
	mcpgate.AuditService

	role        mcpgate.Role
	wsName      string
	conn        *mcpgate.Connection
	keys        []mcpgate.APIKey
	members     []mcpgate.Member
	invitations []mcpgate.Invitation
	audit       []mcpgate.AuditEvent
	tools       []mcpgate.ToolInfo
	toolOut     map[string]string
	toolErr     map[string]error
	invitation  *mcpgate.Invitation
	approvals   []mcpgate.ApprovalRequest // approvals_test.go
	guardrails  mcpgate.Guardrails
	grants      []mcpgate.Grant
	totp        bool // two-factor sign-in of the viewer
	// unverified, mail and verifyRequired: the viewer's address is not
	// confirmed; the install has SMTP_URL; and SIGNUP_VERIFY=required.
	unverified, mail, verifyRequired bool

	lastAudit  mcpgate.AuditFilter
	lastChart  string // the member CallsPerHour was asked for
	lastSource string // and the source
	calls      []string
}

func newFake(role mcpgate.Role) *fakeData {
	t0 := testNow.Add(-time.Hour)
	return &fakeData{
		role: role, wsName: "Acme",
		conn: &mcpgate.Connection{Connector: "e2b", KeyHint: "e2b_…9f3c", VerifiedAt: t0, UpdatedAt: t0},
		keys: []mcpgate.APIKey{{ID: "k1", Name: "laptop", Scope: mcpgate.ScopeFull, CreatedAt: t0, OwnerEmail: "a@example.com"}},
		members: []mcpgate.Member{{UserID: "u1", Email: "a@example.com", Role: role, JoinedAt: t0},
			{UserID: "u2", Email: "b@example.com", Role: mcpgate.RoleMember, JoinedAt: t0}},
		invitations: []mcpgate.Invitation{{ID: "i1", Email: "c@example.com", Role: mcpgate.RoleMember, ExpiresAt: testNow.Add(time.Hour)}},
		audit: []mcpgate.AuditEvent{{ID: 1, Kind: "tool_call", Action: "e2b_list_sandboxes", Outcome: mcpgate.OutcomeOK,
			ActorEmail: "a@example.com", Source: "mcp", CreatedAt: t0, Arguments: map[string]any{"state": "running"}}},
		tools: []mcpgate.ToolInfo{
			{Name: "e2b_list_sandboxes", Title: "List sandboxes", Enabled: true, ReadOnly: true},
			{Name: "e2b_kill_sandbox", Title: "Kill a sandbox", Enabled: false, Approval: mcpgate.ApprovalHuman, Destructive: true, OffByDefault: true},
		},
		toolOut: map[string]string{
			"e2b_list_sandboxes": `{"data":[{"sandbox_id":"sbx1","template_id":"base","state":"running","started_at":"2026-09-01T11:00:00Z","end_at":"2026-09-01T13:00:00Z","cpu_count":2,"memory_mb":512,"metadata":{"user":"me"}}],"total_running":1}`,
			"e2b_get_sandbox":    `{"sandbox_id":"sbx1","template_id":"base","state":"running","started_at":"2026-09-01T11:00:00Z","end_at":"2026-09-01T13:00:00Z","cpu_count":2,"memory_mb":512,"metadata":{"user":"me"}}`,
			"e2b_get_sandbox_metrics": `{"metrics":[{"timestamp":"2026-09-01T11:50:00Z","cpu_used_pct":10,"mem_used_bytes":1000000,"mem_total_bytes":4000000},` +
				`{"timestamp":"2026-09-01T11:55:00Z","cpu_used_pct":30,"mem_used_bytes":2000000,"mem_total_bytes":4000000}]}`,
			"e2b_get_sandbox_logs": `{"logs":[{"timestamp":"2026-09-01T11:59:00Z","level":"info","message":"started"}]}`,
		},
		toolErr:    map[string]error{},
		invitation: &mcpgate.Invitation{ID: "i1", WorkspaceID: "ws1", Email: "c@example.com", Role: mcpgate.RoleMember, ExpiresAt: testNow.Add(time.Hour)},
	}
}

func (f *fakeData) ws() *mcpgate.Workspace {
	return &mcpgate.Workspace{ID: "ws1", Name: f.wsName, Role: f.role, Personal: true}
}

func (f *fakeData) services() Services {
	return Services{Accounts: f, TwoFactor: f, Workspaces: f, Keys: f, Connections: f, Tools: f, Audit: f, Resources: f,
		Approvals: f, Guardrails: f, Grants: f}
}

// e2bView is the real E2B connector's dashboard view, fed by the fake's
// tool outputs: the pages render what the connector really builds.
var e2bView = e2b.New(e2b.Options{})

func (f *fakeData) Connectors() []mcpgate.ConnectorInfo {
	return append([]mcpgate.ConnectorInfo{connectors.Info(e2bView)}, f.more...)
}

func (f *fakeData) caller(a *mcpgate.Actor) connectors.Caller {
	return func(ctx context.Context, tool string, args map[string]any) (json.RawMessage, error) {
		raw, _ := json.Marshal(args)
		return f.CallTool(ctx, a, mcpgate.ToolCall{Tool: tool, Arguments: raw})
	}
}

func (f *fakeData) Resources(ctx context.Context, a *mcpgate.Actor, _, page string) (*mcpgate.ResourcePage, error) {
	return e2bView.ListResources(ctx, f.caller(a), page)
}

func (f *fakeData) Resource(ctx context.Context, a *mcpgate.Actor, _, id string) (*mcpgate.ResourceDetail, error) {
	d, err := e2bView.GetResource(ctx, f.caller(a), id, testNow)
	if err != nil {
		return nil, err
	}
	for i := range d.Actions {
		d.Actions[i].Enabled = true
		for _, t := range f.tools {
			if t.Name == d.Actions[i].Tool {
				d.Actions[i].Enabled = t.Enabled
			}
		}
	}
	return d, nil
}

func (f *fakeData) Enter(_ context.Context, u *mcpgate.User, wsID string, src mcpgate.Source) (*mcpgate.Actor, *mcpgate.Workspace, error) {
	if wsID != "ws1" {
		return nil, nil, mcpgate.Errorf(mcpgate.ENotFound, "workspace not found")
	}
	return &mcpgate.Actor{UserID: u.ID, Email: u.Email, WorkspaceID: wsID, Role: f.role, Scope: mcpgate.ScopeFull, Source: src}, f.ws(), nil
}

func (f *fakeData) Workspaces(context.Context, *mcpgate.User) ([]mcpgate.Workspace, error) {
	return []mcpgate.Workspace{*f.ws()}, nil
}

func (f *fakeData) Members(context.Context, *mcpgate.Actor) ([]mcpgate.Member, error) {
	return f.members, nil
}

func (f *fakeData) Invitations(context.Context, *mcpgate.Actor) ([]mcpgate.Invitation, error) {
	return f.invitations, nil
}

func (f *fakeData) FindInvitation(context.Context, string) (*mcpgate.Invitation, error) {
	if f.invitation == nil {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "invitation not found")
	}
	return f.invitation, nil
}

func (f *fakeData) Keys(context.Context, *mcpgate.Actor) ([]mcpgate.APIKey, error) {
	return f.keys, nil
}

func (f *fakeData) Audit(_ context.Context, _ *mcpgate.Actor, flt mcpgate.AuditFilter) ([]mcpgate.AuditEvent, string, error) {
	f.lastAudit = flt
	return f.audit, "", nil
}

func (f *fakeData) CallsPerHour(_ context.Context, _ *mcpgate.Actor, userID string, source mcpgate.Source, _ time.Time) ([]mcpgate.HourCount, error) {
	f.lastChart, f.lastSource = userID, string(source)
	if source == mcpgate.SourceMCP {
		return []mcpgate.HourCount{{Hour: testNow.Truncate(time.Hour), Calls: 2}}, nil
	}
	return []mcpgate.HourCount{{Hour: testNow.Truncate(time.Hour), Calls: 5, Errors: 1}}, nil
}

func (f *fakeData) Connection(context.Context, *mcpgate.Actor, string) (*mcpgate.Connection, error) {
	if f.conn == nil {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "not connected")
	}
	return f.conn, nil
}

func (f *fakeData) Tools(context.Context, *mcpgate.Actor) ([]mcpgate.ToolInfo, error) {
	return f.tools, nil
}

func (f *fakeData) CallTool(_ context.Context, _ *mcpgate.Actor, call mcpgate.ToolCall) (json.RawMessage, error) {
	f.calls = append(f.calls, call.Tool)
	if err := f.toolErr[call.Tool]; err != nil {
		return nil, err
	}
	out, ok := f.toolOut[call.Tool]
	if !ok {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "no tool")
	}
	return json.RawMessage(out), nil
}

var testUser = &mcpgate.User{ID: "u1", Email: "a@example.com"}

func mustHandler(t *testing.T, d *fakeData) http.Handler {
	t.Helper()
	h, err := newHandler(Options{Services: d.services(), Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), PublicURL: "https://gw.example.com/", Version: "test", Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatalf("newHandler() err = %v", err)
	}
	return h
}

func get(t *testing.T, h http.Handler, path string, u *mcpgate.User) (*http.Response, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if u != nil {
		r = r.WithContext(mcpgate.NewContextWithUser(r.Context(), u))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	res := w.Result()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

var appPages = []string{"/app/w/ws1", "/app/w/ws1/connections", "/app/w/ws1/keys", "/app/w/ws1/sandboxes",
	"/app/w/ws1/sandboxes/sbx1", "/app/w/ws1/settings", "/app/w/ws1/audit", "/app/w/ws1/approvals", "/app/w/ws1/approvals/ap1"}

var publicPages = []string{"/", "/signup", "/login", "/invite/inv_token"}

func TestPages_Render(t *testing.T) {
	for _, role := range []mcpgate.Role{mcpgate.RoleOwner, mcpgate.RoleMember} {
		h := mustHandler(t, newFake(role))
		for _, p := range appPages {
			res, body := get(t, h, p, testUser)
			if res.StatusCode != http.StatusOK {
				t.Errorf("%s GET %s status = %d, want 200; body:\n%s", role, p, res.StatusCode, body)
			}
			if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("GET %s Cache-Control = %q, want no-store", p, cc)
			}
		}
	}
	h := mustHandler(t, newFake(mcpgate.RoleOwner))
	for _, p := range publicPages {
		if res, body := get(t, h, p, nil); res.StatusCode != http.StatusOK {
			t.Errorf("GET %s status = %d, want 200; body:\n%s", p, res.StatusCode, body)
		}
	}
}

func TestApp_RedirectsAndNotFound(t *testing.T) {
	h := mustHandler(t, newFake(mcpgate.RoleOwner))
	tests := []struct {
		name, path string
		user       *mcpgate.User
		wantStatus int
		wantLoc    string
	}{
		{name: "logged out", path: "/app/w/ws1/keys?x=1", wantStatus: http.StatusSeeOther, wantLoc: "/login?next=%2Fapp%2Fw%2Fws1%2Fkeys%3Fx%3D1"},
		{name: "app root", path: "/app", user: testUser, wantStatus: http.StatusSeeOther, wantLoc: "/app/w/ws1"},
		{name: "login when logged in", path: "/login?next=/app/w/ws1/audit", user: testUser, wantStatus: http.StatusSeeOther, wantLoc: "/app/w/ws1/audit"},
		{name: "open redirect refused", path: "/login?next=//evil.example", user: testUser, wantStatus: http.StatusSeeOther, wantLoc: "/app"},
		{name: "not a member", path: "/app/w/other/keys", user: testUser, wantStatus: http.StatusNotFound},
		{name: "unknown page", path: "/nope", wantStatus: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, body := get(t, h, tt.path, tt.user)
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d", res.StatusCode, tt.wantStatus)
			}
			if loc := res.Header.Get("Location"); loc != tt.wantLoc {
				t.Errorf("Location = %q, want %q", loc, tt.wantLoc)
			}
			if tt.wantStatus == http.StatusNotFound && strings.Contains(body, "Acme") {
				t.Errorf("404 page shows the workspace name")
			}
		})
	}
}

func TestPages_EscapeUserData(t *testing.T) {
	f := newFake(mcpgate.RoleOwner)
	f.wsName = evil
	f.keys[0].Name = evil
	f.members[1].Email = evil
	f.audit[0].Arguments = map[string]any{"metadata": evil}
	f.audit[0].Message = evil
	f.invitation.Email = evil
	out, _ := json.Marshal(evil)
	f.toolOut["e2b_list_sandboxes"] = `{"data":[{"sandbox_id":"sbx1","template_id":` + string(out) + `,"state":"running","metadata":{"k":` + string(out) + `}}]}`
	f.toolOut["e2b_get_sandbox"] = `{"sandbox_id":"sbx1","template_id":"base","state":"running","metadata":{"k":` + string(out) + `}}`
	f.toolOut["e2b_get_sandbox_logs"] = `{"logs":[{"timestamp":"2026-09-01T11:59:00Z","level":"info","message":` + string(out) + `}]}`
	h := mustHandler(t, f)
	for _, p := range append(appPages, "/invite/tok") {
		_, body := get(t, h, p, testUser)
		if strings.Contains(body, "<script>alert") {
			t.Errorf("GET %s renders user data as markup", p)
		}
	}
	_, body := get(t, h, "/app/w/ws1/keys", testUser)
	if !strings.Contains(body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Errorf("keys page does not show the escaped name")
	}
}

var (
	formTag   = regexp.MustCompile(`(?s)<form\b[^>]*>`)
	attr      = func(tag, name string) string { return attrValue(tag, name) }
	inlineJS  = regexp.MustCompile(`(?i)<script\b[^>]*>\s*[^<\s]`)
	scriptTag = regexp.MustCompile(`(?i)<script\b[^>]*>`)
	handlerAt = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	styleAt   = regexp.MustCompile(`(?i)\sstyle\s*=|<style\b`)
)

func attrValue(tag, name string) string {
	m := regexp.MustCompile(`\s` + name + `="([^"]*)"`).FindStringSubmatch(tag)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestForms_AreAPIForms checks every form of every page: a form either reads
// (method get, or a dialog's buttons) or is sent by app.js to the JSON API,
// which requires the CSRF header. No form posts natively, and nothing inline
// needs a CSP exception.
func TestForms_AreAPIForms(t *testing.T) {
	for _, role := range []mcpgate.Role{mcpgate.RoleOwner, mcpgate.RoleMember} {
		f := newFake(role)
		f.tools[1].Enabled = true // the kill form
		h := mustHandler(t, f)
		seen := 0
		for _, p := range append(appPages, publicPages...) {
			user := testUser
			if p == "/signup" || p == "/login" || p == "/invite/inv_token" {
				user = nil
			}
			_, body := get(t, h, p, user)
			for _, tag := range formTag.FindAllString(body, -1) {
				seen++
				method := strings.ToLower(attr(tag, "method"))
				if method == "get" || method == "dialog" {
					continue
				}
				if method != "" || attr(tag, "action") != "" {
					t.Errorf("%s: form %s posts natively", p, tag)
				}
				am, ap := attr(tag, "data-api-method"), attr(tag, "data-api-path")
				if am == "" || !strings.HasPrefix(ap, "/api/v1/") {
					t.Errorf("%s: form %s is not an API form (data-api-method, data-api-path=/api/v1/...)", p, tag)
				}
			}
			for _, s := range scriptTag.FindAllString(body, -1) {
				if attr(s, "src") == "" {
					t.Errorf("%s: inline script %s", p, s)
				}
			}
			if inlineJS.MatchString(body) || handlerAt.MatchString(body) || styleAt.MatchString(body) {
				t.Errorf("%s: inline script, event handler or style (CSP forbids them)", p)
			}
		}
		if seen < 10 {
			t.Errorf("%s: saw %d forms, want the pages' forms", role, seen)
		}
	}
}

func TestAppJS_SendsCSRFHeader(t *testing.T) {
	b, err := files.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	js := string(b)
	for _, want := range []string{"'X-CSRF-Token': csrfToken()", "mcpgate_csrf=", "Retry-After", "data-form-error"} {
		if !strings.Contains(js, want) {
			t.Errorf("app.js lacks %q", want)
		}
	}
}

func TestSettings_MemberSeesNoAdminSwitches(t *testing.T) {
	h := mustHandler(t, newFake(mcpgate.RoleMember))
	_, body := get(t, h, "/app/w/ws1/settings", testUser)
	if strings.Contains(body, `role="switch"`) || strings.Contains(body, "/invitations") || strings.Contains(body, "data-api-method=\"PUT\"") {
		t.Errorf("member's settings page has admin controls")
	}
	if !strings.Contains(body, `id="readonly-notice"`) {
		t.Errorf("member's settings page lacks the read-only notice")
	}
	h = mustHandler(t, newFake(mcpgate.RoleAdmin))
	if _, body = get(t, h, "/app/w/ws1/settings", testUser); !strings.Contains(body, `id="kill-switch"`) {
		t.Errorf("admin's settings page lacks the kill switch")
	}
}

// TestAudit_AdminFilters: the audit page passes an admin's filters to the
// service (which decides what each person may see; internal/service tests
// that rule), and the chart follows the member filtered on.
func TestAudit_AdminFilters(t *testing.T) {
	f := newFake(mcpgate.RoleOwner)
	h := mustHandler(t, f)
	get(t, h, "/app/w/ws1/audit?actor=u2&cursor=1756728000000000_12&since=24h&tool=e2b_kill_sandbox", testUser)
	if f.lastAudit.ActorID != "u2" || f.lastAudit.Cursor != "1756728000000000_12" || f.lastAudit.Action != "e2b_kill_sandbox" ||
		!f.lastAudit.Since.Equal(testNow.Add(-24*time.Hour)) {
		t.Errorf("admin's audit filter = %+v", f.lastAudit)
	}
	if f.lastChart != "u2" {
		t.Errorf("admin's chart counts member %q, want u2", f.lastChart)
	}
}

func TestSandbox_KillOnlyWhenEnabled(t *testing.T) {
	f := newFake(mcpgate.RoleOwner)
	h := mustHandler(t, f)
	if _, body := get(t, h, "/app/w/ws1/sandboxes/sbx1", testUser); strings.Contains(body, "e2b_kill_sandbox/call") {
		t.Errorf("kill form shown while the tool is off")
	}
	f.tools[1].Enabled = true
	_, body := get(t, h, "/app/w/ws1/sandboxes/sbx1", testUser)
	if !strings.Contains(body, "e2b_kill_sandbox/call") || !strings.Contains(body, `data-confirm-type="sbx1"`) {
		t.Errorf("kill form missing or without typed confirmation")
	}
	if !strings.Contains(body, "<polyline") {
		t.Errorf("no SVG chart on the sandbox page")
	}
}

func TestSandboxes_ErrorStates(t *testing.T) {
	f := newFake(mcpgate.RoleOwner)
	f.conn = nil
	h := mustHandler(t, f)
	if _, body := get(t, h, "/app/w/ws1/sandboxes", testUser); !strings.Contains(body, "E2B is not connected") {
		t.Errorf("sandboxes page without connection lacks its notice")
	}
	if len(f.calls) != 0 {
		t.Errorf("tools called without a connection: %v", f.calls)
	}
	f = newFake(mcpgate.RoleOwner)
	f.toolErr["e2b_list_sandboxes"] = mcpgate.Errorf(mcpgate.EUpstream, "E2B rejected the team API key")
	h = mustHandler(t, f)
	if _, body := get(t, h, "/app/w/ws1/sandboxes", testUser); !strings.Contains(body, "E2B rejected the team API key") {
		t.Errorf("sandboxes page does not show E2B's error")
	}
}

func TestStatic_HashedAndImmutable(t *testing.T) {
	h := mustHandler(t, newFake(mcpgate.RoleOwner))
	_, body := get(t, h, "/", nil)
	m := regexp.MustCompile(`/static/app\.[0-9a-f]{12}\.css`).FindString(body)
	if m == "" {
		t.Fatalf("no hashed stylesheet URL in the page")
	}
	res, _ := get(t, h, m, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Cache-Control"), "immutable") ||
		!strings.HasPrefix(res.Header.Get("Content-Type"), "text/css") {
		t.Errorf("GET %s = %d, Cache-Control %q, Content-Type %q", m, res.StatusCode, res.Header.Get("Cache-Control"), res.Header.Get("Content-Type"))
	}
	if res, _ := get(t, h, "/static/app.000000000000.css", nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("stale asset status = %d, want 404", res.StatusCode)
	}
}

func TestSetupClients_MatchGuide(t *testing.T) {
	want := map[string][]string{
		"claude":      {"https://gw.example.com/c/<YOUR_MCP_KEY>/mcp"},
		"claude-code": {`claude mcp add --transport http --scope user mcpgate https://gw.example.com/mcp --header "Authorization: Bearer <YOUR_MCP_KEY>"`},
		"cursor":      {`{"mcpServers":{"mcpgate":{"url":"https://gw.example.com/mcp","headers":{"Authorization":"Bearer <YOUR_MCP_KEY>"}}}}`},
		"vscode":      {`{"inputs":[{"type":"promptString","id":"mcp-key","description":"MCP key","password":true}],"servers":{"mcpgate":{"type":"http","url":"https://gw.example.com/mcp","headers":{"Authorization":"Bearer ${input:mcp-key}"}}}}`},
		"windsurf":    {`{"mcpServers":{"mcpgate":{"serverUrl":"https://gw.example.com/mcp","headers":{"Authorization":"Bearer <YOUR_MCP_KEY>"}}}}`},
		"cline":       {`{"mcpServers":{"mcpgate":{"type":"streamableHttp","url":"https://gw.example.com/mcp","headers":{"Authorization":"Bearer <YOUR_MCP_KEY>"},"disabled":false}}}`},
		"jetbrains":   {`{"mcpServers":{"mcpgate":{"type":"http","url":"https://gw.example.com/mcp","headers":{"Authorization":"Bearer <YOUR_MCP_KEY>"}}}}`},
		"chatgpt":     {"https://gw.example.com/c/<YOUR_MCP_KEY>/mcp"},
		"generic":     {"https://gw.example.com/mcp", "Authorization: Bearer <YOUR_MCP_KEY>"},
	}
	got := map[string][]string{}
	for _, c := range setupClients("https://gw.example.com") {
		for _, s := range c.Snippets {
			got[c.ID] = append(got[c.ID], s.Text)
			if strings.Contains(s.Text, "{") && strings.HasPrefix(s.Text, "{") {
				var v any
				if err := json.Unmarshal([]byte(s.Text), &v); err != nil {
					t.Errorf("%s snippet is not valid JSON: %v", c.ID, err)
				}
			}
		}
	}
	for id, snippets := range want {
		for _, w := range snippets {
			found := false
			for _, g := range got[id] {
				found = found || g == w
			}
			if !found {
				t.Errorf("%s snippets = %q, want one = %q", id, got[id], w)
			}
		}
	}
}

func TestSafeNext(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/app/w/1", "/app/w/1"}, {"", ""}, {"//evil.example", ""}, {"https://evil.example", ""},
		{"/\\evil.example", ""}, {"app", ""}, {"/invite/inv_x", "/invite/inv_x"},
	}
	for _, tt := range tests {
		if got := safeNext(tt.in); got != tt.want {
			t.Errorf("safeNext(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestHourlyChart(t *testing.T) {
	since := testNow.Add(-23 * time.Hour)
	c, calls, errs := hourlyChart(since, []mcpgate.HourCount{{Hour: since, Calls: 3, Errors: 1}, {Hour: since.Add(23 * time.Hour), Calls: 7},
		{Hour: since.Add(-time.Hour), Calls: 100}})
	if calls != 10 || errs != 1 || len(c.Bars) != 24 {
		t.Fatalf("hourlyChart() = %d calls, %d errors, %d bars; want 10, 1, 24", calls, errs, len(c.Bars))
	}
	if c.Bars[23].H <= c.Bars[0].H || c.Bars[1].H != 0 {
		t.Errorf("bar heights not proportional: %v %v %v", c.Bars[0].H, c.Bars[1].H, c.Bars[23].H)
	}
}
