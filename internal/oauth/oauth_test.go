package oauth

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

func TestMatchRedirect(t *testing.T) {
	reg := []string{"https://app.example.com/cb", "http://127.0.0.1:8000/callback", "http://localhost/cb", "cursor://anysphere.cursor/oauth"}
	tests := []struct {
		uri  string
		want bool
	}{
		{"https://app.example.com/cb", true},
		{"https://app.example.com/cb/", false},
		{"https://app.example.com/cb?x=1", false},
		{"https://APP.example.com/cb", false},
		{"http://app.example.com/cb", false},
		{"http://127.0.0.1:51234/callback", true}, // RFC 8252 §7.3: any port
		{"http://127.0.0.1/callback", true},
		{"http://127.0.0.1:51234/other", false},
		{"http://localhost:9999/cb", true},
		{"http://localhost.evil.com:9999/cb", false},
		{"http://127.0.0.2:8000/callback", false},
		{"http://user@127.0.0.1:8000/callback", false},
		{"https://127.0.0.1:8000/callback", false},
		{"cursor://anysphere.cursor/oauth", true},
		{"cursor://anysphere.cursor/oauth2", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := matchRedirect(reg, tt.uri); got != tt.want {
			t.Errorf("matchRedirect(%q) = %v, want %v", tt.uri, got, tt.want)
		}
	}
}

func TestCheckRedirectURI(t *testing.T) {
	ok := []string{"https://claude.ai/api/mcp/auth_callback", "http://127.0.0.1:33418/", "http://localhost:6274/oauth/callback",
		"http://[::1]:8080/cb", "cursor://anysphere.cursor-retrieval/oauth/user-mcpgate/callback", "com.example.app:/oauth"}
	bad := []string{"http://example.com/cb", "javascript:alert(1)", "data:text/html,x", "file:///etc/passwd", "/relative",
		"https://app.example.com/cb#frag", "https:///nohost", "myapp:"}
	for _, u := range ok {
		if err := checkRedirectURI(u); err != nil {
			t.Errorf("checkRedirectURI(%q) = %v, want nil", u, err)
		}
	}
	for _, u := range bad {
		if err := checkRedirectURI(u); err == nil {
			t.Errorf("checkRedirectURI(%q) = nil, want an error", u)
		}
	}
}

func TestIsCIMDClientID(t *testing.T) {
	for id, want := range map[string]bool{
		"https://app.example.com/oauth/client.json": true, "https://app.example.com/": false, "https://app.example.com": false,
		"http://app.example.com/client.json": false, "mcpc_abc": false, "https://u:p@app.example.com/c.json": false,
	} {
		if got := isCIMDClientID(id); got != want {
			t.Errorf("isCIMDClientID(%q) = %v, want %v", id, got, want)
		}
	}
}

// The fetcher refuses loopback without the test option, redirects, large
// documents and documents that are not about themselves.
func TestCIMDFetch(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		self := "https://" + r.Host + r.URL.Path
		switch r.URL.Path {
		case "/ok.json":
			_ = json.NewEncoder(w).Encode(map[string]any{"client_id": self, "client_name": "OK", "redirect_uris": []string{"http://127.0.0.1/cb"}})
		case "/secret.json":
			_ = json.NewEncoder(w).Encode(map[string]any{"client_id": self, "client_secret": "x", "redirect_uris": []string{"http://127.0.0.1/cb"}})
		case "/big.json":
			_, _ = w.Write([]byte(`{"client_id":"` + self + `","pad":"` + strings.Repeat("x", 70<<10) + `"}`))
		case "/redirect.json":
			http.Redirect(w, r, "/ok.json", http.StatusFound)
		case "/slow.json":
			time.Sleep(300 * time.Millisecond)
		}
	}))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted-certificate case fails its handshake on purpose
	ts.StartTLS()
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	ctx := context.Background()

	strict := newCIMDFetcher(CIMDOptions{RootCAs: pool})
	if _, err := strict.fetch(ctx, ts.URL+"/ok.json"); !errors.Is(err, errAddrRefused) {
		t.Errorf("fetch of a loopback document without the test option err = %v, want address not allowed", err)
	}
	f := newCIMDFetcher(CIMDOptions{RootCAs: pool, AllowAddr: func(a netip.Addr) bool { return a.IsLoopback() }, Timeout: 200 * time.Millisecond})
	md, err := f.fetch(ctx, ts.URL+"/ok.json")
	if err != nil || md.ClientName != "OK" {
		t.Fatalf("fetch(ok) = %+v, %v", md, err)
	}
	for _, path := range []string{"/secret.json", "/big.json", "/redirect.json", "/slow.json", "/missing.json"} {
		if _, err := f.fetch(ctx, ts.URL+path); err == nil {
			t.Errorf("fetch(%s) err = nil, want a refusal", path)
		}
	}
	untrusted := newCIMDFetcher(CIMDOptions{AllowAddr: func(a netip.Addr) bool { return a.IsLoopback() }})
	if _, err := untrusted.fetch(ctx, ts.URL+"/ok.json"); err == nil {
		t.Error("fetch from a server with an untrusted certificate succeeded")
	}
}

