package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// webChromiumPath is Debian's chromium; `make test` installs it
// (scripts/ensure-chromium.sh).
const webChromiumPath = "/usr/bin/chromium"

// webScreenshotDir is testoutput/screenshots at the repository root.
var webScreenshotDir = filepath.Join("..", "..", "testoutput", "screenshots")

// TestWebJourney drives the dashboard in a real headless Chromium against the
// real program (serve) with a real database and the E2B simulator: sign up,
// connect E2B, create a key and read its setup snippet, call a tool over MCP
// with that key, find the call in the audit log, enable kill as admin, kill
// the sandbox from its page after typing its id, change the password, create
// a workspace, and check that an invited member sees no admin switches. Every
// page is checked at 1280 and 390 px (webCheckPage: no sideways scrolling, no
// serious or critical axe-core violation, selects that fit their text, a
// screenshot at each width), and no page logs a console error.
func TestWebJourney(t *testing.T) {
	base, ctx, problems := webStartJourney(t, nil)

	const password = "correct horse battery staple"
	ownerEmail := "owner@example.com"

	// Landing, sign up.
	webRun(t, ctx, "landing", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(".hero")))
	webShot(t, ctx, "01-landing")
	webCheckPage(t, ctx, "landing")
	webRun(t, ctx, "login page", chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.ID("#email")))
	webCheckPage(t, ctx, "login")
	// Without SMTP_URL, "Forgot password?" says the operator must set up email.
	webRun(t, ctx, "forgot password without mail",
		chromedp.Click(chromedp.ID("#forgot-link")), chromedp.WaitVisible(chromedp.ID("#no-mail")))
	if s := webText(t, ctx, "#no-mail"); !strings.Contains(s, "SMTP_URL") || !strings.Contains(s, "mcpgate user reset-password") {
		t.Errorf("forgot-password page without mail = %q, want it to name SMTP_URL and the CLI", s)
	}
	webCheckPage(t, ctx, "forgot-no-mail")
	webSubmitSignIn(t, ctx, "sign up", base+"/signup", ownerEmail, "short",
		chromedp.WaitVisible(chromedp.CSS(`[data-form-error]`)))
	if msg := webText(t, ctx, `[data-form-error]`); !strings.Contains(msg, "10 characters") {
		t.Errorf("signup error = %q, want the password rule", msg)
	}
	webShot(t, ctx, "02-signup-error")
	webCheckPage(t, ctx, "signup")
	webRun(t, ctx, "sign up again",
		webClear("#password"),
		chromedp.SendKeys(chromedp.ID("#password"), password),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#next-steps")))
	webShot(t, ctx, "03-overview-new")
	webCheckPage(t, ctx, "overview-new")
	webCheckPhoneMenu(t, ctx, "overview-new", 0)
	loc := webLocation(t, ctx)
	m := regexp.MustCompile(`/app/w/[0-9a-f-]+$`).FindString(loc)
	if m == "" {
		t.Fatalf("after signup at %q, want /app/w/<id>", loc)
	}
	wsBase := base + m

	// Connect E2B: a key E2B refuses first, then a good one.
	webRun(t, ctx, "bad E2B key",
		chromedp.Navigate(wsBase+"/connections"), chromedp.WaitVisible(chromedp.ID("#key-e2b")),
		chromedp.SendKeys(chromedp.ID("#key-e2b"), "e2b_nothex"),
		chromedp.Click(chromedp.CSS(`form[data-api-path$="/connections/e2b"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-form-error]:not([hidden])`)))
	webShot(t, ctx, "04-connections-error")
	// The gateway talks to the simulator: the page says so.
	if s := webText(t, ctx, "#demo-e2b"); !strings.Contains(s, "simulator") || !strings.Contains(s, "e2b_") {
		t.Errorf("demo notice = %q, want it to say the simulator takes any e2b_<hex> key", s)
	}
	webCheckPage(t, ctx, "connections")
	webRun(t, ctx, "good E2B key",
		webClear("#key-e2b"),
		chromedp.SendKeys(chromedp.ID("#key-e2b"), "e2b_0123abcd"),
		chromedp.Click(chromedp.CSS(`form[data-api-path$="/connections/e2b"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=key-hint]`)))
	if hint := webText(t, ctx, `[data-testid=key-hint]`); !strings.HasPrefix(hint, "e2b_") || strings.Contains(hint, "0123abcd") {
		t.Errorf("key hint = %q, want a hint, not the key", hint)
	}
	// Connected: the page points at the next step, a key, then a client.
	if s := webText(t, ctx, "#next-step-e2b"); !strings.Contains(s, "create an MCP key") || !strings.Contains(s, "client") {
		t.Errorf("next step after connecting E2B = %q, want a key, then a client", s)
	}
	if n := webCount(t, ctx, `#next-step-e2b a[href$="/keys#create-key"]`); n != 1 {
		t.Errorf("the next step has %d links to creating a key, want 1", n)
	}
	webShot(t, ctx, "05-connections")
	webCheckPage(t, ctx, "connections-connected")

	// Create a key; read it and the Claude Code snippet.
	key := webCreateKey(t, ctx, wsBase, "Claude on <laptop>")
	connectorURL := webText(t, ctx, "#new-key-url")
	// The list shows the new key at once, without a reload.
	if n := webCount(t, ctx, "#keys-table tbody tr"); n != 1 {
		t.Errorf("keys list has %d rows right after creation, want 1", n)
	}
	if s := webText(t, ctx, "#keys-table"); !strings.Contains(s, "Claude on <laptop>") || !strings.Contains(s, "in 90 days") {
		t.Errorf("keys list right after creation = %q, want the new key, expiring in 90 days", s)
	}
	if s := webText(t, ctx, "[data-active-count]"); s != "1" {
		t.Errorf("active keys right after creation = %q, want 1", s)
	}
	if n := webCount(t, ctx, "[data-keys-empty]:not([hidden])"); n != 0 {
		t.Errorf("the keys list still says it is empty")
	}
	if s := webText(t, ctx, "#done-hint"); !strings.Contains(s, "<YOUR_MCP_KEY>") {
		t.Errorf("the Done hint = %q, want it to say the snippets go back to <YOUR_MCP_KEY>", s)
	}
	// The first Claude Code snippet signs in with OAuth; the second
	// carries the key.
	webRun(t, ctx, "Claude Code tab", chromedp.Click(chromedp.ID("tab-claude-code")), chromedp.WaitVisible(chromedp.ID("snip-claude-code-1")))
	snippet := webText(t, ctx, "#snip-claude-code-1")
	webShot(t, ctx, "06-keys-created")
	webCheckPage(t, ctx, "keys-created")
	// This gateway is on 127.0.0.1: the Claude tab leads with the config
	// file, which works here; the OAuth server URL, which Anthropic's cloud
	// cannot reach, follows with the note the connector URL has.
	webRun(t, ctx, "Claude tab", chromedp.Click(chromedp.ID("tab-claude")), chromedp.WaitVisible(chromedp.ID("snip-claude-0")))
	if s := webText(t, ctx, "#snip-claude-0"); !strings.Contains(s, `"mcp-remote@`) || !strings.Contains(s, "Bearer "+key) {
		t.Errorf("Claude Desktop config snippet = %q, want pinned mcp-remote with the new key", s)
	}
	if s := webText(t, ctx, "#panel-claude .setup-steps"); !strings.Contains(s, "Paste the JSON below") {
		t.Errorf("Claude tab steps = %q, want them to lead to the JSON below", s)
	}
	for _, id := range []string{"snip-claude-1", "snip-claude-2"} {
		hint, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('`+id+`').closest('.snippet').querySelector('.snippet-hint').textContent`))
		if err != nil || !strings.HasPrefix(hint, "Not for this gateway") {
			t.Errorf("Claude tab's %s (%q) hint = %q, %v; want the \"not for this gateway\" note", id, webText(t, ctx, "#"+id), hint, err)
		}
	}
	webCheckPage(t, ctx, "keys-claude")
	sm := regexp.MustCompile(`^claude mcp add --transport http --scope user mcpgate (\S+) --header "Authorization: Bearer (\S+)"$`).FindStringSubmatch(snippet)
	if sm == nil {
		t.Fatalf("Claude Code snippet = %q, want the add command with the key", snippet)
	}
	if sm[1] != base+"/mcp" || sm[2] != key || !strings.HasPrefix(key, "mcpg_") {
		t.Fatalf("snippet URL %q key %q; want %q and the new key %q", sm[1], sm[2], base+"/mcp", key)
	}

	// A real MCP call with what the snippet says.
	sandboxID := webMCPCreateSandbox(t, sm[1], sm[2])
	webMCPListTools(t, connectorURL)

	// The call is in the audit log (written asynchronously: poll).
	webWaitText(t, ctx, wsBase+"/audit", "#audit-table", "e2b_create_sandbox")
	webShot(t, ctx, "07-audit")
	webCheckPage(t, ctx, "audit")
	webRun(t, ctx, "audit filter",
		chromedp.Navigate(wsBase+"/audit?tool=e2b_create_sandbox&outcome=ok&since=1h"), chromedp.WaitVisible(chromedp.ID("#audit-table")))
	if s := webText(t, ctx, "#audit-table"); !strings.Contains(s, "e2b_create_sandbox") || strings.Contains(s, "key.created") {
		t.Errorf("filtered audit table = %q", s)
	}

	// The sandbox shows up; its page has no kill button yet.
	webWaitText(t, ctx, wsBase+"/sandboxes", "#sandboxes-table", sandboxID)
	webShot(t, ctx, "08-sandboxes")
	webCheckPage(t, ctx, "sandboxes")
	webRun(t, ctx, "sandbox page", chromedp.Navigate(wsBase+"/sandboxes/"+sandboxID), chromedp.WaitVisible(chromedp.ID("#metrics-title")))
	if n := webCount(t, ctx, "#kill-button"); n != 0 {
		t.Errorf("kill button shown while kill is off")
	}
	webShot(t, ctx, "09-sandbox")
	webCheckPage(t, ctx, "sandbox")

	// Enable kill as admin, through the confirmation dialog.
	webRun(t, ctx, "settings", chromedp.Navigate(wsBase+"/settings"), chromedp.WaitVisible(chromedp.ID("#kill-switch")))
	webShot(t, ctx, "10-settings-owner")
	webCheckPage(t, ctx, "settings-owner")
	// The page says pausing keeps the files (and memory by default): pause
	// is not tagged like kill, and kill's "off" is not the green of "on".
	if s := webText(t, ctx, `tr[data-tool=e2b_pause_sandbox] .tool-kind`); strings.Contains(s, "destructive") || !strings.Contains(s, "can lose data") {
		t.Errorf("pause's kind = %q, want \"can lose data\", not \"destructive\"", s)
	}
	if s := webText(t, ctx, `tr[data-tool=e2b_kill_sandbox] .tool-kind`); !strings.Contains(s, "destructive") {
		t.Errorf("kill's kind = %q, want destructive", s)
	}
	if cls, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('kill-state').className`)); err != nil ||
		!strings.Contains(cls, "pill-neutral") || webText(t, ctx, "#kill-state") != "off" {
		t.Errorf("kill's state badge while off: class %q (%v), want a neutral \"off\"", cls, err)
	}
	webRun(t, ctx, "enable kill",
		chromedp.Click(chromedp.ID("#kill-switch")),
		chromedp.WaitVisible(chromedp.ID("#confirm-ok")))
	webShot(t, ctx, "11-settings-confirm-kill")
	webRun(t, ctx, "confirm kill switch",
		chromedp.Click(chromedp.ID("#confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(".kill-card.kill-on")))

	// Kill the sandbox after typing its id.
	webWaitFor(t, ctx, wsBase+"/sandboxes/"+sandboxID, "#kill-button")
	webRun(t, ctx, "kill",
		chromedp.Click(chromedp.ID("#kill-button")), chromedp.WaitVisible(chromedp.ID("#confirm-type")))
	disabled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('confirm-ok').disabled`))
	if err != nil {
		t.Fatalf("read the kill confirmation button: %v", err)
	}
	if !disabled {
		t.Errorf("kill confirmation enabled before the id was typed")
	}
	webRun(t, ctx, "type id", chromedp.SendKeys(chromedp.ID("#confirm-type"), sandboxID))
	webShot(t, ctx, "12-kill-confirm")
	webRun(t, ctx, "confirm kill",
		chromedp.Click(chromedp.ID("#confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(".summary-row")))
	if n := webCount(t, ctx, "#sandboxes-table"); n != 0 && strings.Contains(webText(t, ctx, "#sandboxes-table"), sandboxID) {
		t.Errorf("sandbox %s still listed after kill", sandboxID)
	}
	if s := webText(t, ctx, "#flash"); !strings.Contains(s, "Sandbox "+sandboxID+" was killed") {
		t.Errorf("after the kill the list says %q, want that the sandbox was killed", s)
	}
	webShot(t, ctx, "13-sandboxes-after-kill")
	webCheckPage(t, ctx, "sandboxes-after-kill")
	webWaitText(t, ctx, wsBase+"/audit?tool=e2b_kill_sandbox", "#audit-table", "dashboard")

	// Invite a member.
	webRun(t, ctx, "invite",
		chromedp.Navigate(wsBase+"/settings"), chromedp.WaitVisible(chromedp.ID("#inv-email")),
		chromedp.SendKeys(chromedp.ID("#inv-email"), "member@example.com"),
		chromedp.Click(chromedp.CSS(`form[data-api-path$="/invitations"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#invite-result")))
	acceptURL := webText(t, ctx, "#invite-url")
	webShot(t, ctx, "14-settings-invited")
	webCheckPage(t, ctx, "settings-invited")
	if !strings.HasPrefix(acceptURL, base+"/invite/") {
		t.Fatalf("accept URL = %q", acceptURL)
	}

	// Account settings, from the user menu: change the password (a typo in
	// the repetition and a wrong current password are refused first).
	const newPassword = "another correct horse battery"
	webRun(t, ctx, "account",
		chromedp.Click(chromedp.CSS(".user-menu summary")),
		chromedp.Click(chromedp.CSS(`.user-menu a[href="/app/account"]`)),
		chromedp.WaitVisible(chromedp.ID("#current-password")))
	// Without SMTP_URL nothing waits for a confirmed address (README): the
	// page must not say that keys wait for it, as this person has one.
	if s := webText(t, ctx, "#email-status"); strings.Contains(s, "cannot") || !strings.Contains(s, "you can create MCP keys") {
		t.Errorf("account email status without SMTP_URL = %q, want that keys and invitations work", s)
	}
	webCheckPage(t, ctx, "account")
	webRun(t, ctx, "password typo",
		chromedp.SendKeys(chromedp.ID("#current-password"), password),
		chromedp.SendKeys(chromedp.ID("#new-password"), newPassword),
		chromedp.SendKeys(chromedp.ID("#new-password-again"), newPassword+"x"),
		chromedp.Click(chromedp.CSS(`#password-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#password-form [data-form-error]`)))
	if s := webText(t, ctx, "#password-form [data-form-error]"); !strings.Contains(s, "differ") {
		t.Errorf("password typo error = %q", s)
	}
	webRun(t, ctx, "wrong current password",
		webClear("#current-password"), webClear("#new-password-again"),
		chromedp.SendKeys(chromedp.ID("#current-password"), "not my password"),
		chromedp.SendKeys(chromedp.ID("#new-password-again"), newPassword),
		chromedp.Click(chromedp.CSS(`#password-form button[type=submit]`)),
		webUntil(`document.querySelector('#password-form [data-form-error]').textContent.includes('current password')`))
	webRun(t, ctx, "change password",
		webClear("#current-password"),
		chromedp.SendKeys(chromedp.ID("#current-password"), password),
		chromedp.Click(chromedp.CSS(`#password-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#password-changed")))
	webShot(t, ctx, "14a-account-password-changed")

	// Create a workspace from the workspace menu.
	webRun(t, ctx, "new workspace",
		chromedp.Navigate(wsBase), chromedp.WaitVisible(chromedp.ID("#recent")),
		chromedp.Click(chromedp.CSS(".ws-switch summary")),
		chromedp.Click(chromedp.CSS(`.ws-switch a[href="/app/account#new-workspace"]`)),
		chromedp.WaitVisible(chromedp.ID("#workspace-name")),
		chromedp.SendKeys(chromedp.ID("#workspace-name"), "Platform team"),
		chromedp.Click(chromedp.CSS(`#workspace-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#next-steps")))
	if loc := webLocation(t, ctx); loc == wsBase || !strings.HasPrefix(loc, base+"/app/w/") {
		t.Errorf("after creating a workspace at %q, want its overview", loc)
	}
	if s := webText(t, ctx, ".ws-name"); s != "Platform team" {
		t.Errorf("workspace menu shows %q, want the new workspace", s)
	}
	webCheckPage(t, ctx, "overview-new-workspace")
	webRun(t, ctx, "open the menus", webUntil(`(document.querySelectorAll('details.menu').forEach(d => d.open = true), true)`))
	webCheckPage(t, ctx, "menus-open")
	webRun(t, ctx, "close the menus", webUntil(`(document.querySelectorAll('details.menu').forEach(d => d.open = false), true)`))

	// Log out; the member signs up through the invitation.
	webRun(t, ctx, "logout",
		chromedp.Click(chromedp.CSS(".user-menu summary")),
		chromedp.Click(chromedp.CSS(`.user-menu button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(".hero")))
	webRun(t, ctx, "invite page", chromedp.Navigate(acceptURL), chromedp.WaitVisible(chromedp.ID("#password")))
	webShot(t, ctx, "15-invite")
	webCheckPage(t, ctx, "invite")
	webRun(t, ctx, "member signup",
		chromedp.SendKeys(chromedp.ID("#password"), password),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#recent")))
	loc = webLocation(t, ctx)
	if loc != wsBase {
		t.Errorf("member landed on %q, want the shared workspace %q", loc, wsBase)
	}
	webCheckPage(t, ctx, "overview-member")
	webRun(t, ctx, "member settings", chromedp.Navigate(wsBase+"/settings"), chromedp.WaitVisible(chromedp.ID("#readonly-notice")))
	if n := webCount(t, ctx, `input[role=switch], #inv-email, form[data-api-path*="/members/"]`); n != 0 {
		t.Errorf("member sees %d admin controls on settings", n)
	}
	webShot(t, ctx, "16-settings-member")
	webCheckPage(t, ctx, "settings-member")

	// The member's view of the other pages.
	for _, p := range []struct{ url, wait, name string }{
		{wsBase + "/keys", "#setup", "keys-member"},
		{wsBase + "/connections", "#status-e2b", "connections-member"},
		{wsBase + "/sandboxes", ".summary-row", "sandboxes-member"},
		{wsBase + "/audit", "#chart-title", "audit-member"}, // (no long filter options for a member)
		{base + "/app/account", "#password", "account-member"},
	} {
		webRun(t, ctx, p.name, chromedp.Navigate(p.url), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		webCheckPage(t, ctx, p.name)
	}
	webRun(t, ctx, "404", chromedp.Navigate(base+webNotFoundPath), chromedp.WaitVisible(chromedp.CSS(".error-page")))
	webShot(t, ctx, "22-not-found")
	webCheckPage(t, ctx, "not-found")

	problems.check(t)
}

// webStartDashboard starts serve on 127.0.0.1:0 behind a front proxy whose
// address is PUBLIC_URL (known before serve starts, as in a real deployment),
// and returns that URL.
func webStartDashboard(t *testing.T, extraEnv map[string]string) string {
	t.Helper()
	dsn := storetest.NewDatabase(t)
	sim := httptest.NewServer(e2bsim.New(e2bsim.Options{}))
	t.Cleanup(sim.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	publicURL := "http://" + ln.Addr().String()
	env := map[string]string{
		"DATABASE_URL": dsn, "ENCRYPTION_KEY": testutil.RandomBase64(32), "JWT_SECRET": testutil.RandomHex(32),
		"E2B_API_URL": sim.URL, "E2B_DASHBOARD_API_URL": sim.URL,
		"LISTEN_ADDR": "127.0.0.1:0", "PUBLIC_URL": publicURL, "LOG_FORMAT": "text", "LOG_LEVEL": "warn",
	}
	maps.Copy(env, extraEnv)
	in := mustServe(t, env)
	backend, _ := url.Parse(in.base)
	front := http.Handler(httputil.NewSingleHostReverseProxy(backend))
	if !webDashboardMounted(t, backend.String()) {
		t.Fatal("serve does not serve the dashboard at /login")
	}
	srv := &http.Server{Handler: front, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return publicURL
}

// webStartJourney starts the dashboard (webStartDashboard, with extraEnv)
// and a browser, closed when the test ends, whose problems are collected
// from its first page on; the journey checks them at its end.
func webStartJourney(t *testing.T, extraEnv map[string]string) (string, context.Context, *webBrowserProblems) {
	t.Helper()
	base := webStartDashboard(t, extraEnv)
	ctx, cancel := webNewBrowser(t)
	t.Cleanup(cancel)
	problems := &webBrowserProblems{}
	problems.listen(ctx)
	return base, ctx, problems
}

func webDashboardMounted(t *testing.T, backend string) bool {
	t.Helper()
	res, err := http.Get(backend + "/login")
	if err != nil {
		t.Fatalf("GET /login: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode == http.StatusOK && bytes.Contains(b, []byte(`data-api-path="/api/v1/auth/login"`))
}

// webNewBrowser starts a headless Chromium (webChromiumPath) for one test,
// with webScreenshotDir ready for its screenshots.
func webNewBrowser(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	testutil.SkipIfShort(t, "Chromium")
	if _, err := os.Stat(webChromiumPath); err != nil {
		t.Fatalf("%s not found: run scripts/ensure-chromium.sh (make test does) to install Debian's chromium", webChromiumPath)
	}
	if err := os.MkdirAll(webScreenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(webChromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, cancelCtx := chromedp.NewContext(allocCtx)
	// The first run starts the browser; it must not carry a timeout, which
	// would stop the browser when it ends.
	if err := chromedp.Do(browserCtx); err != nil {
		cancelCtx()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(browserCtx, 10*time.Minute)
	return ctx, func() { cancelTimeout(); cancelCtx(); cancelAlloc() }
}

// webBrowserProblems collects script exceptions, console errors and CSP
// violations; the journey must have none.
type webBrowserProblems struct {
	mu   sync.Mutex
	list []string
}

func (p *webBrowserProblems) listen(ctx context.Context) {
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if (m.Type == chromedp.ConsoleError || m.IsException()) && !webExpectedHTTPError(m) {
				p.mu.Lock()
				p.list = append(p.list, m.String()+" "+m.URL)
				p.mu.Unlock()
			}
		}
	}()
}

// webNotFoundPath is the page the journey opens to see the 404 page.
const webNotFoundPath = "/app/w/00000000-0000-0000-0000-000000000000"

// webExpectedHTTPError lets through the failed responses the journey causes on
// purpose: API calls it makes fail (a refused E2B key, a short password, a
// wrong current password) and the 404 page it opens. Anything else, such as a
// missing /favicon.ico, a CSP violation or a script error, is a problem.
func webExpectedHTTPError(m chromedp.ConsoleMessage) bool {
	if m.Source != "network" || !regexp.MustCompile(`status of (400|401|403|404|409|422|502)`).MatchString(m.Text) {
		return false
	}
	u, err := url.Parse(m.URL)
	return err == nil && (strings.HasPrefix(u.Path, "/api/v1/") || u.Path == webNotFoundPath)
}

func (p *webBrowserProblems) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.list {
		t.Errorf("browser: %s", m)
	}
}

// webCreateKey creates an MCP key named name on the workspace's keys page
// and returns the key the page shows once.
func webCreateKey(t *testing.T, ctx context.Context, wsBase, name string) string {
	t.Helper()
	webSubmitKey(t, ctx, "create key", wsBase, name, chromedp.WaitVisible(chromedp.ID("#new-key")))
	return webText(t, ctx, "#new-key-value")
}

// webSubmitSignIn fills the email and password of the sign-up or sign-in
// page at pageURL and submits it, then waits for what the step expects (the
// workspace, or a refusal).
func webSubmitSignIn(t *testing.T, ctx context.Context, step, pageURL, email, password string, then chromedp.Action[chromedp.Void]) {
	t.Helper()
	webRun(t, ctx, step,
		chromedp.Navigate(pageURL), chromedp.WaitVisible(chromedp.ID("#email")),
		chromedp.SendKeys(chromedp.ID("#email"), email),
		chromedp.SendKeys(chromedp.ID("#password"), password),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		then)
}

// webSubmitKey submits the keys page's form for a key called name, then
// waits for what the step expects (the new key, or a refusal).
func webSubmitKey(t *testing.T, ctx context.Context, step, wsBase, name string, then chromedp.Action[chromedp.Void]) {
	t.Helper()
	webRun(t, ctx, step,
		chromedp.Navigate(wsBase+"/keys"), chromedp.WaitVisible(chromedp.ID("#key-name")),
		chromedp.SendKeys(chromedp.ID("#key-name"), name),
		chromedp.Click(chromedp.CSS(`#key-form button[type=submit]`)),
		then)
}

func webRun(t *testing.T, ctx context.Context, step string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	stepCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(stepCtx, actions...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		webShot(t, ctx, "failed-"+strings.ReplaceAll(step, " ", "-"))
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("%s (at %s): %v\npage text:\n%s", step, loc, err, body)
	}
}

func webLocation(t *testing.T, ctx context.Context) string {
	t.Helper()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatalf("read the location: %v", err)
	}
	return loc
}

func webText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	webRun(t, ctx, "wait for "+sel, chromedp.WaitReady(chromedp.CSS(sel)))
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// webUntil waits until the expression is true.
func webUntil(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Poll[bool](expr)(ctx, tg)
		return err
	})
}

// webClear empties an input (SetValue refuses the empty string).
func webClear(sel string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(sel)
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(document.querySelector(`+string(q)+`).value = "", true)`)(ctx, tg)
		return err
	})
}

// webCount counts the elements matching sel now, without waiting.
func webCount(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	q, _ := json.Marshal(sel)
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+string(q)+`).length`))
	if err != nil {
		t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

// webWaitText loads a page until the element contains want (for data written
// asynchronously, such as the audit log).
func webWaitText(t *testing.T, ctx context.Context, pageURL, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		webRun(t, ctx, "load "+pageURL, chromedp.Navigate(pageURL), chromedp.WaitReady(chromedp.CSS("#main")))
		if webCount(t, ctx, sel) > 0 {
			if got = webText(t, ctx, sel); strings.Contains(got, want) {
				return
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("%s %s = %q, want it to contain %q", pageURL, sel, got, want)
}

// webWaitFor loads a page until an element matching sel is on it. With more
// than one instance (see webFallbackDashboard) a change made through one
// reaches the other's cache a moment later, as between replicas.
func webWaitFor(t *testing.T, ctx context.Context, pageURL, sel string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		webRun(t, ctx, "load "+pageURL, chromedp.Navigate(pageURL), chromedp.WaitReady(chromedp.CSS("#main")))
		if webCount(t, ctx, sel) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no %s", pageURL, sel)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func webShot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	webShotWith(t, ctx, name, chromedp.FullScreenshot(100))
}

// webShotViewport saves what the screen shows (for the phone width, where a
// full page is too tall to read).
func webShotViewport(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	webShotWith(t, ctx, name, chromedp.CaptureScreenshot())
}

func webShotWith(t *testing.T, ctx context.Context, name string, capture chromedp.Action[[]byte]) {
	t.Helper()
	shotCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	// From the top, so that the sticky header is where a person sees it.
	_, _ = chromedp.Run(shotCtx, chromedp.Evaluate[bool](`(window.scrollTo(0, 0), true)`))
	png, err := chromedp.Run(shotCtx, capture)
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(webScreenshotDir, name+".png"), png, 0o644); err != nil {
		t.Errorf("save screenshot: %v", err)
	}
}

// webBearer adds the MCP key to every request, as a client configured with the
// snippet's header does.
type webBearer struct {
	key  string
	base http.RoundTripper
}

func (b webBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.key != "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return b.base.RoundTrip(r)
}

func webMCPSession(t *testing.T, endpoint, key string) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := sdk.NewClient(&sdk.Implementation{Name: "web-e2e", Version: "1"}, nil)
	s, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: webBearer{key: key, base: http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatalf("MCP connect %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func webMCPCreateSandbox(t *testing.T, endpoint, key string) string {
	t.Helper()
	s := webMCPSession(t, endpoint, key)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "e2b_create_sandbox",
		Arguments: map[string]any{"template_id": "base", "timeout": 900, "metadata": map[string]string{"owner": "web-e2e"}}})
	if err != nil {
		t.Fatalf("CallTool(e2b_create_sandbox) err = %v", err)
	}
	if res.IsError {
		t.Fatalf("e2b_create_sandbox failed: %s", testutil.ToolText(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out struct {
		SandboxID string `json:"sandbox_id"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.SandboxID == "" {
		t.Fatalf("e2b_create_sandbox output = %s, want a sandbox_id", b)
	}
	return out.SandboxID
}

// webMCPListTools connects with the connector URL alone (no header), as
// URL-only clients do.
func webMCPListTools(t *testing.T, connectorURL string) {
	t.Helper()
	s := webMCPSession(t, connectorURL, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools via the connector URL err = %v", err)
	}
	for _, tool := range res.Tools {
		if tool.Name == "e2b_kill_sandbox" {
			t.Errorf("e2b_kill_sandbox listed while it is off")
		}
	}
	if len(res.Tools) == 0 {
		t.Errorf("no tools via the connector URL")
	}
}
