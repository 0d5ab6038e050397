package main

// End-to-end tests of the OAuth 2.1 authorization server: the
// real program (two replicas of serve on one database, behind a front proxy
// whose address is PUBLIC_URL), the E2B simulator, and independent OAuth
// clients: go-sdk's AuthorizationCodeHandler (discovery, DCR or a client ID
// metadata document, PKCE, resource) with headless Chromium signing in and
// consenting, and golang.org/x/oauth2 with its PKCE helpers for the refusals.

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/mcpgate/mcpgate/internal/oauth"
)

// oauthEnv is a deployment whose PUBLIC_URL is a front proxy in this
// process, so that OAuth clients can check that the resource they reach is
// the one the metadata names.
type oauthEnv struct {
	*e2eEnv
	front string
	// cimd is a local TLS server hosting client ID metadata documents;
	// serve may reach it only through the test-only option.
	cimd     *httptest.Server
	cimdMu   sync.Mutex
	cimdDocs map[string]string
}

func newOAuthEnv(t *testing.T) *oauthEnv {
	t.Helper()
	o := &oauthEnv{e2eEnv: newE2EEnv(t, 0), cimdDocs: map[string]string{}}
	o.cimd = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.cimdMu.Lock()
		doc, ok := o.cimdDocs[r.URL.Path]
		o.cimdMu.Unlock()
		switch {
		case r.URL.Path == "/redirect.json":
			http.Redirect(w, r, "/client.json", http.StatusFound)
		case !ok:
			http.NotFound(w, r)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, doc)
		}
	}))
	t.Cleanup(o.cimd.Close)
	pool := x509.NewCertPool()
	pool.AddCert(o.cimd.Certificate())
	testOAuthCIMD = oauth.CIMDOptions{AllowAddr: func(a netip.Addr) bool { return a.IsLoopback() }, RootCAs: pool}
	t.Cleanup(func() { testOAuthCIMD = oauth.CIMDOptions{} })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.front = "http://" + ln.Addr().String()
	for range 2 {
		env := map[string]string{
			"DATABASE_URL": o.dsn, "ENCRYPTION_KEY": o.encKey, "JWT_SECRET": o.jwtSecret,
			"LISTEN_ADDR": "127.0.0.1:0", "PUBLIC_URL": o.front,
			"E2B_API_URL": o.simURL, "E2B_DASHBOARD_API_URL": o.simURL, "LOG_FORMAT": "json", "LOG_LEVEL": "debug",
		}
		in := mustServe(t, env)
		o.replicas = append(o.replicas, &e2eReplica{log: in.logs, watch: in.watch, url: in.base, stop: func() { _ = in.stop(t) }})
	}
	backend, _ := url.Parse(o.replicas[0].url)
	srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(backend), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return o
}

func (o *oauthEnv) setCIMD(path string, doc any) string {
	b, _ := json.Marshal(doc)
	o.cimdMu.Lock()
	o.cimdDocs[path] = string(b)
	o.cimdMu.Unlock()
	return o.cimd.URL + path
}

// callback is a native client's loopback redirect listener.
type callback struct {
	url string
	got chan url.Values
}

func newCallback(t *testing.T) *callback {
	t.Helper()
	c := &callback{got: make(chan url.Values, 4)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r) // the browser's favicon request is no answer
			return
		}
		c.got <- r.URL.Query()
		_, _ = io.WriteString(w, "<!doctype html><title>done</title><p id=done>You can close this window.</p>")
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL + "/callback"
	return c
}

func (c *callback) wait(t *testing.T) url.Values {
	t.Helper()
	select {
	case q := <-c.got:
		return q
	case <-time.After(30 * time.Second):
		t.Fatal("the browser never came back to the redirect URI")
		return nil
	}
}

// register registers a client by DCR with oauthex, as MCP clients do.
func (o *oauthEnv) register(t *testing.T, name string, redirects ...string) string {
	t.Helper()
	res, err := oauthex.RegisterClient(context.Background(), o.front+"/oauth/register",
		&oauthex.ClientRegistrationMetadata{ClientName: name, RedirectURIs: redirects, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}}, nil)
	if err != nil {
		t.Fatalf("RegisterClient() err = %v", err)
	}
	return res.ClientID
}

func (o *oauthEnv) config(clientID, redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: clientID, RedirectURL: redirect, Scopes: []string{"mcp:tools"},
		Endpoint: oauth2.Endpoint{AuthURL: o.front + "/oauth/authorize", TokenURL: o.front + "/oauth/token",
			AuthStyle: oauth2.AuthStyleInParams}}
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// consent opens an authorization URL as a signed-in dashboard user and
// submits the consent form; it returns where the gateway sent the browser
// (the client's redirect URI, or the status of a page shown instead).
func (o *oauthEnv) consent(t *testing.T, u *e2eUser, authURL, ws, access, decision string) (*url.URL, int, string) {
	t.Helper()
	hc := &http.Client{Jar: u.client.Jar, Transport: u.client.Transport, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusSeeOther {
		loc, _ := resp.Location()
		return loc, resp.StatusCode, ""
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, string(body)
	}
	form := url.Values{"workspace": {ws}, "access": {access}, "decision": {decision}}
	for _, m := range hiddenField.FindAllStringSubmatch(string(body), -1) {
		form.Set(html.UnescapeString(m[1]), html.UnescapeString(m[2]))
	}
	if form.Get("csrf_token") == "" {
		t.Fatalf("consent page has no CSRF field:\n%s", body)
	}
	resp, err = hc.PostForm(o.front+"/oauth/authorize", form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, resp.StatusCode, string(body)
	}
	loc, _ := resp.Location()
	return loc, resp.StatusCode, ""
}

// code runs the authorization step with PKCE and returns the code and
// verifier.
func (o *oauthEnv) code(t *testing.T, u *e2eUser, cfg *oauth2.Config, ws, access string, extra ...oauth2.AuthCodeOption) (string, string) {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	opts := append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier),
		oauth2.SetAuthURLParam("resource", o.front+"/mcp")}, extra...)
	loc, status, body := o.consent(t, u, cfg.AuthCodeURL("st4te", opts...), ws, access, "allow")
	if loc == nil {
		t.Fatalf("consent = %d %s, want a redirect", status, body)
	}
	q := loc.Query()
	if q.Get("code") == "" || q.Get("state") != "st4te" || q.Get("iss") != o.front {
		t.Fatalf("redirect = %s, want a code, the state and the issuer", e2eRedactQuery(loc))
	}
	o.rec.secret(q.Get("code"), "authorization code")
	return q.Get("code"), verifier
}

