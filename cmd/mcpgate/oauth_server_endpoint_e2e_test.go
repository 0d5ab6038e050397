package main

// OAuth clients on each upstream server's own endpoint, /mcp/<server>:
// go-sdk's OAuth client, the official TypeScript SDK's and
// golang.org/x/oauth2 discover the endpoint's own protected-resource
// metadata, ask for tokens for it (RFC 8707) and use them there alone.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// serverEndpointOAuthEnv is an OAuth deployment where alice's workspace
// has two upstream servers, docs and wiki, with every tool on.
func serverEndpointOAuthEnv(t *testing.T) (*oauthEnv, *e2eUser) {
	t.Helper()
	o := newOAuthEnv(t)
	alice := o.signup(o.front, "alice@example.com", "")
	o.rec.secret(strings.TrimPrefix(endpointUpstreamToken, "Bearer "), "upstream credential")
	for _, name := range []string{"docs", "wiki"} {
		e2eAddServer(alice, alice.personal, name, startEndpointUpstream(t).url, endpointUpstreamToken)
		turnAllToolsOn(t, alice, alice.personal, name)
	}
	return o, alice
}

func getJSONDoc(t *testing.T, u string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &doc)
	return resp.StatusCode, doc
}

// TestOAuthServerEndpoint_Discovery: a 401 from /mcp/docs points to the
// endpoint's own metadata, whose resource is exactly the endpoint; a name
// alice's workspace lacks gets the same document (the metadata tells no
// one which names a workspace uses).
func TestOAuthServerEndpoint_Discovery(t *testing.T) {
	o, _ := serverEndpointOAuthEnv(t)
	docsURL := o.front + "/mcp/docs"
	resp, _ := o.rawMCP(t, docsURL, nil, "")
	meta := o.front + "/.well-known/oauth-protected-resource/mcp/docs"
	if want := `Bearer resource_metadata="` + meta + `", scope="mcp:tools"`; resp.StatusCode != http.StatusUnauthorized ||
		resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("no token at /mcp/docs = %d %q, want 401 %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
	}
	status, doc := getJSONDoc(t, meta)
	if status != http.StatusOK || doc["resource"] != docsURL {
		t.Fatalf("metadata = %d %v, want resource %s", status, doc, docsURL)
	}
	status, other := getJSONDoc(t, o.front+"/.well-known/oauth-protected-resource/mcp/nobody")
	if status != http.StatusOK || other["resource"] != o.front+"/mcp/nobody" {
		t.Fatalf("metadata of a name no workspace has = %d %v, want the same document for it", status, other)
	}
	delete(doc, "resource")
	delete(doc, "resource_name")
	delete(other, "resource")
	delete(other, "resource_name")
	if a, b := mustJSON(t, doc), mustJSON(t, other); a != b {
		t.Errorf("metadata differs between a server alice has and one nobody has: %s / %s", a, b)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOAuthServerEndpoint_GoSDK: go-sdk's OAuth client configured with
// /mcp/docs signs in for that resource (DCR, PKCE, the consent over HTTP),
// calls the server's tool by its own name, and the token it holds is
// refused at /mcp/wiki and at /mcp.
func TestOAuthServerEndpoint_GoSDK(t *testing.T) {
	o, alice := serverEndpointOAuthEnv(t)
	docsURL := o.front + "/mcp/docs"
	cb := newCallback(t)
	var asked []string
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "go-sdk server endpoint", RedirectURIs: []string{cb.url}, TokenEndpointAuthMethod: "none"}},
		RequestRefreshToken: true,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			if u, err := url.Parse(args.URL); err == nil {
				asked = append(asked, u.Query().Get("resource"))
			}
			loc, status, body := o.consent(t, alice, args.URL, alice.personal, "full", "allow")
			if loc == nil || loc.Query().Get("code") == "" {
				t.Errorf("consent = %d %s", status, body)
				return nil, errors.New("no code")
			}
			o.rec.secret(loc.Query().Get("code"), "authorization code")
			return &auth.AuthorizationResult{Code: loc.Query().Get("code"), State: loc.Query().Get("state"), Iss: loc.Query().Get("iss")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := e2eConnect(t, &mcp.StreamableClientTransport{Endpoint: docsURL, OAuthHandler: h, MaxRetries: -1}, "", nil, 60*time.Second)
	if err != nil {
		t.Fatalf("Connect() to /mcp/docs with OAuth err = %v", err)
	}
	defer cs.Close()
	if res := e2eCall(t, cs, "lookup", nil); res.IsError || testutil.ToolText(res) != "found it" {
		t.Fatalf("lookup on /mcp/docs = %+v, want the server's answer", res)
	}
	if len(asked) != 1 || asked[0] != docsURL {
		t.Errorf("go-sdk asked for resources %v, want %s once", asked, docsURL)
	}
	ts, _ := h.TokenSource(context.Background())
	tok, err := ts.Token()
	if err != nil {
		t.Fatal(err)
	}
	o.rec.secret(tok.AccessToken, "access token")
	for endpoint, want := range map[string]int{docsURL: http.StatusOK, o.front + "/mcp/wiki": http.StatusUnauthorized,
		o.front + "/mcp": http.StatusUnauthorized} {
		if got := o.mcpStatus(t, endpoint, tok.AccessToken); got != want {
			t.Errorf("/mcp/docs's token at %s = %d, want %d", endpoint, got, want)
		}
	}
	o.noSecretsInLogs(t)
}

// TestOAuthServerEndpoint_TokenRules drives the token endpoint with
// golang.org/x/oauth2: a code for /mcp/wiki is redeemed only naming
// /mcp/wiki; its token works there and not at /mcp/docs; a refresh keeps
// the resource (and refuses to name another endpoint); a read-only grant's
// call of a tool that changes things is stepped up naming the endpoint's
// own metadata, while its read is served.
func TestOAuthServerEndpoint_TokenRules(t *testing.T) {
	o, alice := serverEndpointOAuthEnv(t)
	ctx := context.Background()
	docsURL, wikiURL := o.front+"/mcp/docs", o.front+"/mcp/wiki"
	cb := newCallback(t)
	cfg := o.config(o.register(t, "x/oauth2 server endpoint", cb.url), cb.url)
	forResource := func(r string) oauth2.AuthCodeOption { return oauth2.SetAuthURLParam("resource", r) }

	code, verifier := o.code(t, alice, cfg, alice.personal, "full", forResource(wikiURL))
	_, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier), forResource(docsURL))
	wantOAuthError(t, err, "invalid_target")
	code, verifier = o.code(t, alice, cfg, alice.personal, "full", forResource(wikiURL))
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier), forResource(wikiURL))
	if err != nil {
		t.Fatalf("Exchange() for /mcp/wiki err = %v", err)
	}
	o.rec.secret(tok.AccessToken, "access token")
	o.rec.secret(tok.RefreshToken, "refresh token")
	wantAt := func(when, token string) {
		t.Helper()
		if got := o.mcpStatus(t, wikiURL, token); got != http.StatusOK {
			t.Errorf("%s: at /mcp/wiki = %d, want 200", when, got)
		}
		if got := o.mcpStatus(t, docsURL, token); got != http.StatusUnauthorized {
			t.Errorf("%s: at /mcp/docs = %d, want 401", when, got)
		}
	}
	wantAt("the wiki token", tok.AccessToken)

	refresh := func(resource string) (int, map[string]string) {
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {cfg.ClientID}}
		if resource != "" {
			form.Set("resource", resource)
		}
		resp, err := http.PostForm(o.front+"/oauth/token", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]string
		raw, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(raw, &body)
		return resp.StatusCode, body
	}
	if status, body := refresh(docsURL); status != http.StatusBadRequest || body["error"] != "invalid_target" {
		t.Errorf("refresh of the wiki grant naming /mcp/docs = %d %v, want invalid_target", status, body["error"])
	}
	status, body := refresh("")
	if status != http.StatusOK || body["access_token"] == "" {
		t.Fatalf("refresh = %d %v, want new tokens", status, body["error"])
	}
	o.rec.secret(body["access_token"], "access token")
	o.rec.secret(body["refresh_token"], "refresh token")
	wantAt("the refreshed token", body["access_token"])

	code, verifier = o.code(t, alice, cfg, alice.personal, "read_only", forResource(docsURL))
	ro, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier), forResource(docsURL))
	if err != nil {
		t.Fatal(err)
	}
	o.rec.secret(ro.AccessToken, "access token")
	o.rec.secret(ro.RefreshToken, "refresh token")
	resp, raw := o.rawMCPCall(t, docsURL, ro.AccessToken, "publish")
	want := `Bearer error="insufficient_scope", resource_metadata="` + o.front + `/.well-known/oauth-protected-resource/mcp/docs", scope="mcp:tools"`
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(got, want) {
		t.Errorf("read-only call of publish = %d %q %s, want 403 starting %q", resp.StatusCode, got, raw, want)
	}
	if resp, raw := o.rawMCPCall(t, docsURL, ro.AccessToken, "lookup"); resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), "found it") {
		t.Errorf("read-only call of lookup = %d %s, want served", resp.StatusCode, raw)
	}
	o.noSecretsInLogs(t)
}

