package upstreamauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpgate/mcpgate/internal/upstream"
)

var loopback = upstream.Network{Private: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

func TestAuthServerMetadataURLs_SpecOrder(t *testing.T) {
	got, _ := AuthServerMetadataURLs("https://as.example/tenant1")
	want := []string{"https://as.example/.well-known/oauth-authorization-server/tenant1",
		"https://as.example/.well-known/openid-configuration/tenant1", "https://as.example/tenant1/.well-known/openid-configuration"}
	if !slices.Equal(got, want) {
		t.Errorf("with a path = %v, want %v", got, want)
	}
	got, _ = AuthServerMetadataURLs("https://as.example/")
	want = []string{"https://as.example/.well-known/oauth-authorization-server", "https://as.example/.well-known/openid-configuration"}
	if !slices.Equal(got, want) {
		t.Errorf("without a path = %v, want %v", got, want)
	}
}

// fixture is a protected resource whose behaviour each test sets.
type fixture struct {
	srv     *httptest.Server
	status  int
	prm     map[string]any
	meta    map[string]any
	oidc    bool // the metadata is served only at OpenID Connect discovery
	tried   []string
	bigMeta bool
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{status: 401}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.tried = append(f.tried, r.URL.Path)
		js := func(v any) {
			w.Header().Set("Content-Type", "application/json")
			if f.bigMeta {
				_, _ = w.Write([]byte(`{"pad":"` + strings.Repeat("x", DefaultMaxBytes) + `"}`))
				return
			}
			_ = json.NewEncoder(w).Encode(v)
		}
		switch {
		case r.URL.Path == "/mcp":
			if f.status == 401 {
				w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+f.srv.URL+`/prm"`)
			}
			w.WriteHeader(f.status)
		case r.URL.Path == "/prm":
			js(f.prm)
		case r.URL.Path == "/.well-known/openid-configuration" && f.oidc,
			r.URL.Path == "/.well-known/oauth-authorization-server" && !f.oidc:
			js(f.meta)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.srv.Close)
	f.prm = map[string]any{"resource": f.srv.URL + "/mcp", "authorization_servers": []string{f.srv.URL}, "scopes_supported": []string{"a", "b"}}
	f.meta = map[string]any{"issuer": f.srv.URL, "authorization_endpoint": f.srv.URL + "/authorize", "token_endpoint": f.srv.URL + "/token",
		"code_challenge_methods_supported": []string{"S256"}}
	return f
}

func TestDiscover(t *testing.T) {
	c := &Client{Network: loopback}
	ctx := context.Background()
	f := newFixture(t)
	d, err := c.Discover(ctx, f.srv.URL+"/mcp")
	if err != nil || d.Issuer != f.srv.URL || d.Resource != f.srv.URL+"/mcp" || d.Scopes != "a b" || d.Metadata.TokenEndpoint == "" {
		t.Fatalf("Discover() = %+v, %v", d, err)
	}
	f.oidc, f.tried = true, nil
	if _, err := c.Discover(ctx, f.srv.URL+"/mcp"); err != nil {
		t.Errorf("Discover() with OpenID Connect discovery only err = %v", err)
	}
	if i, j := slices.Index(f.tried, "/.well-known/oauth-authorization-server"), slices.Index(f.tried, "/.well-known/openid-configuration"); i < 0 || j < i {
		t.Errorf("metadata URIs tried %v, want RFC 8414 before OpenID Connect", f.tried)
	}
	f.oidc = false

	for name, breakIt := range map[string]func(*fixture){
		"no 401":              func(f *fixture) { f.status = 200 },
		"another resource":    func(f *fixture) { f.prm["resource"] = "https://other.example/mcp" },
		"another issuer":      func(f *fixture) { f.meta["issuer"] = "https://other.example" },
		"no PKCE S256":        func(f *fixture) { f.meta["code_challenge_methods_supported"] = []string{"plain"} },
		"script endpoint":     func(f *fixture) { f.meta["authorization_endpoint"] = "javascript:alert(1)" },
		"an oversized answer": func(f *fixture) { f.bigMeta = true },
	} {
		f := newFixture(t)
		breakIt(f)
		if _, err := c.Discover(ctx, f.srv.URL+"/mcp"); err == nil {
			t.Errorf("Discover() with %s succeeded", name)
		}
	}
	// The hop's policy: loopback is not reachable without it.
	strict := &Client{Network: upstream.Network{}}
	if _, err := strict.Discover(ctx, f.srv.URL+"/mcp"); err == nil {
		t.Error("Discover() reached a loopback server outside the policy")
	}
}