func (o *oauthEnv) exchange(cfg *oauth2.Config, code, verifier string) (*oauth2.Token, error) {
	return cfg.Exchange(context.Background(), code, oauth2.VerifierOption(verifier),
		oauth2.SetAuthURLParam("resource", o.front+"/mcp"))
}

func (o *oauthEnv) mustToken(t *testing.T, u *e2eUser, cfg *oauth2.Config, ws, access string) *oauth2.Token {
	t.Helper()
	code, verifier := o.code(t, u, cfg, ws, access)
	tok, err := o.exchange(cfg, code, verifier)
	if err != nil {
		t.Fatalf("Exchange() err = %v", err)
	}
	o.rec.secret(tok.AccessToken, "access token")
	o.rec.secret(tok.RefreshToken, "refresh token")
	return tok
}

// mcpStatus is the status of an initialize on endpoint with the bearer.
func (o *oauthEnv) mcpStatus(t *testing.T, endpoint, bearer string) int {
	t.Helper()
	resp, _ := o.rawMCP(t, endpoint, e2eBearer(bearer), "")
	return resp.StatusCode
}

func e2eRedactQuery(u *url.URL) string {
	c := *u
	q := c.Query()
	if q.Has("code") {
		q.Set("code", "[redacted]")
	}
	c.RawQuery = q.Encode()
	return c.String()
}

func wantOAuthError(t *testing.T, err error, code string) {
	t.Helper()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != code {
		t.Fatalf("err = %v, want OAuth error %q", err, code)
	}
}

// e2eGrant is an OAuth grant as the JSON API lists it.
type e2eGrant struct {
	ID         string `json:"id"`
	ClientName string `json:"client_name"`
	Scope      string `json:"scope"`
	UserEmail  string `json:"user_email"`
}

// grants lists the grants of ws that u sees, newest first.
func (u *e2eUser) grants(ws string) []e2eGrant {
	u.t.Helper()
	var body struct {
		Grants []e2eGrant `json:"grants"`
	}
	u.decode(u.api(http.MethodGet, "/api/v1/workspaces/"+ws+"/grants", nil, http.StatusOK), &body)
	return body.Grants
}

// grantOf returns the id of the newest grant of ws to the client named
// client, or "".
func (u *e2eUser) grantOf(ws, client string) string {
	u.t.Helper()
	for _, g := range u.grants(ws) {
		if g.ClientName == client {
			return g.ID
		}
	}
	return ""
}

