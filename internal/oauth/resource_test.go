package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
)

func TestResourceOf(t *testing.T) {
	s := New(Options{PublicURL: "https://gw.example.com"})
	for requested, want := range map[string]string{
		"https://gw.example.com/mcp":      "https://gw.example.com/mcp",
		"HTTPS://GW.Example.COM/mcp":      "https://gw.example.com/mcp",
		"https://gw.example.com:443/mcp":  "https://gw.example.com/mcp",
		"https://gw.example.com":          "https://gw.example.com",
		"https://gw.example.com/":         "https://gw.example.com",
		"https://gw.example.com/mcp/":     "",
		"https://gw.example.com/MCP":      "",
		"https://gw.example.com:8443/mcp": "",
		"http://gw.example.com/mcp":       "",
		"https://gw.example.com/mcp#x":    "",
		"https://gw.example.com/mcp?a=1":  "",
		"https://u@gw.example.com/mcp":    "",
		"https://other.example.com/mcp":   "",
		"/mcp":                            "",
		"bogus":                           "",
	} {
		if got := s.resourceOf(requested); got != want {
			t.Errorf("resourceOf(%q) = %q, want %q", requested, got, want)
		}
	}
	local := New(Options{PublicURL: "http://127.0.0.1:8080/"})
	if got := local.resourceOf("http://127.0.0.1:8080/mcp"); got != "http://127.0.0.1:8080/mcp" {
		t.Errorf("resourceOf on a loopback PUBLIC_URL = %q", got)
	}
}

// tokenRequest posts a form to the server's token or revocation endpoint.
func tokenRequest(t *testing.T, s *Server, path string, form url.Values) (int, map[string]string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	var body map[string]string
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	return w.Code, body
}

// A second gateway on the same database (another PUBLIC_URL) neither
// refreshes nor revokes the first one's grant, and its token endpoint
// leaves the refresh token unspent: the first gateway still rotates it
// once, and only a real reuse revokes the grant.
func TestTokensBoundToIssuer(t *testing.T) {
	f := newFixture(t, "https://gw.example.com")
	access, refresh := f.grant(t, "https://gw.example.com/mcp")
	other := New(Options{DB: f.db, PublicURL: "https://second.example.com"})
	ctx := context.Background()
	live := func() bool {
		gs, err := f.db.ListGrants(ctx, f.workspace, "")
		if err != nil {
			t.Fatal(err)
		}
		return len(gs) == 1
	}

	for name, res := range map[string]string{"no resource": "", "its own resource": "https://second.example.com/mcp",
		"the first's resource": "https://gw.example.com/mcp"} {
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {f.client}}
		if res != "" {
			form.Set("resource", res)
		}
		status, body := tokenRequest(t, other, "/oauth/token", form)
		if status != http.StatusBadRequest || body["access_token"] != "" {
			t.Errorf("refresh at another issuer, %s = %d %v, want refused", name, status, body)
		}
	}
	for _, tok := range []string{access, refresh} {
		if status, _ := tokenRequest(t, other, "/oauth/revoke", url.Values{"token": {tok}, "client_id": {f.client}}); status != http.StatusOK {
			t.Errorf("revoke at another issuer = %d, want the 200 of an unknown token", status)
		}
	}
	if !live() {
		t.Fatal("the second gateway ended the first one's grant")
	}
	if a, err := f.auth.Authenticate(ctx, bearer(access)); err != nil || a == nil {
		t.Fatalf("access token after the other issuer's attempts = %v, %v", a, err)
	}

	// At its own issuer: a resource that is not the grant's is refused
	// without spending the token; then the refresh works.
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {f.client},
		"resource": {"https://gw.example.com"}}
	if status, body := tokenRequest(t, f.srv, "/oauth/token", form); status != http.StatusBadRequest || body["error"] != "invalid_target" {
		t.Errorf("refresh for the grant's other identifier = %d %v, want invalid_target", status, body)
	}
	form.Set("resource", "HTTPS://GW.EXAMPLE.COM:443/mcp")
	status, body := tokenRequest(t, f.srv, "/oauth/token", form)
	if status != http.StatusOK || !strings.HasPrefix(body["access_token"], accessPrefix) {
		t.Fatalf("refresh at its own issuer with a canonical equal resource = %d %v, want new tokens", status, body)
	}
	if !live() {
		t.Fatal("the first refresh at the right issuer revoked the grant")
	}
}

// An unknown scope is refused; a code's resource is bound at the token
// endpoint too.
func TestAuthorizationCodeBoundToIssuer(t *testing.T) {
	f := newFixture(t, "https://gw.example.com")
	other := New(Options{DB: f.db, PublicURL: "https://second.example.com"})
	code := newSecret(codePrefix)
	verifier := strings.Repeat("v", 43)
	if err := f.db.CreateOAuthCode(context.Background(), mcpgate.HashToken(code), storeCode(f, verifier)); err != nil {
		t.Fatal(err)
	}
	status, body := tokenRequest(t, other, "/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"code_verifier": {verifier}, "client_id": {f.client}, "redirect_uri": {"http://127.0.0.1/cb"}})
	if status != http.StatusBadRequest || body["error"] != "invalid_grant" || body["access_token"] != "" {
		t.Errorf("a code redeemed at another issuer = %d %v, want invalid_grant", status, body)
	}
}