func TestRegister_CIMDOnlyAtHTTPS(t *testing.T) {
	c := &Client{Network: loopback, ClientName: "gw"}
	meta := &oauthex.AuthServerMeta{ClientIDMetadataDocumentSupported: true}
	reg, err := c.Register(context.Background(), meta, "https://gw.example/oauth/upstream-client.json", "https://gw.example/cb")
	if err != nil || reg.Kind != "cimd" || reg.ClientID != "https://gw.example/oauth/upstream-client.json" {
		t.Errorf("Register() = %+v, %v, want the document's URL as client id", reg, err)
	}
	if _, err := c.Register(context.Background(), meta, "http://gw.example/oauth/upstream-client.json", "http://gw.example/cb"); err == nil {
		t.Error("Register() at an http PUBLIC_URL with no registration endpoint succeeded")
	}
}

// An authorization server that echoes the refresh token in its error gets
// it replaced: the error goes to logs and the audit log.
func TestRefresh_EchoedSecretRedacted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant",
			"error_description": "bad token " + r.Form.Get("refresh_token") + " for " + r.Form.Get("client_secret")})
	}))
	t.Cleanup(srv.Close)
	c := &Client{Network: loopback}
	_, err := c.Refresh(context.Background(), &oauthex.AuthServerMeta{TokenEndpoint: srv.URL + "/token"},
		Registration{ClientID: "c", ClientSecret: "client-secret-42"}, "rt-secret-0123", srv.URL+"/mcp")
	if !InvalidGrant(err) {
		t.Fatalf("Refresh() err = %v, want invalid_grant", err)
	}
	var e *Error
	_ = errors.As(err, &e)
	for _, s := range []string{err.Error(), e.Description} {
		if strings.Contains(s, "rt-secret-0123") || strings.Contains(s, "client-secret-42") {
			t.Errorf("the error carries a secret: %q", s)
		}
	}
}

// Differential: go-sdk's oauthex reads the same server's metadata to the
// same resource, issuer and endpoints as Discover does.
func TestDiscover_AgreesWithGoSDK(t *testing.T) {
	f := newFixture(t)
	f.meta["registration_endpoint"] = f.srv.URL + "/register"
	f.meta["revocation_endpoint"] = f.srv.URL + "/revoke"
	ctx := context.Background()
	d, err := (&Client{Network: loopback}).Discover(ctx, f.srv.URL+"/mcp")
	if err != nil {
		t.Fatal(err)
	}
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, f.srv.URL+"/prm", f.srv.URL+"/mcp", f.srv.Client())
	if err != nil {
		t.Fatalf("oauthex.GetProtectedResourceMetadata() err = %v", err)
	}
	asm, err := oauthex.GetAuthServerMeta(ctx, f.srv.URL+"/.well-known/oauth-authorization-server", prm.AuthorizationServers[0], f.srv.Client())
	if err != nil || asm == nil {
		t.Fatalf("oauthex.GetAuthServerMeta() = %v, %v", asm, err)
	}
	if d.Resource != prm.Resource || d.Issuer != prm.AuthorizationServers[0] || d.Metadata.Issuer != asm.Issuer ||
		d.Metadata.TokenEndpoint != asm.TokenEndpoint || d.Metadata.AuthorizationEndpoint != asm.AuthorizationEndpoint ||
		d.Metadata.RegistrationEndpoint != asm.RegistrationEndpoint || d.Metadata.RevocationEndpoint != asm.RevocationEndpoint ||
		!slices.Equal(d.Metadata.CodeChallengeMethodsSupported, asm.CodeChallengeMethodsSupported) {
		t.Errorf("ours = %+v / %+v, go-sdk's = %+v / %+v", d, d.Metadata, prm, asm)
	}
	chs, _ := oauthex.ParseWWWAuthenticate([]string{`Bearer resource_metadata="` + f.srv.URL + `/prm"`})
	if len(chs) != 1 || chs[0].Params["resource_metadata"] != d.ResourceMetadataURL {
		t.Errorf("go-sdk reads the challenge as %+v, we found %q", chs, d.ResourceMetadataURL)
	}
}

