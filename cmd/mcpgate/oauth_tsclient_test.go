package main

// The official MCP TypeScript SDK as an OAuth client: its own
// schema judges the registration answers, and its StreamableHTTPClientTransport
// with an OAuthClientProvider signs in with the SDK's default client metadata,
// calls a tool, refreshes, and is cut off by a revoke in the dashboard.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/npmtest"
)

// tsClientSource is the client script and its npm package, pinned with
// integrity hashes in package-lock.json (@modelcontextprotocol/sdk 1.32.2).
const tsClientSource = "testdata/tsclient"

// tsClientDir returns a directory with the script and the SDK installed.
func tsClientDir(t *testing.T) string {
	t.Helper()
	dir := npmtest.Install(t, tsClientSource)
	// The script is copied on every run: it is ours, and may change
	// without the lockfile changing.
	npmtest.CopyFile(t, filepath.Join(tsClientSource, "client.mjs"), filepath.Join(dir, "client.mjs"))
	return dir
}

// tsClient is one run of client.mjs.
type tsClient struct {
	t      *testing.T
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *testutil.LockedBuffer
	cancel context.CancelFunc
	cmd    *exec.Cmd
}

func startTSClient(t *testing.T, args ...string) *tsClient {
	t.Helper()
	dir := tsClientDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, "node", append([]string{"client.mjs"}, args...)...)
	cmd.Dir = dir
	c := &tsClient{t: t, stderr: &testutil.LockedBuffer{}, cancel: cancel, cmd: cmd}
	cmd.Stderr = c.stderr
	var err error
	if c.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.out = bufio.NewScanner(stdout)
	c.out.Buffer(make([]byte, 1<<20), 1<<20)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	return c
}

// read decodes the script's next line into v; a line saying "error" fails
// the test with the script's stack.
func (c *tsClient) read(v any) {
	c.t.Helper()
	if !c.out.Scan() {
		c.t.Fatalf("the TypeScript client stopped: %v\nstderr:\n%s", c.out.Err(), c.stderr)
	}
	line := c.out.Bytes()
	var step struct {
		Step  string `json:"step"`
		Error string `json:"error"`
	}
	if json.Unmarshal(line, &step) == nil && step.Step == "error" {
		c.t.Fatalf("the TypeScript client failed: %s\nstderr:\n%s", step.Error, c.stderr)
	}
	if err := json.Unmarshal(line, v); err != nil {
		c.t.Fatalf("the TypeScript client said %q: %v", line, err)
	}
}

func (c *tsClient) write(v any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("write to the TypeScript client: %v\nstderr:\n%s", err, c.stderr)
	}
}

