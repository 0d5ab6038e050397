package main

// OAuth to upstream servers, end to end: gateway A (the one under test)
// adds gateway B (a second deployment, its /mcp protected by B's own
// authorization server) as an OAuth server; an admin of A connects it in
// the browser (B's sign-in and consent, A's callback), calls go through
// with B's tokens, an expired access token is refreshed, a grant revoked at
// B turns into "reconnect needed", and a reconnect mends it. No token of B
// shows in A's logs, answers, pages or audit rows.

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// newFrontedGateway runs one replica of serve for e behind a front proxy
// whose address is PUBLIC_URL, with env added; it returns the front.
func newFrontedGateway(t *testing.T, e *e2eEnv, host string, env map[string]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	front := "http://" + host + ":" + port
	cfg := map[string]string{
		"DATABASE_URL": e.dsn, "ENCRYPTION_KEY": e.encKey, "JWT_SECRET": e.jwtSecret,
		"LISTEN_ADDR": "127.0.0.1:0", "PUBLIC_URL": front,
		"E2B_API_URL": e.simURL, "E2B_DASHBOARD_API_URL": e.simURL, "LOG_FORMAT": "json", "LOG_LEVEL": "debug",
	}
	for k, v := range env {
		cfg[k] = v
	}
	in := mustServe(t, cfg)
	e.replicas = append(e.replicas, &e2eReplica{log: in.logs, watch: in.watch, url: in.base, stop: func() { _ = in.stop(t) }})
	backend, _ := url.Parse(in.base)
	srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(backend), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return front
}

// upstreamOAuthFixture: B, the upstream (bob has a workspace there with an
// E2B team), and A, whose PUBLIC_URL is "localhost" so that a browser's
// cookies for the two (B on 127.0.0.1) stay apart.
type upstreamOAuthFixture struct {
	b      *oauthEnv
	bob    *e2eUser
	a      *e2eEnv
	aFront string
	alice  *e2eUser
	wsA    string
}