// TestResourceCovers: a server's protected-resource metadata may name the
// server's URL or a parent of it on the same origin (metadata at the root
// names the origin), never another origin, a sibling path or a longer one.
func TestResourceCovers(t *testing.T) {
	server, _ := url.Parse("https://api.example.com/v1/mcp")
	for resource, want := range map[string]bool{
		"https://api.example.com/v1/mcp": true, "https://api.example.com/v1/mcp/": true, "https://api.example.com/v1": true,
		"https://api.example.com": true, "https://api.example.com/": true, "https://API.example.com/v1": true,
		"https://api.example.com/v": false, "https://api.example.com/v1/mcp/more": false, "http://api.example.com/v1/mcp": false,
		"https://other.example.com/v1/mcp": false, "https://api.example.com:8443/v1/mcp": false,
		"https://api.example.com/v1/mcp#x": false, "https://api.example.com/v1?x=1": false, "": false,
	} {
		if got := resourceCovers(resource, server); got != want {
			t.Errorf("resourceCovers(%q, %s) = %t, want %t", resource, server, got, want)
		}
	}
}

// TestToken_ClientAuthentication: a registered client with a secret
// authenticates at the token endpoint as the authorization server lists:
// HTTP Basic (form-encoded id and secret) unless it takes only the form's
// client_secret; a public client sends its id alone. Registration asks for
// the method the same way.
func TestToken_ClientAuthentication(t *testing.T) {
	type seen struct {
		basicID, basicSecret, formID, formSecret string
		basic                                    bool
	}
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		got = seen{formID: r.PostForm.Get("client_id"), formSecret: r.PostForm.Get("client_secret")}
		got.basicID, got.basicSecret, got.basic = r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"at","token_type":"Bearer"}`))
	}))
	t.Cleanup(srv.Close)
	c := &Client{Network: loopback}
	secret := Registration{ClientID: "id:1", ClientSecret: "s&cret"}
	for name, tc := range map[string]struct {
		methods []string
		reg     Registration
		want    seen
		asks    string
	}{
		"basic only":     {[]string{"client_secret_basic"}, secret, seen{basic: true, basicID: "id%3A1", basicSecret: "s%26cret"}, "client_secret_basic"},
		"basic and post": {[]string{"client_secret_post", "client_secret_basic"}, secret, seen{basic: true, basicID: "id%3A1", basicSecret: "s%26cret"}, "client_secret_basic"},
		"post only":      {[]string{"client_secret_post"}, secret, seen{formID: "id:1", formSecret: "s&cret"}, "client_secret_post"},
		"public":         {[]string{"none", "client_secret_basic"}, Registration{ClientID: "pub"}, seen{formID: "pub"}, "none"},
	} {
		meta := &oauthex.AuthServerMeta{TokenEndpoint: srv.URL + "/token", TokenEndpointAuthMethodsSupported: tc.methods}
		if _, err := c.Exchange(context.Background(), meta, tc.reg, "code", "verifier", "https://gw/cb", srv.URL+"/mcp"); err != nil {
			t.Fatalf("%s: Exchange() err = %v", name, err)
		}
		if got != tc.want {
			t.Errorf("%s: token request authenticated as %+v, want %+v", name, got, tc.want)
		}
		if m := registrationAuthMethod(meta); m != tc.asks {
			t.Errorf("%s: registers with %q, want %q", name, m, tc.asks)
		}
	}
}
