package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// grantAuth authenticates "tok-<resource path>" as a read-only OAuth
// grant's token for http://gateway.test<path>, and "tok-root" for the
// path-less identifier.
type grantAuth struct{}

func (grantAuth) Authenticate(_ context.Context, p mcpgate.Presented) (*mcpgate.Actor, error) {
	path, ok := strings.CutPrefix(p.Value.Reveal(), "tok-")
	if !ok || !p.Bearer {
		return nil, &mcpgate.AuthError{Reason: "unknown"}
	}
	resource := "http://gateway.test" + path
	if path == "root" {
		resource = "http://gateway.test"
	}
	return &mcpgate.Actor{UserID: "u1", WorkspaceID: "w1", GrantID: "g1", Scope: mcpgate.ScopeReadOnly,
		Resource: resource, Source: mcpgate.SourceMCP}, nil
}

// The gateway's audience rule, as oauth.TokenFor states it (the mcp
// package does not import the authorization server): the path-less
// identifier everywhere, an endpoint's own URL at that endpoint alone.
func testTokenFor(resource, path string) bool {
	return resource == "http://gateway.test" || resource == "http://gateway.test"+path
}

func oauthEndpointFixture(t *testing.T) string {
	eps := &fakeEndpoints{EndpointFn: func(server string) (*mcpgate.ServerEndpoint, error) {
		ep := docsEndpoint()
		ep.Server = server
		return ep, nil
	}}
	url, tools := serverEndpointFixture(t, eps, func(o *Options) {
		o.Authenticators = []mcpgate.Authenticator{grantAuth{}}
		o.Challenge = `Bearer resource_metadata="http://gateway.test/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`
		o.ServerChallenge = func(server string) string {
			return `Bearer resource_metadata="http://gateway.test/.well-known/oauth-protected-resource/mcp/` + server + `", scope="mcp:tools"`
		}
		o.TokenFor = testTokenFor
	})
	publish := mcpgate.ToolInfo{Name: "docs_publish", Enabled: true}
	tools.set = &mcpgate.ToolSet{All: map[string]mcpgate.ToolInfo{"docs_publish": publish}, Tools: []mcpgate.ToolInfo{publish}}
	return url
}

func postMCP(t *testing.T, url, bearer, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// A server's own endpoint challenges with its own resource metadata, and
// serves only the tokens for it (or for the whole gateway): a token for
// another server's endpoint or for /mcp is refused as invalid there,
// pointing at the endpoint's metadata so that the client can sign in for
// it.
func TestServerHandler_OAuthAudience(t *testing.T) {
	url := oauthEndpointFixture(t)
	const list = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	docsMeta := `Bearer resource_metadata="http://gateway.test/.well-known/oauth-protected-resource/mcp/docs", scope="mcp:tools"`
	if resp := postMCP(t, url+"/mcp/docs", "", list); resp.StatusCode != http.StatusUnauthorized ||
		resp.Header.Get("WWW-Authenticate") != docsMeta {
		t.Errorf("no token = %d %q, want 401 %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), docsMeta)
	}
	for _, tt := range []struct {
		token string
		want  int
	}{
		{"tok-/mcp/docs", http.StatusOK},
		{"tok-root", http.StatusOK},
		{"tok-/mcp/wiki", http.StatusUnauthorized},
		{"tok-/mcp", http.StatusUnauthorized},
	} {
		resp := postMCP(t, url+"/mcp/docs", tt.token, list)
		if resp.StatusCode != tt.want {
			t.Errorf("%s at /mcp/docs = %d, want %d", tt.token, resp.StatusCode, tt.want)
		}
		if tt.want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") != docsMeta+`, error="invalid_token"` {
			t.Errorf("%s at /mcp/docs challenge = %q, want the endpoint's metadata with invalid_token", tt.token, resp.Header.Get("WWW-Authenticate"))
		}
	}
	// And the other way: /mcp/docs's token at /mcp/wiki.
	if resp := postMCP(t, url+"/mcp/wiki", "tok-/mcp/docs", list); resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), "/oauth-protected-resource/mcp/wiki\"") {
		t.Errorf("/mcp/docs's token at /mcp/wiki = %d %q, want 401 naming wiki's metadata", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// A read-only grant's call of a tool that changes things on a server's
// endpoint is stepped up with the endpoint's own metadata, so that the
// client asks for more scope for the resource it holds a token for.
func TestServerHandler_StepUpNamesEndpoint(t *testing.T) {
	url := oauthEndpointFixture(t)
	resp := postMCP(t, url+"/mcp/docs", "tok-/mcp/docs", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"publish","arguments":{}}}`)
	want := `Bearer error="insufficient_scope", resource_metadata="http://gateway.test/.well-known/oauth-protected-resource/mcp/docs", scope="mcp:tools"`
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(got, want) {
		t.Errorf("read-only call of publish = %d %q, want 403 starting %q", resp.StatusCode, got, want)
	}
}

// /mcp serves the tokens for it and for the whole gateway, never a
// server endpoint's: that token's grant reaches one server's tools, /mcp
// all of the workspace's.
func TestHandler_OAuthAudience(t *testing.T) {
	g := New(Options{Tools: &fakeTools{set: &mcpgate.ToolSet{All: map[string]mcpgate.ToolInfo{}}}, Authenticators: []mcpgate.Authenticator{grantAuth{}},
		TokenFor: testTokenFor, Registry: connectors.NewRegistry(), PublicURL: "http://gateway.test", ConfirmationSecret: []byte("serverendpoint-test-secret-0123456789")})
	t.Cleanup(g.Close)
	for token, want := range map[string]bool{"tok-/mcp": true, "tok-root": true, "tok-/mcp/docs": false} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		g.Handler().ServeHTTP(w, r)
		if got := w.Code != http.StatusUnauthorized; got != want {
			t.Errorf("%s at /mcp = %d, want served %v", token, w.Code, want)
		}
	}
}