func newUpstreamOAuthFixture(t *testing.T) *upstreamOAuthFixture {
	t.Helper()
	f := &upstreamOAuthFixture{b: newOAuthEnv(t)}
	f.bob, _ = f.b.signupWithE2B(f.b.front, "bob-upstream@example.com")
	f.a = newE2EEnv(t, 0)
	f.aFront = newFrontedGateway(t, f.a, "localhost", map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8,::1/128"})
	f.alice = f.a.signup(f.aFront, "alice-gw@example.com", "")
	f.wsA = f.alice.personal
	return f
}

// connect runs Connect as u on A (the answer's authorize_url), consents
// at B as bob and returns the callback URL B sent the browser to.
func (f *upstreamOAuthFixture) authorize(t *testing.T, u *e2eUser, ws, server string) *url.URL {
	t.Helper()
	var c struct {
		AuthorizeURL string `json:"authorize_url"`
	}
	u.decode(u.api(http.MethodPost, "/api/v1/workspaces/"+ws+"/servers/"+server+"/connect", nil, http.StatusOK), &c)
	if !strings.HasPrefix(c.AuthorizeURL, f.b.front+"/oauth/authorize?") {
		t.Fatalf("authorize_url = %q, want B's authorization endpoint", c.AuthorizeURL)
	}
	q, _ := url.Parse(c.AuthorizeURL)
	if q.Query().Get("code_challenge_method") != "S256" || q.Query().Get("resource") != f.b.front+"/mcp" || q.Query().Get("state") == "" {
		t.Fatalf("authorization request %v lacks PKCE S256, the resource or a state", q.Query())
	}
	loc, status, body := f.b.consent(t, f.bob, c.AuthorizeURL, f.bob.personal, "full", "allow")
	if loc == nil {
		t.Fatalf("consent at B = %d %s, want a redirect", status, body)
	}
	if !strings.HasPrefix(loc.String(), f.aFront+"/oauth/upstream/callback?") {
		t.Fatalf("B sent the browser to %s, want A's callback", e2eRedactQuery(loc))
	}
	return loc
}

// openCallback opens the callback URL in u's browser and returns the status
// and where A sent it.
func openCallback(t *testing.T, u *e2eUser, cb *url.URL) (int, string) {
	t.Helper()
	hc := &http.Client{Jar: u.client.Jar, Transport: u.client.Transport, Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(cb.String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusSeeOther {
		return resp.StatusCode, resp.Header.Get("Location")
	}
	return resp.StatusCode, string(body)
}

type e2eServerOAuth struct {
	Credential string `json:"credential"`
	ToolCount  int    `json:"tool_count"`
	OAuth      *struct {
		Issuer       string `json:"issuer"`
		Registration string `json:"registration"`
		State        string `json:"state"`
		ConnectURL   string `json:"connect_url"`
	} `json:"oauth"`
}

func (f *upstreamOAuthFixture) server(u *e2eUser, ws, name string) e2eServerOAuth {
	u.t.Helper()
	var s e2eServerOAuth
	u.decode(u.api(http.MethodGet, "/api/v1/workspaces/"+ws+"/servers/"+name, nil, http.StatusOK), &s)
	return s
}

// bTokens counts the tokens leaked from B: B's access tokens, refresh
// tokens and codes have prefixes of their own.
func bTokenIn(s string) bool {
	for _, p := range []string{"mcpat_", "mcprt_", "mcpac_"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

func TestUpstreamOAuthE2E(t *testing.T) {
	f := newUpstreamOAuthFixture(t)
	a, alice, ws := f.a, f.alice, f.wsA
	upURL := f.b.front + "/mcp"

	// Added as oauth: the gateway read B's metadata and registered itself
	// by DCR (A's PUBLIC_URL is not https, so no metadata document).
	alice.api(http.MethodPost, "/api/v1/workspaces/"+ws+"/servers", map[string]any{"name": "up", "url": upURL,
		"credential": "oauth"}, http.StatusCreated)
	s := f.server(alice, ws, "up")
	if s.Credential != "oauth" || s.OAuth == nil || s.OAuth.Issuer != f.b.front || s.OAuth.Registration != "dcr" ||
		s.OAuth.State != "not_connected" {
		t.Fatalf("server = %+v %+v, want oauth at B, registered by DCR, not connected", s, s.OAuth)
	}
	cs := a.session(t, f.aFront+"/mcp", e2eBearer(frontedKey(alice, ws)), "", nil)

	t.Run("not connected: the page to connect is named", func(t *testing.T) {
		// No tools are discovered before a grant exists, so there is no
		// call to make yet; the dashboard and the API name the page.
		page := f.aFront + "/app/w/" + ws + "/servers/up"
		if s.OAuth.ConnectURL != page || s.ToolCount != 0 {
			t.Errorf("connect_url = %q with %d tools, want %q and none", s.OAuth.ConnectURL, s.ToolCount, page)
		}
	})

	cb := f.authorize(t, alice, ws, "up")
	t.Run("connect", func(t *testing.T) {
		status, loc := openCallback(t, alice, cb)
		if status != http.StatusSeeOther || loc != "/app/w/"+ws+"/servers/up?connected=1" {
			t.Fatalf("callback = %d %s, want a redirect to the server page", status, loc)
		}
		s := f.server(alice, ws, "up")
		if s.OAuth.State != "connected" || s.ToolCount == 0 {
			t.Fatalf("after connecting: state %q, %d tools, want connected with B's tools", s.OAuth.State, s.ToolCount)
		}
	})

	t.Run("state replayed is refused", func(t *testing.T) {
		if status, body := openCallback(t, alice, cb); status != http.StatusBadRequest || !strings.Contains(body, "not valid") {
			t.Errorf("replayed callback = %d %s, want 400", status, body)
		}
	})

	call := func(t *testing.T) string {
		t.Helper()
		res := e2eCall(t, cs, "up_e2b_list_sandboxes", map[string]any{})
		if res.IsError {
			return testutil.ToolText(res)
		}
		return ""
	}
	t.Run("a call goes through with B's token", func(t *testing.T) {
		if msg := call(t); msg != "" {
			t.Fatalf("up_e2b_list_sandboxes = error %q", msg)
		}
	})

	db := a.dbConn(t)
	version := func() int64 {
		var v int64
		if err := db.QueryRow(context.Background(), `SELECT version FROM upstream_oauth_grants WHERE workspace_id = $1`, ws).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	t.Run("an expiring access token is refreshed first", func(t *testing.T) {
		before := version()
		if _, err := db.Exec(context.Background(), `UPDATE upstream_oauth_grants SET expires_at = now() - interval '1 minute' WHERE workspace_id = $1`, ws); err != nil {
			t.Fatal(err)
		}
		if msg := call(t); msg != "" {
			t.Fatalf("call after expiry = error %q", msg)
		}
		if v := version(); v != before+1 {
			t.Errorf("grant version = %d, want %d (one refresh)", v, before+1)
		}
		// B rotated the refresh token: a second refresh with the new one
		// works too (reusing the old one would have revoked the grant).
		if _, err := db.Exec(context.Background(), `UPDATE upstream_oauth_grants SET expires_at = now() WHERE workspace_id = $1`, ws); err != nil {
			t.Fatal(err)
		}
		if msg := call(t); msg != "" {
			t.Fatalf("second call after expiry = error %q", msg)
		}
	})

	t.Run("revoked at B: reconnect needed", func(t *testing.T) {
		for _, g := range f.bob.grants(f.bob.personal) {
			f.bob.api(http.MethodDelete, "/api/v1/workspaces/"+f.bob.personal+"/grants/"+g.ID, nil, http.StatusNoContent)
		}
		msg := call(t)
		if !strings.Contains(msg, "admin must reconnect") || !strings.Contains(msg, f.aFront+"/app/w/"+ws+"/servers/up") {
			t.Fatalf("call after revocation = %q, want reconnect needed with the page", msg)
		}
		if s := f.server(alice, ws, "up"); s.OAuth.State != "reconnect_needed" {
			t.Errorf("state = %q, want reconnect_needed", s.OAuth.State)
		}
		alice.auditUntil(ws, "", func(items []e2eAuditItem) bool {
			for _, it := range items {
				if it.Action == "server.refresh_failed" && it.Outcome == "error" {
					return true
				}
			}
			return false
		})
		page := webGet(t, alice, "/app/w/"+ws+"/servers/up")
		if !strings.Contains(page, "Reconnect") || !strings.Contains(page, `data-oauth-state="reconnect_needed"`) {
			t.Errorf("the server page shows no Reconnect button")
		}
	})

	t.Run("reconnect", func(t *testing.T) {
		if status, loc := openCallback(t, alice, f.authorize(t, alice, ws, "up")); status != http.StatusSeeOther || !strings.HasSuffix(loc, "connected=1") {
			t.Fatalf("reconnect callback = %d %s", status, loc)
		}
		if msg := call(t); msg != "" {
			t.Fatalf("call after reconnecting = error %q", msg)
		}
	})

	t.Run("a state from another session is refused", func(t *testing.T) {
		cb := f.authorize(t, alice, ws, "up")
		// The same person signed in in another browser.
		jar, _ := cookiejar.New(nil)
		other := &e2eUser{env: a, t: t, email: alice.email, base: f.aFront,
			client: &http.Client{Jar: jar, Transport: alice.client.Transport, Timeout: 30 * time.Second}}
		other.api(http.MethodPost, "/api/v1/auth/login", map[string]any{"email": alice.email, "password": e2ePassword}, http.StatusOK)
		if status, body := openCallback(t, other, cb); status != http.StatusBadRequest {
			t.Errorf("callback in another session = %d %s, want 400", status, body)
		}
		// The session that started it still finishes it.
		if status, loc := openCallback(t, alice, cb); status != http.StatusSeeOther || !strings.HasSuffix(loc, "connected=1") {
			t.Errorf("callback in its own session = %d %s", status, loc)
		}
	})

	t.Run("another workspace neither sees nor uses the grant", func(t *testing.T) {
		carol := a.signup(f.aFront, "carol-gw@example.com", "")
		if st, _ := carol.do(context.Background(), http.MethodGet, "/api/v1/workspaces/"+ws+"/servers/up", nil); st != http.StatusNotFound {
			t.Errorf("carol reads alice's server: %d", st)
		}
		if st, _ := carol.do(context.Background(), http.MethodPost, "/api/v1/workspaces/"+ws+"/servers/up/connect", nil); st != http.StatusNotFound {
			t.Errorf("carol connects alice's server: %d", st)
		}
		if st, _ := carol.do(context.Background(), http.MethodDelete, "/api/v1/workspaces/"+ws+"/servers/up/connection", nil); st != http.StatusNotFound {
			t.Errorf("carol disconnects alice's server: %d", st)
		}
		carol.api(http.MethodPost, "/api/v1/workspaces/"+carol.personal+"/servers", map[string]any{"name": "up", "url": upURL,
			"credential": "oauth"}, http.StatusCreated)
		if s := f.server(carol, carol.personal, "up"); s.OAuth.State != "not_connected" || s.ToolCount != 0 {
			t.Errorf("carol's own server = %q with %d tools, want not connected", s.OAuth.State, s.ToolCount)
		}
		var n int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM upstream_oauth_grants WHERE workspace_id = $1`, carol.personal).Scan(&n); err != nil || n != 0 {
			t.Errorf("carol's workspace holds %d grants (err %v)", n, err)
		}
	})

	t.Run("disconnect", func(t *testing.T) {
		grantsAtB := len(f.bob.grants(f.bob.personal))
		alice.api(http.MethodDelete, "/api/v1/workspaces/"+ws+"/servers/up/connection", nil, http.StatusNoContent)
		if s := f.server(alice, ws, "up"); s.OAuth.State != "not_connected" {
			t.Errorf("state after disconnect = %q", s.OAuth.State)
		}
		if n := len(f.bob.grants(f.bob.personal)); n != grantsAtB-1 {
			t.Errorf("grants at B = %d after disconnect, want %d (revoked there)", n, grantsAtB-1)
		}
		if msg := call(t); !strings.Contains(msg, "not connected") {
			t.Errorf("call after disconnect = %q, want not connected", msg)
		}
	})

	t.Run("the client ID metadata document", func(t *testing.T) {
		resp, err := http.Get(f.aFront + "/oauth/upstream-client.json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct {
			ClientID     string   `json:"client_id"`
			RedirectURIs []string `json:"redirect_uris"`
			AuthMethod   string   `json:"token_endpoint_auth_method"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET the document = %d, %v", resp.StatusCode, err)
		}
		if doc.ClientID != f.aFront+"/oauth/upstream-client.json" || len(doc.RedirectURIs) != 1 ||
			doc.RedirectURIs[0] != f.aFront+"/oauth/upstream/callback" || doc.AuthMethod != "none" {
			t.Errorf("document = %+v", doc)
		}
	})

	t.Run("no token of B anywhere in A", func(t *testing.T) {
		page := webGet(t, alice, "/app/w/"+ws+"/servers/up")
		raw := alice.api(http.MethodGet, "/api/v1/workspaces/"+ws+"/servers/up", nil, http.StatusOK)
		auditRaw, _ := json.Marshal(alice.audit(ws, ""))
		for what, s := range map[string]string{"page": page, "API": string(raw), "audit": string(auditRaw), "log": a.replicas[0].log.String()} {
			if bTokenIn(s) {
				t.Errorf("the %s holds one of B's tokens or codes", what)
			}
		}
		var rows string
		if err := db.QueryRow(context.Background(), `SELECT coalesce(string_agg(a::text, ' '), '') FROM audit_log a`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if bTokenIn(rows) {
			t.Error("an audit row holds one of B's tokens or codes")
		}
	})
}

// frontedKey creates a full MCP key in ws (createKey expects e2ePublicURL).
func frontedKey(u *e2eUser, ws string) string {
	u.t.Helper()
	status, raw := u.do(e2eNoRecord(context.Background()), http.MethodPost, "/api/v1/workspaces/"+ws+"/keys", map[string]any{"name": "k"})
	if status != http.StatusCreated {
		u.t.Fatalf("create key = %d", status)
	}
	var k e2eKey
	u.decode(raw, &k)
	u.env.rec.secret(k.Key, "MCP key")
	return k.Key
}

// webGet returns a dashboard page as u sees it.
func webGet(t *testing.T, u *e2eUser, path string) string {
	t.Helper()
	resp, err := u.client.Get(u.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", path, resp.StatusCode)
	}
	return string(b)
}