// TestOAuthServerEndpoint_TypeScriptSDK: the official TypeScript SDK's
// client configured with /mcp/docs signs in for it, calls the server's
// tool, refreshes (keeping the resource) and calls again; its grant names
// the endpoint.
func TestOAuthServerEndpoint_TypeScriptSDK(t *testing.T) {
	o, alice := serverEndpointOAuthEnv(t)
	docsURL := o.front + "/mcp/docs"
	ts := startTSClient(t, "flow", docsURL, "http://127.0.0.1:1/callback", "lookup")
	var authorize struct{ Step, URL string }
	ts.read(&authorize)
	u, err := url.Parse(authorize.URL)
	if authorize.Step != "authorize" || err != nil || u.Query().Get("resource") != docsURL {
		t.Fatalf("first step = %q at %v, want an authorization for %s", authorize.Step, err, docsURL)
	}
	loc, status, body := o.consent(t, alice, authorize.URL, alice.personal, "full", "allow")
	if loc == nil || loc.Query().Get("code") == "" {
		t.Fatalf("consent = %v %d %s, want a redirect with a code", loc, status, body)
	}
	o.rec.secret(loc.Query().Get("code"), "authorization code")
	ts.write(map[string]string{"code": loc.Query().Get("code")})
	var signedIn struct{ Step, Scope string }
	ts.read(&signedIn)
	if signedIn.Step != "signed-in" {
		t.Fatalf("after the code: %+v", signedIn)
	}
	wantCall := func(when string) {
		t.Helper()
		var c struct {
			Step    string
			IsError bool `json:"isError"`
			Text    string
		}
		ts.read(&c)
		if c.Step != "called" || c.IsError || c.Text != "found it" {
			t.Fatalf("%s: %+v, want the server's answer", when, c)
		}
	}
	wantCall("first call")
	var refreshed struct {
		Step, Result string
		Rotated      bool
	}
	ts.read(&refreshed)
	if refreshed.Result != "AUTHORIZED" || !refreshed.Rotated {
		t.Fatalf("refresh = %+v, want AUTHORIZED with a new access token", refreshed)
	}
	wantCall("call after the refresh")
	var resource string
	if err := o.dbConn(t).QueryRow(context.Background(), `SELECT g.resource FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id
		WHERE g.workspace_id = $1 AND c.name = 'TypeScript SDK e2e'`, alice.personal).Scan(&resource); err != nil || resource != docsURL {
		t.Errorf("the TypeScript client's grant names %q (%v), want %s", resource, err, docsURL)
	}
}
