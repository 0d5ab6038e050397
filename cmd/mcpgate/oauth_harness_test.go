package main

// The harness of the OAuth 2.1 end-to-end tests (oauth_*_test.go): the real
// program (two replicas of serve on one database, behind a front proxy whose
// address is PUBLIC_URL), the E2B simulator, a loopback redirect listener,
// and golang.org/x/oauth2 with its PKCE helpers driving the flow over HTTP.

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

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
			// Upstream servers on loopback (oauth_server_endpoint_e2e_test.go).
			"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8",
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

// oauthFixture is where each OAuth end-to-end test starts, on a deployment
// of its own: alice and bob, each with a personal workspace connected to an
// E2B team of their own, and one sandbox in alice's team.
type oauthFixture struct {
	o      *oauthEnv
	rA, rB *e2eReplica
	alice  *e2eUser
	bob    *e2eUser
	teamA  string
	wsA    string
}

func newOAuthFixture(t *testing.T) *oauthFixture {
	t.Helper()
	o := newOAuthEnv(t)
	f := &oauthFixture{o: o, rA: o.replicas[0], rB: o.replicas[1]}
	f.alice, f.teamA = o.signupWithE2B(o.front, "alice@example.com")
	f.bob, _ = o.signupWithE2B(o.front, "bob@example.com")
	f.wsA = f.alice.personal
	o.simSandbox(f.teamA, map[string]any{"templateID": "base"})
	return f
}

// noSecretsInLogs fails t when a replica's log carries an OAuth secret, or a
// response read by the tests carries any secret of the deployment.
func (o *oauthEnv) noSecretsInLogs(t *testing.T) {
	t.Helper()
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