// TestOAuthRegistrationAnswers registers clients as the libraries in use do
// (with and without the optional fields) and has each answer judged by the
// TypeScript SDK's own schema and by go-sdk's RegisterClient. The SDK's
// default metadata has no client_uri; an answer of "client_uri":"" failed
// its schema (invalid_format url), so no client built on it could sign in.
func TestOAuthRegistrationAnswers(t *testing.T) {
	o := newOAuthEnv(t)
	cases := []struct {
		name string
		md   oauthex.ClientRegistrationMetadata
		// want are fields the answer must echo; absent must not appear.
		want   map[string]any
		absent []string
	}{
		{name: "SDK default, no client_uri", md: oauthex.ClientRegistrationMetadata{ClientName: "TS default",
			RedirectURIs: []string{"http://localhost:8090/callback"}, GrantTypes: []string{"authorization_code", "refresh_token"},
			ResponseTypes: []string{"code"}, TokenEndpointAuthMethod: "none"},
			want: map[string]any{"client_name": "TS default"}, absent: []string{"client_uri"}},
		{name: "redirect only", md: oauthex.ClientRegistrationMetadata{RedirectURIs: []string{"http://127.0.0.1:5555/cb"}},
			absent: []string{"client_uri", "client_name"}},
		{name: "with client_uri", md: oauthex.ClientRegistrationMetadata{ClientName: "Site", ClientURI: "https://app.example.com/",
			RedirectURIs: []string{"https://app.example.com/cb"}}, want: map[string]any{"client_uri": "https://app.example.com/"}},
		{name: "http client_uri is not kept", md: oauthex.ClientRegistrationMetadata{ClientName: "Plain",
			ClientURI: "http://app.example.com/", RedirectURIs: []string{"http://127.0.0.1/cb"}}, absent: []string{"client_uri"}},
		{name: "scope echoed", md: oauthex.ClientRegistrationMetadata{RedirectURIs: []string{"http://127.0.0.1/cb"},
			Scope: "mcp:tools:read"}, want: map[string]any{"scope": "mcp:tools:read"}},
	}
	var answers []map[string]any
	for _, tc := range cases {
		body, _ := json.Marshal(&tc.md)
		resp, err := http.Post(o.front+"/oauth/register", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var a map[string]any
		if resp.StatusCode != http.StatusCreated || json.Unmarshal(raw, &a) != nil {
			t.Fatalf("%s: register = %d %s", tc.name, resp.StatusCode, raw)
		}
		for k, v := range a {
			if s, ok := v.(string); ok && s == "" {
				t.Errorf("%s: the answer has an empty %q; an unset field must be left out", tc.name, k)
			}
		}
		for k, v := range tc.want {
			if a[k] != v {
				t.Errorf("%s: answer %s = %v, want %v", tc.name, k, a[k], v)
			}
		}
		for _, k := range tc.absent {
			if _, ok := a[k]; ok {
				t.Errorf("%s: answer has %s = %v, want it left out", tc.name, k, a[k])
			}
		}
		answers = append(answers, a)
		// go-sdk's client checks the answer's URLs as it decodes it.
		if _, err := oauthex.RegisterClient(context.Background(), o.front+"/oauth/register", &tc.md, nil); err != nil {
			t.Errorf("%s: go-sdk RegisterClient() err = %v", tc.name, err)
		}
	}
	ts := startTSClient(t, "validate")
	ts.write(answers)
	var verdicts []struct {
		OK     bool     `json:"ok"`
		Issues []string `json:"issues"`
	}
	ts.read(&verdicts)
	if len(verdicts) != len(cases) {
		t.Fatalf("the SDK judged %d answers, want %d", len(verdicts), len(cases))
	}
	for i, v := range verdicts {
		if !v.OK {
			t.Errorf("%s: the TypeScript SDK's OAuthClientInformationFullSchema refuses the answer: %s",
				cases[i].name, strings.Join(v.Issues, "; "))
		}
	}
}

// TestOAuthTypeScriptSDK signs in with the official TypeScript SDK's OAuth
// client as an app built on it does: default metadata (no client_uri), DCR,
// PKCE, the consent (driven over HTTP as alice), a tool call, a refresh,
// and the end of access when alice revokes the app in the dashboard.
func TestOAuthTypeScriptSDK(t *testing.T) {
	o := newOAuthEnv(t)
	alice, teamA := o.signupWithE2B(o.front, "alice@example.com")
	o.simSandbox(teamA, map[string]any{"templateID": "base"})
	ts := startTSClient(t, "flow", o.front+"/mcp", "http://127.0.0.1:1/callback")

	var authorize struct {
		Step, URL string
	}
	ts.read(&authorize)
	if authorize.Step != "authorize" {
		t.Fatalf("first step = %q, want authorize", authorize.Step)
	}
	loc, status, body := o.consent(t, alice, authorize.URL, alice.personal, "full", "allow")
	if loc == nil || loc.Query().Get("code") == "" {
		t.Fatalf("consent = %v %d %s, want a redirect with a code", loc, status, body)
	}
	o.rec.secret(loc.Query().Get("code"), "authorization code")
	ts.write(map[string]string{"code": loc.Query().Get("code")})

	var signedIn struct {
		Step, Scope string
		ClientID    string `json:"client_id"`
	}
	ts.read(&signedIn)
	if signedIn.Step != "signed-in" || signedIn.Scope != "mcp:tools" {
		t.Fatalf("after the code: %+v, want signed in with mcp:tools", signedIn)
	}
	type called struct {
		Step       string
		IsError    bool           `json:"isError"`
		Structured map[string]any `json:"structured"`
	}
	wantCall := func(when string) {
		t.Helper()
		var c called
		ts.read(&c)
		if data, _ := c.Structured["data"].([]any); c.Step != "called" || c.IsError || len(data) != 1 {
			t.Fatalf("%s: %+v, want alice's one sandbox", when, c)
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

	gid := alice.with(t).grantOf(alice.personal, "TypeScript SDK e2e")
	if gid == "" {
		t.Fatalf("grant not listed: %+v", alice.grants(alice.personal))
	}
	alice.with(t).api(http.MethodDelete, "/api/v1/workspaces/"+alice.personal+"/grants/"+gid, nil, http.StatusNoContent)
	mark := o.simLog.mark()
	ts.write(map[string]bool{"revoked": true})
	// The refused call makes the SDK try its refresh token, which the
	// revoke ended too, so it asks the person to sign in again...
	ts.read(&authorize)
	if authorize.Step != "authorize" {
		t.Fatalf("after the revoke: step %q, want a new authorization", authorize.Step)
	}
	// ...and the call fails.
	var cut struct {
		Step         string
		Served       bool
		Unauthorized bool
		AskedAgain   bool `json:"asked_to_sign_in_again"`
		Error        string
	}
	ts.read(&cut)
	if cut.Served || !cut.Unauthorized || !cut.AskedAgain {
		t.Fatalf("call after the revoke = %+v, want refused, the refresh refused too, and a new sign-in asked", cut)
	}
	if n := len(o.simLog.since(mark)); n != 0 {
		t.Errorf("the revoked app's call reached E2B (%d requests)", n)
	}
}