// The consent page's form-action lets the browser follow the redirect to
// the client, and nothing else.
func TestPageHeadersFormAction(t *testing.T) {
	for uri, want := range map[string]string{
		"http://127.0.0.1:5555/cb":        "form-action 'self' http://127.0.0.1:*;",
		"http://localhost/cb":             "form-action 'self' http://localhost:* http://localhost;",
		"https://claude.ai/api/mcp/cb":    "form-action 'self' https://claude.ai;",
		"cursor://anysphere.cursor/oauth": "form-action 'self' cursor:;",
		"":                                "form-action 'self';",
	} {
		w := httptest.NewRecorder()
		pageHeaders(w, uri)
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, want) || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("pageHeaders(%q) CSP = %q, want %q", uri, csp, want)
		}
	}
}

// The server asks of the database only what its Store names.
var _ Store = (*store.DB)(nil)

// fixture is a server on a fresh database with one member and a client.
type fixture struct {
	db        *store.DB
	srv       *Server
	auth      *auth.Tokens
	workspace string
	user      string
	client    string
}

func newFixture(t *testing.T, publicURL string) *fixture {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t)
	u, err := db.CreateUser(ctx, "owner@example.com", "hash", nil)
	if err != nil {
		t.Fatal(err)
	}
	wss, err := db.WorkspacesOfUser(ctx, u.ID)
	if err != nil || len(wss) != 1 {
		t.Fatalf("WorkspacesOfUser() = %v, %v", wss, err)
	}
	tokens := auth.NewTokens(auth.TokensOptions{Store: db, OwnsResource: OwnsResource(publicURL)})
	srv := New(Options{DB: db, PublicURL: publicURL, Tokens: tokens})
	c := &mcpgate.OAuthClient{ID: "mcpc_test", Kind: mcpgate.ClientDCR, Name: "Test", RedirectURIs: []string{"http://127.0.0.1/cb"}}
	if err := db.SaveOAuthClient(ctx, c, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, srv: srv, auth: tokens, workspace: wss[0].ID, user: u.ID, client: c.ID}
	t.Cleanup(f.auth.Close)
	return f
}

// grant redeems a fresh code for resource and returns the access and
// refresh tokens.
func (f *fixture) grant(t *testing.T, resource string) (string, string) {
	t.Helper()
	ctx := context.Background()
	code := newSecret(codePrefix)
	verifier := strings.Repeat("v", 43)
	c := storeCode(f, verifier)
	c.Resource = resource
	if err := f.db.CreateOAuthCode(ctx, mcpgate.HashToken(code), c); err != nil {
		t.Fatal(err)
	}
	access, refresh, pair := f.srv.newPair()
	if _, err := f.db.RedeemOAuthCode(ctx, mcpgate.HashToken(code), time.Now(), func(*store.OAuthCode) error { return nil }, pair); err != nil {
		t.Fatalf("RedeemOAuthCode() err = %v", err)
	}
	return access, refresh
}

// storeCode is a read-only code of the fixture's member for the MCP endpoint.
func storeCode(f *fixture, verifier string) store.OAuthCode {
	return store.OAuthCode{ClientID: f.client, WorkspaceID: f.workspace, UserID: f.user, RedirectURI: "http://127.0.0.1/cb",
		Challenge: s256(verifier), Resource: f.srv.resource, Scope: mcpgate.ScopeReadOnly, ExpiresAt: time.Now().Add(time.Minute)}
}

// bearer is tok as the MCP endpoint presents a bearer token.
func bearer(tok string) mcpgate.Presented {
	return mcpgate.Presented{Value: mcpgate.Secret(tok), Bearer: true}
}