// TestOAuthEndToEnd runs the OAuth server on the real program: discovery,
// both kinds of client registration, sign-in and consent, every refusal of
// the flow, refresh rotation, revokes across replicas, and no secret in the
// logs.
func TestOAuthEndToEnd(t *testing.T) {
	o := newOAuthEnv(t)
	rA, rB := o.replicas[0], o.replicas[1]
	alice, teamA := o.signupWithE2B(o.front, "alice@example.com")
	bob, _ := o.signupWithE2B(o.front, "bob@example.com")
	wsA := alice.personal
	o.simSandbox(teamA, map[string]any{"templateID": "base"})

	t.Run("Discovery", func(t *testing.T) {
		resp, _ := o.rawMCP(t, o.front+"/mcp", nil, "")
		want := `Bearer resource_metadata="` + o.front + `/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
			t.Fatalf("no credential: %d %q, want 401 %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
		}
		// Each document describes the resource its URL was made from
		// (RFC 9728 §3.3; the path-less one once said …/mcp), which
		// go-sdk checks.
		for path, resource := range map[string]string{"/.well-known/oauth-protected-resource": o.front,
			"/.well-known/oauth-protected-resource/mcp": o.front + "/mcp"} {
			prm, err := oauthex.GetProtectedResourceMetadata(context.Background(), o.front+path, resource, nil)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if !slices.Equal(prm.AuthorizationServers, []string{o.front}) || !slices.Contains(prm.ScopesSupported, "mcp:tools") {
				t.Errorf("%s = %+v", path, prm)
			}
		}
		// A connector URL with a bad key is not an OAuth resource: a plain
		// 401 (before the fix, it pointed to /mcp's metadata).
		resp, _ = o.rawMCP(t, o.front+"/c/mcpg_notakey/mcp", nil, "")
		if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || strings.Contains(got, "resource_metadata") {
			t.Errorf("connector URL with a bad key: %d %q, want a 401 without OAuth hints", resp.StatusCode, got)
		}
		asm, err := auth.GetAuthServerMetadata(context.Background(), o.front, nil)
		if err != nil || asm == nil {
			t.Fatalf("GetAuthServerMetadata() = %v, %v", asm, err)
		}
		if !slices.Equal(asm.CodeChallengeMethodsSupported, []string{"S256"}) || !asm.ClientIDMetadataDocumentSupported ||
			asm.RegistrationEndpoint != o.front+"/oauth/register" || asm.RevocationEndpoint != o.front+"/oauth/revoke" {
			t.Errorf("server metadata = %+v", asm)
		}
	})

	t.Run("KeysUntouched", func(t *testing.T) {
		status, raw := alice.with(t).do(e2eNoRecord(context.Background()), http.MethodPost, "/api/v1/workspaces/"+wsA+"/keys",
			map[string]any{"name": "header key"})
		var key e2eKey
		if status != http.StatusCreated || json.Unmarshal(raw, &key) != nil || !strings.HasPrefix(key.Key, "mcpg_") {
			t.Fatalf("create key = %d", status)
		}
		o.rec.secret(key.Key, "MCP key")
		for _, version := range []string{"", "2025-11-25"} {
			cs := o.session(t, o.front+"/mcp", e2eBearer(key.Key), version, nil)
			e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
			cs = o.session(t, o.front+"/mcp", http.Header{"X-Api-Key": {key.Key}}, version, nil)
			e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
			cs = o.session(t, o.front+"/c/"+key.Key+"/mcp", nil, version, nil)
			e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
		}
	})

	t.Run("Browser", func(t *testing.T) {
		bctx, cancel := webNewBrowser(t)
		defer cancel()
		// Chromium signs alice in on the first authorization and consents;
		// the second finds her signed in.
		signedIn := false
		var fetcherOf func(cb *callback, accessOf func() string) auth.AuthorizationCodeFetcher
		fetcher := func(cb *callback, access string) auth.AuthorizationCodeFetcher {
			return fetcherOf(cb, func() string { return access })
		}
		fetcherOf = func(cb *callback, accessOf func() string) auth.AuthorizationCodeFetcher {
			return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
				access := accessOf()
				webRun(t, bctx, "open the authorization URL", chromedp.Navigate(args.URL))
				if !signedIn {
					// The login page says which gateway and which app
					// (before the fix, it said only "Log in").
					webRun(t, bctx, "login page", chromedp.WaitVisible(chromedp.ID("#email")))
					if got := webText(t, bctx, "#login-app"); !strings.Contains(got, "E2E native client") {
						t.Errorf("the login page during OAuth says %q, want the app's name", got)
					}
					if got := webText(t, bctx, "#login-gateway"); !strings.Contains(got, strings.TrimPrefix(o.front, "http://")) {
						t.Errorf("the login page during OAuth names gateway %q, want %s", got, o.front)
					}
					webCheckPage(t, bctx, "oauth-login")
					webRun(t, bctx, "sign in",
						chromedp.WaitVisible(chromedp.ID("#email")),
						chromedp.SendKeys(chromedp.ID("#email"), alice.email),
						chromedp.SendKeys(chromedp.ID("#password"), e2ePassword),
						chromedp.Click(chromedp.CSS(`button[type=submit]`)))
					signedIn = true
				}
				webRun(t, bctx, "consent page", chromedp.WaitVisible(chromedp.ID("#consent-form")))
				webShot(t, bctx, "oauth-consent-"+access)
				webCheckPage(t, bctx, "oauth-consent-"+access) // accessibility and layout at 1280 and 390 px, screenshots
				// What a person needs to trust it, and nothing that leads
				// away from the flow.
				for sel, want := range map[string]string{"#consent-gateway": strings.TrimPrefix(o.front, "http://"),
					"#consent-resource": o.front + "/mcp", "#consent-asks": "access", "#consent-known": "",
					".flow-origin": strings.TrimPrefix(o.front, "http://")} {
					if got := webText(t, bctx, sel); !strings.Contains(got, want) {
						t.Errorf("consent %s = %q, want %q", sel, got, want)
					}
				}
				if n, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('header a, footer a').length`)); n != 0 {
					t.Errorf("the consent page's header or footer has %d links leading away from the flow", n)
				}
				q, _ := json.Marshal(access)
				webRun(t, bctx, "choose and allow", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
					_, err := chromedp.Evaluate[bool](`(document.querySelector('input[name=access][value=' + `+string(q)+` + ']').checked = true, true)`)(ctx, tg)
					return err
				}), chromedp.Click(chromedp.ID("#consent-allow")), chromedp.WaitVisible(chromedp.ID("#done")))
				v := cb.wait(t)
				o.rec.secret(v.Get("code"), "authorization code")
				return &auth.AuthorizationResult{Code: v.Get("code"), State: v.Get("state"), Iss: v.Get("iss")}, nil
			}
		}
		connect := func(t *testing.T, h *auth.AuthorizationCodeHandler, version string) *mcp.ClientSession {
			cs, err := e2eConnect(t, &mcp.StreamableClientTransport{Endpoint: o.front + "/mcp", OAuthHandler: h, MaxRetries: -1},
				version, nil, 90*time.Second)
			if err != nil {
				t.Fatalf("Connect() with OAuth err = %v", err)
			}
			return cs
		}

		t.Run("DCR", func(t *testing.T) {
			cb := newCallback(t)
			h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
				DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
					ClientName: "E2E native client", RedirectURIs: []string{cb.url}, TokenEndpointAuthMethod: "none"}},
				AuthorizationCodeFetcher: fetcher(cb, "full"), RequestRefreshToken: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			cs := connect(t, h, "")
			out := e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
			if data, _ := out["data"].([]any); len(data) != 1 {
				t.Errorf("list_sandboxes through OAuth = %v, want alice's one sandbox", out)
			}
			// Both protocol generations take the same token.
			ts, _ := h.TokenSource(context.Background())
			tok, err := ts.Token()
			if err != nil {
				t.Fatal(err)
			}
			o.rec.secret(tok.AccessToken, "access token")
			legacy := o.session(t, o.front+"/mcp", e2eBearer(tok.AccessToken), "2025-11-25", nil)
			e2eCallOK(t, legacy, "e2b_list_sandboxes", nil)
			// The audit row names the grant and its client.
			grants := alice.with(t).grants(wsA)
			if len(grants) != 1 || grants[0].Scope != "full" {
				t.Fatalf("grants = %+v, want the one full grant", grants)
			}
			deadline := time.Now().Add(15 * time.Second)
			for {
				raw := alice.with(t).api(http.MethodGet, "/api/v1/workspaces/"+wsA+"/audit?tool=e2b_list_sandboxes", nil, http.StatusOK)
				if strings.Contains(string(raw), `"grant_id":"`+grants[0].ID+`"`) &&
					strings.Contains(string(raw), `"client_name":"E2E native client"`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no audit row names grant %s and its client: %s", grants[0].ID, raw)
				}
				time.Sleep(200 * time.Millisecond)
			}
		})

		var cimdHandler *auth.AuthorizationCodeHandler
		t.Run("ClientIDMetadataDocument", func(t *testing.T) {
			cb := newCallback(t)
			id := o.cimd.URL + "/client.json"
			o.setCIMD("/client.json", map[string]any{"client_id": id, "client_name": "E2E CIMD client",
				"redirect_uris": []string{cb.url}, "token_endpoint_auth_method": "none"})
			access := "read_only"
			h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
				ClientIDMetadataDocumentConfig: &auth.ClientIDMetadataDocumentConfig{URL: id},
				RedirectURL:                    cb.url,
				AuthorizationCodeFetcher:       fetcherOf(cb, func() string { return access }),
			})
			if err != nil {
				t.Fatal(err)
			}
			cimdHandler = h
			cs := connect(t, h, "2025-11-25")
			e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
			names := e2eToolNames(t, cs)
			if slices.Contains(names, "e2b_create_sandbox") || slices.Contains(names, "e2b_pause_sandbox") {
				t.Errorf("read-only grant lists %v, want read-only tools only", names)
			}
			// A write tool gets the step-up answer (MCP 2025-11-25): 403,
			// insufficient_scope naming the scope needed, and words that
			// call the grant a grant (before the fix, "This MCP key is read-only").
			ts, _ := h.TokenSource(context.Background())
			ro, err := ts.Token()
			if err != nil {
				t.Fatal(err)
			}
			o.rec.secret(ro.AccessToken, "access token")
			mark := o.simLog.mark()
			resp, body := o.rawMCPCall(t, o.front+"/mcp", ro.AccessToken, "e2b_create_sandbox")
			want := `Bearer error="insufficient_scope", resource_metadata="` + o.front + `/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`
			if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), want) ||
				!strings.Contains(string(body), "grant") || strings.Contains(string(body), "MCP key") {
				t.Fatalf("read-only grant calling a write tool: %d %q %s, want 403 %q and a grant's wording",
					resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, want)
			}
			if n := len(o.simLog.since(mark)); n != 0 {
				t.Errorf("the refused call reached E2B (%d requests)", n)
			}
			// go-sdk steps up: it asks alice again, she gives full access
			// this time, and the same call goes through.
			access = "full"
			e2eCallOK(t, cs, "e2b_create_sandbox", map[string]any{})
		})

		// The Keys page lists both apps; revoking one there ends its
		// access on every replica.
		t.Run("ConnectedApps", func(t *testing.T) {
			if cimdHandler == nil {
				t.Skip("needs the metadata document client")
			}
			ts, _ := cimdHandler.TokenSource(context.Background())
			tok, err := ts.Token()
			if err != nil {
				t.Fatal(err)
			}
			o.rec.secret(tok.AccessToken, "access token")
			gid := alice.with(t).grantOf(wsA, "E2E CIMD client")
			webRun(t, bctx, "keys page", chromedp.Navigate(o.front+"/app/w/"+wsA+"/keys"), chromedp.WaitVisible(chromedp.ID("#grants-table")))
			for _, want := range []string{"E2E native client", "E2E CIMD client", "self-registered", "Read-only"} {
				if got := webText(t, bctx, "#connected-apps"); !strings.Contains(got, want) {
					t.Errorf("Connected apps lacks %q: %s", want, got)
				}
			}
			webShot(t, bctx, "oauth-connected-apps")
			webCheckPage(t, bctx, "connected apps")
			webRun(t, bctx, "revoke", chromedp.Click(chromedp.CSS(`form[data-api-path$="/grants/`+gid+`"] button`)),
				chromedp.WaitVisible(chromedp.ID("#confirm-ok")), chromedp.Click(chromedp.ID("#confirm-ok")))
			deadline := time.Now().Add(5 * time.Second)
			for {
				if o.mcpStatus(t, rA.url+"/mcp", tok.AccessToken) == http.StatusUnauthorized &&
					o.mcpStatus(t, rB.url+"/mcp", tok.AccessToken) == http.StatusUnauthorized {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the app revoked in the dashboard still works")
				}
				time.Sleep(50 * time.Millisecond)
			}
			// The step-up left the app two grants (read-only, then full);
			// the revoked one is gone from the page.
			webRun(t, bctx, "reloaded", chromedp.WaitVisible(chromedp.ID("#grants-table")))
			n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('form[data-api-path$="/grants/`+gid+`"]').length`))
			if err != nil || n != 0 {
				t.Errorf("the revoked grant is still listed (%d, %v)", n, err)
			}
		})
	})

	t.Run("Refusals", func(t *testing.T) {
		alice := alice.with(t)
		cb := newCallback(t)
		id := o.register(t, "refusals", cb.url)
		cfg := o.config(id, cb.url)

		t.Run("PKCE missing or plain", func(t *testing.T) {
			for name, opts := range map[string][]oauth2.AuthCodeOption{
				"missing": nil,
				"plain":   {oauth2.SetAuthURLParam("code_challenge", oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("code_challenge_method", "plain")},
			} {
				// Shown on the gateway's page, never sent to the client
				// (RFC 9700 §4.11.2).
				loc, status, body := o.consent(t, alice, cfg.AuthCodeURL("s", opts...), wsA, "full", "allow")
				if loc != nil || status != http.StatusBadRequest || !strings.Contains(body, "invalid_request") {
					t.Errorf("%s: consent = %v %d, want a 400 page naming invalid_request", name, loc, status)
				}
			}
		})
		t.Run("no redirect before sign-in", func(t *testing.T) {
			// Signed out, a malformed request goes to the login page,
			// never to the client's redirect URI.
			hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			for name, u := range map[string]string{
				"bad response_type": strings.Replace(cfg.AuthCodeURL("s"), "response_type=code", "response_type=token", 1),
				"no PKCE":           cfg.AuthCodeURL("s"),
			} {
				resp, err := hc.Get(u)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				loc, _ := resp.Location()
				if resp.StatusCode != http.StatusSeeOther || loc == nil || loc.Path != "/login" {
					t.Errorf("%s, signed out: %d to %v, want 303 to the login page", name, resp.StatusCode, loc)
				}
			}
			// Signed in, it is shown on the gateway's page.
			u := strings.Replace(cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), "response_type=code", "response_type=token", 1)
			loc, status, body := o.consent(t, alice, u, wsA, "full", "allow")
			if loc != nil || status != http.StatusBadRequest || !strings.Contains(body, "unsupported_response_type") {
				t.Errorf("bad response_type, signed in = %v %d, want a 400 page", loc, status)
			}
		})
		t.Run("scopes", func(t *testing.T) {
			// An unknown scope was once accepted, and the person could
			// pick Full when only mcp:tools:read was asked.
			bogus := o.config(id, cb.url)
			bogus.Scopes = []string{"mcp:tools", "bogus"}
			loc, status, body := o.consent(t, alice, bogus.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "allow")
			if loc != nil || status != http.StatusBadRequest || !strings.Contains(body, "invalid_scope") {
				t.Errorf("scope=bogus = %v %d, want a 400 page naming invalid_scope", loc, status)
			}
			read := o.config(id, cb.url)
			read.Scopes = []string{"mcp:tools:read"}
			loc, status, _ = o.consent(t, alice, read.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "allow")
			if loc != nil || status != http.StatusBadRequest {
				t.Errorf("full access for a read-only request = %v %d, want a 400 page", loc, status)
			}
			tok := o.mustToken(t, alice, read, wsA, "read_only")
			if tok.Extra("scope") != "mcp:tools:read" {
				t.Errorf("read-only grant's scope = %v", tok.Extra("scope"))
			}
			offline := o.config(id, cb.url)
			offline.Scopes = []string{"mcp:tools", "offline_access"}
			o.mustToken(t, alice, offline, wsA, "full")
		})
		t.Run("fragment in redirect_uri", func(t *testing.T) {
			frag := o.config(id, cb.url+"#x")
			loc, status, _ := o.consent(t, alice, frag.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "allow")
			if loc != nil || status != http.StatusBadRequest {
				t.Errorf("a redirect_uri with a fragment = %v %d, want a 400 page (as at registration)", loc, status)
			}
		})
		t.Run("wrong verifier", func(t *testing.T) {
			code, _ := o.code(t, alice, cfg, wsA, "full")
			_, err := o.exchange(cfg, code, oauth2.GenerateVerifier())
			wantOAuthError(t, err, "invalid_grant")
			_, err = cfg.Exchange(context.Background(), code) // no verifier at all
			wantOAuthError(t, err, "invalid_request")
		})
		t.Run("code replayed", func(t *testing.T) {
			code, verifier := o.code(t, alice, cfg, wsA, "full")
			tok, err := o.exchange(cfg, code, verifier)
			if err != nil {
				t.Fatal(err)
			}
			o.rec.secret(tok.AccessToken, "access token")
			if s := o.mcpStatus(t, o.front+"/mcp", tok.AccessToken); s != http.StatusOK {
				t.Fatalf("fresh token = %d", s)
			}
			_, err = o.exchange(cfg, code, verifier)
			wantOAuthError(t, err, "invalid_grant")
			for _, r := range o.replicas {
				if s := o.mcpStatus(t, r.url+"/mcp", tok.AccessToken); s != http.StatusUnauthorized {
					t.Errorf("%s: token of a replayed code = %d, want 401 (its grant revoked)", r.url, s)
				}
			}
		})
		t.Run("code expired", func(t *testing.T) {
			code, verifier := o.code(t, alice, cfg, wsA, "full")
			db := o.dbConn(t)
			if _, err := db.Exec(context.Background(), `UPDATE oauth_codes SET expires_at = now() - interval '1 second' WHERE used_at IS NULL`); err != nil {
				t.Fatal(err)
			}
			_, err := o.exchange(cfg, code, verifier)
			wantOAuthError(t, err, "invalid_grant")
		})
		t.Run("code lives 60 s", func(t *testing.T) {
			o.code(t, alice, cfg, wsA, "full")
			var secs float64
			db := o.dbConn(t)
			if err := db.QueryRow(context.Background(), `SELECT extract(epoch FROM max(expires_at) - now()) FROM oauth_codes WHERE used_at IS NULL`).Scan(&secs); err != nil {
				t.Fatal(err)
			}
			if secs > 60 || secs < 50 {
				t.Errorf("a new code expires in %.0f s, want 60", secs)
			}
		})
		t.Run("redirect URI", func(t *testing.T) {
			other := o.config(id, "http://127.0.0.1:1/elsewhere")
			loc, status, body := o.consent(t, alice, other.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "allow")
			if loc != nil || status != http.StatusBadRequest || !strings.Contains(body, "Unexpected return address") {
				t.Errorf("unregistered redirect = %v %d, want a 400 page and no redirect", loc, status)
			}
			// Loopback: any port is the same redirect (RFC 8252 §7.3)...
			u, _ := url.Parse(cb.url)
			anyPort := o.config(id, "http://127.0.0.1:1"+u.Path)
			code, verifier := o.code(t, alice, anyPort, wsA, "full")
			// ...but the token request must repeat the one used.
			_, err := o.exchange(cfg, code, verifier)
			wantOAuthError(t, err, "invalid_grant")
			// https must match exactly.
			web := o.register(t, "web client", "https://app.example.com/cb")
			loc, status, _ = o.consent(t, alice, o.config(web, "https://app.example.com/cb/").AuthCodeURL("s",
				oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "allow")
			if loc != nil || status != http.StatusBadRequest {
				t.Errorf("https redirect with another path = %v %d, want a 400 page", loc, status)
			}
		})
		t.Run("redirect_uri omitted", func(t *testing.T) {
			// A client with one registered redirect URI may leave it out of
			// both requests (RFC 6749 §4.1.1, §4.1.3); the answer goes there.
			bare := o.config(id, "")
			code, verifier := o.code(t, alice, bare, wsA, "full")
			if _, err := o.exchange(bare, code, verifier); err != nil {
				t.Fatalf("Exchange() without redirect_uri err = %v", err)
			}
			// Left out in one request and not the other, it does not match.
			code, verifier = o.code(t, alice, bare, wsA, "full")
			_, err := o.exchange(cfg, code, verifier)
			wantOAuthError(t, err, "invalid_grant")
		})
		t.Run("wrong resource", func(t *testing.T) {
			loc, status, body := o.consent(t, alice, cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()),
				oauth2.SetAuthURLParam("resource", "https://other.example.com/mcp")), wsA, "full", "allow")
			if loc != nil || status != http.StatusBadRequest || !strings.Contains(body, "invalid_target") {
				t.Errorf("authorize for another resource = %v %d, want a 400 page naming invalid_target", loc, status)
			}
			code, verifier := o.code(t, alice, cfg, wsA, "full")
			_, err := cfg.Exchange(context.Background(), code, oauth2.VerifierOption(verifier),
				oauth2.SetAuthURLParam("resource", "https://other.example.com/mcp"))
			wantOAuthError(t, err, "invalid_target")
			// A token whose grant names another resource is refused by /mcp.
			tok := o.mustToken(t, alice, cfg, wsA, "full")
			db := o.dbConn(t)
			if _, err := db.Exec(context.Background(), `UPDATE oauth_grants SET resource = 'https://other.example.com/mcp'
				WHERE id = (SELECT grant_id FROM oauth_tokens WHERE hash = sha256($1::bytea))`, []byte(tok.AccessToken)); err != nil {
				t.Fatal(err)
			}
			if s := o.mcpStatus(t, rB.url+"/mcp", tok.AccessToken); s != http.StatusUnauthorized {
				t.Errorf("token for another audience = %d, want 401", s)
			}
		})
		t.Run("denied", func(t *testing.T) {
			loc, _, _ := o.consent(t, alice, cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "deny")
			if loc == nil || loc.Query().Get("error") != "access_denied" || loc.Query().Get("code") != "" {
				t.Errorf("deny = %v, want access_denied", loc)
			}
		})
		t.Run("consent without CSRF", func(t *testing.T) {
			hc := &http.Client{Jar: alice.client.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			q, _ := url.Parse(cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
			form := q.Query()
			form.Set("workspace", wsA)
			form.Set("access", "full")
			form.Set("decision", "allow")
			resp, err := hc.PostForm(o.front+"/oauth/authorize", form)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("consent POST without CSRF token = %d, want 403", resp.StatusCode)
			}
		})
		t.Run("refresh rotation and reuse", func(t *testing.T) {
			tok := o.mustToken(t, alice, cfg, wsA, "full")
			if time.Until(tok.Expiry) > time.Hour+time.Minute || time.Until(tok.Expiry) < 59*time.Minute {
				t.Errorf("access token expires at %v, want in one hour", tok.Expiry)
			}
			next, err := cfg.TokenSource(context.Background(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
			if err != nil {
				t.Fatalf("refresh err = %v", err)
			}
			o.rec.secret(next.AccessToken, "access token")
			o.rec.secret(next.RefreshToken, "refresh token")
			if next.RefreshToken == tok.RefreshToken || next.AccessToken == tok.AccessToken {
				t.Fatal("refresh did not rotate the tokens")
			}
			if s := o.mcpStatus(t, o.front+"/mcp", next.AccessToken); s != http.StatusOK {
				t.Fatalf("refreshed token = %d", s)
			}
			// The old refresh token again: reuse revokes the whole grant.
			_, err = cfg.TokenSource(context.Background(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
			wantOAuthError(t, err, "invalid_grant")
			for _, r := range o.replicas {
				if s := o.mcpStatus(t, r.url+"/mcp", next.AccessToken); s != http.StatusUnauthorized {
					t.Errorf("%s: token of a grant whose refresh token was reused = %d, want 401", r.url, s)
				}
			}
			_, err = cfg.TokenSource(context.Background(), &oauth2.Token{RefreshToken: next.RefreshToken}).Token()
			wantOAuthError(t, err, "invalid_grant")
		})
		t.Run("revoke on one replica, refused on the other", func(t *testing.T) {
			for _, how := range []string{"oauth/revoke", "dashboard API"} {
				tok := o.mustToken(t, alice, cfg, wsA, "full")
				if s := o.mcpStatus(t, rB.url+"/mcp", tok.AccessToken); s != http.StatusOK { // now cached on B
					t.Fatalf("token on replica B = %d", s)
				}
				if how == "oauth/revoke" {
					resp, err := http.PostForm(rA.url+"/oauth/revoke", url.Values{"token": {tok.RefreshToken}, "client_id": {id}})
					if err != nil || resp.StatusCode != http.StatusOK {
						t.Fatalf("revoke = %v, %v", resp, err)
					}
					resp.Body.Close()
				} else {
					gid := alice.grantOf(wsA, "refusals")
					if gid == "" {
						t.Fatalf("grant not listed: %+v", alice.grants(wsA))
					}
					alice.api(http.MethodDelete, "/api/v1/workspaces/"+wsA+"/grants/"+gid, nil, http.StatusNoContent)
				}
				deadline := time.Now().Add(2 * time.Second)
				for o.mcpStatus(t, rB.url+"/mcp", tok.AccessToken) != http.StatusUnauthorized {
					if time.Now().After(deadline) {
						t.Fatalf("%s: replica B still accepts the revoked token after 2 s", how)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
		t.Run("workspaces", func(t *testing.T) {
			// alice's token for her personal workspace reaches only its
			// E2B team; bob's workspace and its grants stay out of reach.
			tok := o.mustToken(t, alice, cfg, wsA, "full")
			mark := o.simLog.mark()
			cs := o.session(t, o.front+"/mcp", e2eBearer(tok.AccessToken), "", nil)
			e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
			for _, req := range o.simLog.since(mark) {
				if req.key != teamA {
					t.Errorf("a call with alice's grant reached another team's E2B key")
				}
			}
			loc, status, _ := o.consent(t, alice, cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), bob.personal, "full", "allow")
			if loc != nil || status != http.StatusNotFound {
				t.Errorf("consent for a workspace alice is not in = %v %d, want a 404 page", loc, status)
			}
			bob := bob.with(t)
			bob.api(http.MethodGet, "/api/v1/workspaces/"+wsA+"/grants", nil, http.StatusNotFound)
			grants := alice.grants(wsA)
			if len(grants) == 0 {
				t.Fatal("no grant listed")
			}
			bob.api(http.MethodDelete, "/api/v1/workspaces/"+bob.personal+"/grants/"+grants[0].ID, nil, http.StatusNotFound)
			bob.api(http.MethodDelete, "/api/v1/workspaces/"+wsA+"/grants/"+grants[0].ID, nil, http.StatusNotFound)
			if bobs := bob.grants(bob.personal); len(bobs) != 0 {
				t.Errorf("bob's workspace lists %d grants, want none", len(bobs))
			}
			if s := o.mcpStatus(t, o.front+"/mcp", tok.AccessToken); s != http.StatusOK {
				t.Errorf("bob's attempts revoked alice's grant: %d", s)
			}
		})
		t.Run("member removed", func(t *testing.T) {
			carol := o.signup(o.front, "carol@example.com", alice.invite(wsA, "carol@example.com", "member")).with(t)
			tok := o.mustToken(t, carol, cfg, wsA, "read_only")
			if s := o.mcpStatus(t, rB.url+"/mcp", tok.AccessToken); s != http.StatusOK {
				t.Fatalf("carol's token = %d", s)
			}
			if mine := carol.grants(wsA); len(mine) != 1 || mine[0].UserEmail != "carol@example.com" {
				t.Errorf("a member sees grants %+v, want only her own", mine)
			}
			alice.api(http.MethodDelete, "/api/v1/workspaces/"+wsA+"/members/"+carol.id, nil, http.StatusNoContent)
			deadline := time.Now().Add(2 * time.Second)
			for o.mcpStatus(t, rB.url+"/mcp", tok.AccessToken) != http.StatusUnauthorized {
				if time.Now().After(deadline) {
					t.Fatal("a removed member's token still works on replica B")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	})

	// A connected app asks for a person's approval as an MCP key does; the
	// approval is bound to its grant, and another grant of the same person
	// cannot spend it.
	t.Run("HumanApproval", func(t *testing.T) {
		alice := alice.with(t)
		cb := newCallback(t)
		cfg := o.config(o.register(t, "approver", cb.url), cb.url)
		alice.setTool(wsA, toolKill, map[string]any{"enabled": true, "approval": "human"})
		t.Cleanup(func() { alice.setTool(wsA, toolKill, map[string]any{"enabled": false}) })
		app := o.session(t, rA.url+"/mcp", e2eBearer(o.mustToken(t, alice, cfg, wsA, "full").AccessToken), "2025-11-25", nil)
		other := o.session(t, rB.url+"/mcp", e2eBearer(o.mustToken(t, alice, cfg, wsA, "full").AccessToken), "2025-11-25", nil)
		sb := o.simSandbox(teamA, map[string]any{"templateID": "base"})
		args := map[string]any{"sandbox_id": sb}

		out := e2eStructured(t, e2eCall(t, app, toolKill, args))
		id, _ := out["approval_id"].(string)
		if out["status"] != "approval_required" || id == "" {
			t.Fatalf("kill through OAuth = %v, want approval_required", out)
		}
		var got struct {
			State      string `json:"state"`
			GrantID    string `json:"grant_id"`
			ClientName string `json:"client_name"`
		}
		alice.decode(alice.api(http.MethodGet, "/api/v1/workspaces/"+wsA+"/approvals/"+id, nil, http.StatusOK), &got)
		if got.State != "pending" || got.GrantID == "" || got.ClientName != "approver" {
			t.Fatalf("approval = %+v, want pending, bound to the app's grant", got)
		}
		alice.api(http.MethodPost, "/api/v1/workspaces/"+wsA+"/approvals/"+id+"/approve", nil, http.StatusOK)
		if msg := e2eCallErr(t, other, toolKill, withArg(args, "approval_id", id)); !strings.Contains(msg, "different call") {
			t.Errorf("another grant spending the approval = %q, want refused", msg)
		}
		if state, _ := o.simSandboxState(teamA, sb); state != "running" {
			t.Fatalf("sandbox = %q after a mismatched use, want running", state)
		}
		e2eCallOK(t, app, toolKill, withArg(args, "approval_id", id))
		if state, _ := o.simSandboxState(teamA, sb); state != "" {
			t.Errorf("sandbox = %q after the approved kill, want gone", state)
		}
	})

	t.Run("Registration", func(t *testing.T) {
		for name, md := range map[string]map[string]any{
			"no redirect":       {"client_name": "x"},
			"http non-loopback": {"redirect_uris": []string{"http://evil.example.com/cb"}},
			"javascript":        {"redirect_uris": []string{"javascript:alert(1)"}},
			"implicit":          {"redirect_uris": []string{"https://a.example.com/cb"}, "grant_types": []string{"implicit"}},
		} {
			b, _ := json.Marshal(md)
			resp, err := http.Post(o.front+"/oauth/register", "application/json", strings.NewReader(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: register = %d, want 400", name, resp.StatusCode)
			}
		}
		// Rate limit per address: 20, then 429.
		got429 := false
		for i := range 25 {
			resp, err := http.Post(rB.url+"/oauth/register", "application/json",
				strings.NewReader(fmt.Sprintf(`{"client_name":"spam %d","redirect_uris":["http://127.0.0.1/cb"]}`, i)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				got429 = true
				break
			}
		}
		if !got429 {
			t.Error("25 registrations from one address were all accepted, want a 429")
		}
	})

	t.Run("MetadataDocumentRefused", func(t *testing.T) {
		alice := alice.with(t)
		cb := newCallback(t)
		for name, id := range map[string]string{
			"redirect":         o.cimd.URL + "/redirect.json",
			"missing":          o.cimd.URL + "/missing.json",
			"wrong client_id":  o.setCIMD("/liar.json", map[string]any{"client_id": "https://elsewhere.example.com/c.json", "redirect_uris": []string{cb.url}}),
			"too large":        o.setCIMD("/large.json", map[string]any{"client_id": o.cimd.URL + "/large.json", "redirect_uris": []string{cb.url}, "pad": strings.Repeat("x", 70<<10)}),
			"http is no CIMD":  strings.Replace(o.cimd.URL, "https", "http", 1) + "/client.json",
			"private address":  "https://10.0.0.1/client.json",
			"link-local range": "https://169.254.169.254/latest/meta-data.json",
		} {
			loc, status, body := o.consent(t, alice, o.config(id, cb.url).AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "allow")
			if loc != nil || status != http.StatusBadRequest {
				t.Errorf("%s: authorize = %v %d, want a 400 page", name, loc, status)
			}
			// The page says why, but never what the gateway dialled.
			// (The test server's own URL is in the page; it may contain 443.)
			if strings.Contains(body, "dial tcp") || strings.Contains(body, "10.0.0.1:443") || strings.Contains(body, "169.254.169.254:443") {
				t.Errorf("%s: the error page reveals network details:\n%s", name, body)
			}
		}
	})

	t.Run("NoSecretsInLogs", func(t *testing.T) {
		for _, r := range o.replicas {
			logs := r.log.String()
			for _, prefix := range []string{"mcpat_", "mcprt_", "mcpac_"} {
				if strings.Contains(logs, prefix) {
					t.Errorf("replica log carries an OAuth secret (%s…)", prefix)
				}
			}
		}
		// Codes and tokens never appear in a response other than the token
		// endpoint's (whose answers these clients do not record). The CSRF
		// cookie is echoed by the consent form on purpose.
		var bad []string
		for _, l := range o.rec.leaks(nil) {
			if !strings.Contains(l, "mcpgate_csrf") {
				bad = append(bad, l)
			}
		}
		if len(bad) > 0 {
			t.Errorf("secrets in responses: %v", bad)
		}
	})
}

// rawMCPCall posts one tools/call of tool (no arguments) with a bearer, as
// a stateless client may, and returns the answer.
func (o *oauthEnv) rawMCPCall(t *testing.T, endpoint, bearer, tool string) (*http.Response, []byte) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := o.httpClient(nil, "").Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", e2eRedactPath(req.URL.Path), err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}
