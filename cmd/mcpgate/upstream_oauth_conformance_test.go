package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil/conformance"
)

// oauthClientScenarios are the suite's authorization scenarios for
// clients, by protocol revision (extensions left out: client credentials,
// enterprise-managed authorization, DPoP and workload identity are not
// flows the gateway offers).
var oauthClientScenarios = map[string][]string{
	"2025-11-25": {"auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
		"auth/basic-cimd", "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
		"auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
		"auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
		"auth/pre-registration"},
	// The scenarios 2026-07-28 adds (the earlier ones hold there too).
	"2026-07-28": {"auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported",
		"auth/authorization-server-migration", "auth/iss-supported", "auth/iss-not-advertised", "auth/iss-supported-missing",
		"auth/iss-wrong-issuer", "auth/iss-unexpected", "auth/iss-normalized", "auth/metadata-issuer-mismatch"},
}

// oauthClientNotApplicable are the scenarios of oauthClientScenarios that
// test a flow the gateway does not take, or not yet, each with its reason:
// they are run and logged, not required.
var oauthClientNotApplicable = map[string]string{}

// TestUpstreamOAuthConformance runs the conformance suite's authorization
// scenarios for clients with the gateway as the client: for each, the
// suite's MCP server (answering 401 with protected-resource metadata) is
// added to a workspace as an OAuth server, an admin clicks Connect, the
// browser follows the suite's authorization server (which approves at
// once) back to the gateway's callback, and a tool of the server is
// called; the suite then judges every request its servers saw (metadata
// discovery, registration, PKCE, the resource parameter, scopes, token
// use).
func TestUpstreamOAuthConformance(t *testing.T) {
	suite := conformance.Install(t)
	e := newE2EEnv(t, 0)
	front := newFrontedGateway(t, e, "localhost", map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8,::1/128"})
	admin := e.signup(front, "oauth-conformance@example.com", "")
	ws := admin.personal
	for spec, scenarios := range oauthClientScenarios {
		for i, scenario := range scenarios {
			t.Run(spec+"/"+scenario, func(t *testing.T) {
				var steps []string
				r := suite.RunClient(t, scenario, spec, 30*time.Second, func(serverURL string, context []byte) {
					// One server per scenario: "c2511-3", "c2607-0".
					name := fmt.Sprintf("c%s%s-%d", spec[2:4], spec[5:7], i)
					steps = driveOAuthClient(admin.with(t), ws, name, serverURL, context)
				})
				if why, ok := oauthClientNotApplicable[scenario]; ok {
					if r.Status == conformance.Passed {
						t.Errorf("%s passes, but is listed as not: the list is stale", scenario)
					}
					t.Logf("not applicable: %s (%s): %s: %s\nthe gateway's steps: %s", scenario, why, r.Status, r.Message, strings.Join(steps, "; "))
					return
				}
				if r.Status != conformance.Passed {
					t.Errorf("%s: %s: %s\nthe gateway's steps: %s", scenario, r.Status, r.Message, strings.Join(steps, "; "))
				}
			})
		}
	}
}

// driveOAuthClient adds serverURL as an OAuth server named name, connects
// it as an admin would (the authorization server's redirect followed to
// the gateway's callback) and calls its tool, and says how far it got.
func driveOAuthClient(u *e2eUser, ws, name, serverURL string, scenario []byte) []string {
	var steps []string
	step := func(format string, args ...any) { steps = append(steps, fmt.Sprintf(format, args...)) }
	add := map[string]any{"name": name, "url": serverURL, "credential": "oauth"}
	// A scenario with a client registered beforehand hands its id and
	// secret, which an admin gives at Add.
	var pre struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if json.Unmarshal(scenario, &pre) == nil && pre.ClientID != "" {
		add["oauth_client_id"], add["oauth_client_secret"] = pre.ClientID, pre.ClientSecret
		step("pre-registered client")
	}
	status, body := u.do(u.t.Context(), http.MethodPost, "/api/v1/workspaces/"+ws+"/servers", add)
	step("add %d", status)
	if status != http.StatusCreated {
		step("%s", body)
		return steps
	}
	if !connectOAuth(u, ws, name, step) {
		return steps
	}
	var srv struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	status, body = u.do(u.t.Context(), http.MethodGet, "/api/v1/workspaces/"+ws+"/servers/"+name, nil)
	_ = json.Unmarshal(body, &srv)
	step("server %d, %d tools", status, len(srv.Tools))
	for _, tool := range srv.Tools {
		status, _ := u.do(u.t.Context(), http.MethodPut, "/api/v1/workspaces/"+ws+"/servers/"+name+"/tools/"+tool.Name,
			map[string]any{"enabled": true, "approval": "none"})
		step("tool %s on %d", tool.Name, status)
	}
	call := func() (int, []byte) {
		status, body := u.do(u.t.Context(), http.MethodPost, "/api/v1/workspaces/"+ws+"/tools/"+name+"_test-tool/call",
			map[string]any{"arguments": map[string]any{}})
		step("call %d %.200s", status, body)
		return status, body
	}
	// A call the server refuses for want of scope, or after it moved to
	// another authorization server, says the grant must be given again:
	// the admin connects again, and calls again.
	if _, body := call(); strings.Contains(string(body), "connect it again") && connectOAuth(u, ws, name, step) {
		call()
	}
	return steps
}

// connectOAuth runs Connect as u, follows the authorization server's
// redirect (it approves at once) to the gateway's callback, and reports
// whether the gateway came back connected.
func connectOAuth(u *e2eUser, ws, name string, step func(string, ...any)) bool {
	status, body := u.do(u.t.Context(), http.MethodPost, "/api/v1/workspaces/"+ws+"/servers/"+name+"/connect", nil)
	var c struct {
		AuthorizeURL string `json:"authorize_url"`
	}
	_ = json.Unmarshal(body, &c)
	step("connect %d", status)
	if status != http.StatusOK || c.AuthorizeURL == "" {
		step("%s", body)
		return false
	}
	noFollow := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(c.AuthorizeURL)
	if err != nil {
		step("authorize: %v", err)
		return false
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	step("authorize %d", resp.StatusCode)
	if err != nil || resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
		return false
	}
	cbStatus, where := openCallback(u.t, u, loc)
	step("callback %d %s", cbStatus, where)
	return cbStatus == http.StatusSeeOther && strings.Contains(where, "connected=1")
}