// The server issues tokens the verifier (internal/auth) takes, for its own
// resource only (OwnsResource); a token it revokes at /oauth/revoke is
// dropped from this replica's cache at once, with no notification.
func TestIssuedTokensVerified(t *testing.T) {
	f := newFixture(t, "https://gw.example.com")
	ctx := context.Background()
	access, refresh := f.grant(t, "https://gw.example.com/mcp")
	a, err := f.auth.Authenticate(ctx, bearer(access))
	if err != nil || a == nil || a.WorkspaceID != f.workspace || a.GrantID == "" || a.ClientName != "Test" {
		t.Fatalf("Authenticate(access) = %+v, %v", a, err)
	}
	if a, err := f.auth.Authenticate(ctx, bearer(refresh)); a != nil || err != nil {
		t.Errorf("Authenticate(refresh token) = %v, %v, want nil, nil (not an access token)", a, err)
	}
	other, _ := f.grant(t, "https://other.example.com/mcp")
	if _, err := f.auth.Authenticate(ctx, bearer(other)); !isOAuthRefusal(err) {
		t.Errorf("Authenticate(token for another resource) err = %v, want a refusal", err)
	}
	// The cache holds the token (fresh for its TTL); the revocation here
	// empties it without Invalidate being called from outside.
	if status, _ := tokenRequest(t, f.srv, "/oauth/revoke", url.Values{"token": {access}, "client_id": {f.client}}); status != http.StatusOK {
		t.Fatalf("revoke = %d, want 200", status)
	}
	if _, err := f.auth.Authenticate(ctx, bearer(access)); !isOAuthRefusal(err) {
		t.Errorf("Authenticate(revoked here) err = %v, want a refusal at once", err)
	}
}

// OwnsResource is the server's own check: both identifiers of its PUBLIC_URL
// as stored, and nothing else (another spelling, another gateway, none).
func TestOwnsResource(t *testing.T) {
	owns := OwnsResource("https://gw.example.com/")
	srv := New(Options{PublicURL: "https://gw.example.com/"})
	for _, res := range []string{"https://gw.example.com/mcp", "https://gw.example.com", "HTTPS://GW.EXAMPLE.COM/mcp",
		"https://gw.example.com:443/mcp", "https://other.example.com/mcp", "https://gw.example.com/mcp/", "", "/mcp"} {
		if got, want := owns(res), srv.ownsResource(res); got != want {
			t.Errorf("OwnsResource()(%q) = %v, the server says %v", res, got, want)
		}
	}
	if !owns("https://gw.example.com/mcp") || !owns("https://gw.example.com") || owns("https://other.example.com/mcp") {
		t.Error("OwnsResource() does not take the gateway's own identifiers, or takes another's")
	}
}

func isOAuthRefusal(err error) bool {
	var ae *mcpgate.AuthError
	return errors.As(err, &ae) && strings.HasPrefix(ae.Reason, "oauth_")
}

func anyResource(string) error { return nil }

// A refresh token rotates once; the spent one revokes the grant.
func TestRotateRefreshToken(t *testing.T) {
	f := newFixture(t, "https://gw.example.com")
	_, refresh := f.grant(t, "https://gw.example.com/mcp")
	ctx := context.Background()
	_, _, next := f.srv.newPair()
	g, err := f.db.RotateRefreshToken(ctx, mcpgate.HashToken(refresh), "another client", time.Now(), anyResource, next)
	if mcpgate.ErrorCode(err) != mcpgate.ENotFound || g != nil {
		t.Fatalf("rotate as another client = %v, %v, want not found", g, err)
	}
	if _, err := f.db.RotateRefreshToken(ctx, mcpgate.HashToken(refresh), f.client, time.Now(), anyResource, next); err != nil {
		t.Fatalf("rotate err = %v", err)
	}
	_, _, again := f.srv.newPair()
	var reuse *store.ReuseError
	if _, err := f.db.RotateRefreshToken(ctx, mcpgate.HashToken(refresh), f.client, time.Now(), anyResource, again); !errors.As(err, &reuse) {
		t.Fatalf("reuse err = %v, want a ReuseError", err)
	}
	if gs, _ := f.db.ListGrants(ctx, f.workspace, ""); len(gs) != 0 {
		t.Errorf("live grants after reuse = %d, want 0", len(gs))
	}
}

// Clients that never got a grant expire, registered or known by a metadata
// document (before the fix, documents were kept for ever); used ones stay.
func TestPruneOAuth(t *testing.T) {
	f := newFixture(t, "https://gw.example.com")
	ctx := context.Background()
	f.grant(t, "https://gw.example.com/mcp") // uses f.client
	for _, c := range []*mcpgate.OAuthClient{
		{ID: "mcpc_unused", Kind: mcpgate.ClientDCR, Name: "old", RedirectURIs: []string{"http://127.0.0.1/cb"}},
		{ID: "mcpc_fresh", Kind: mcpgate.ClientDCR, Name: "new", RedirectURIs: []string{"http://127.0.0.1/cb"}},
		{ID: "https://app.example.com/c.json", Kind: mcpgate.ClientCIMD, Name: "doc", RedirectURIs: []string{"http://127.0.0.1/cb"}},
	} {
		if err := f.db.SaveOAuthClient(ctx, c, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.db.Pool.Exec(ctx, `UPDATE oauth_clients SET created_at = now() - interval '2 days' WHERE id <> 'mcpc_fresh'`); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"mcpc_unused": false, "mcpc_fresh": true, f.client: true, "https://app.example.com/c.json": false} {
		_, _, err := f.db.FindOAuthClient(ctx, id)
		if got := err == nil; got != want {
			t.Errorf("client %s kept = %v, want %v (err %v)", id, got, want, err)
		}
	}
}

// docServer serves a valid metadata document at every path, counting hits.
func docServer(t *testing.T, hits *atomic.Int32) *httptest.Server {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits != nil {
			hits.Add(1)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": "https://" + r.Host + r.URL.Path, "client_name": "Doc",
			"redirect_uris": []string{"http://127.0.0.1/cb"}})
	}))
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

// localFetcher fetches from a local test server, trusting its certificate.
func localFetcher(ts *httptest.Server) *cimdFetcher {
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	return newCIMDFetcher(CIMDOptions{RootCAs: pool, AllowAddr: func(a netip.Addr) bool { return a.IsLoopback() }})
}

// A client ID metadata document is fetched once and then served from the
// cache until it is older than the cache time.
func TestCIMDCached(t *testing.T) {
	var hits atomic.Int32
	ts := docServer(t, &hits)
	f := newFixture(t, "https://gw.example.com")
	now := time.Now()
	f.srv.now = func() time.Time { return now }
	f.srv.cimd = localFetcher(ts)
	id := ts.URL + "/client.json"
	r := httptest.NewRequest(http.MethodGet, "/oauth/authorize", nil)
	for range 3 {
		c, err := f.srv.findClient(r, id)
		if err != nil || c.Name != "Doc" || c.Kind != mcpgate.ClientCIMD {
			t.Fatalf("findClient() = %+v, %v", c, err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("document fetched %d times for 3 uses, want 1", n)
	}
	// Not stored before a person consents (before the fix, every fetch was).
	if _, _, err := f.db.FindOAuthClient(context.Background(), id); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("an unconsented document's client is stored (err %v)", err)
	}
	now = now.Add(2 * time.Hour)
	if _, err := f.srv.findClient(r, id); err != nil || hits.Load() != 2 {
		t.Errorf("after the cache time: err %v, fetches %d, want a second fetch", err, hits.Load())
	}
}

// Fetches of metadata documents are limited per client address (once
// one address made the gateway fetch and store 200), and the limit of one
// address leaves another's alone.
func TestCIMDFetchRateLimited(t *testing.T) {
	ts := docServer(t, nil)
	f := newFixture(t, "https://gw.example.com")
	f.srv.fetchers = newAddrLimiter(rate.Every(time.Hour), 2)
	f.srv.cimd = localFetcher(ts)
	from := func(addr string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/oauth/authorize", nil)
		r.RemoteAddr = addr + ":5555"
		return r
	}
	for i := range 3 {
		_, err := f.srv.findClient(from("203.0.113.5"), fmt.Sprintf("%s/c%d.json", ts.URL, i))
		if want := i < 2; (err == nil) != want {
			t.Fatalf("fetch %d from one address err = %v, want allowed %v", i+1, err, want)
		}
		if i == 2 && mcpgate.ErrorCode(err) != mcpgate.ETooMany {
			t.Fatalf("fetch over the limit err = %v, want rate_limited", err)
		}
	}
	if _, err := f.srv.findClient(from("198.51.100.7"), ts.URL+"/c9.json"); err != nil {
		t.Errorf("another address's fetch err = %v, want allowed", err)
	}
	// A document already fetched for this sign-in is not fetched again.
	if _, err := f.srv.findClient(from("203.0.113.5"), ts.URL+"/c0.json"); err != nil {
		t.Errorf("the consent step of a fetched document err = %v, want it served from memory", err)
	}
}
