package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil/conformance"
)

// secondStage are the scenarios the reference server passes directly that
// the per-server endpoint does not serve in this stage, each for its
// reason. Everything else that passes directly must pass through the
// gateway.
var secondStage = map[string]string{
	// Sessions: the gateway is stateless towards its clients (any replica
	// answers any request), so it hands out no Mcp-Session-Id to end.
	"server-session-lifecycle": "session lifecycle: the endpoint is stateless towards clients",
	// Requests from the upstream to the client are relayed in the second
	// stage; the gateway's upstream client declares none of them.
	"tools-call-sampling":          "sampling: server-to-client requests are not relayed",
	"tools-call-elicitation":       "elicitation: server-to-client requests are not relayed",
	"elicitation-sep1034-defaults": "elicitation: server-to-client requests are not relayed",
	"elicitation-sep1330-enums":    "elicitation: server-to-client requests are not relayed",
	// Resource subscriptions (resources-subscribe, resources-unsubscribe)
	// are held by the endpoint since #30 item 2, and must pass.
}

// sessionScenarios are scenarios of a protocol generation that need a
// session of the endpoint: 2025-11-25's several SSE streams of one session
// (at 2026-07-28, which has no sessions, the same scenario passes and is
// required).
var sessionScenarios = map[string]map[string]string{
	"2025-11-25": {"server-sse-multiple-streams": "several streams of one session: the endpoint is stateless towards clients"},
}

// notRelayedYet are scenarios that need what neither the tool service nor
// the endpoint relays in this stage; they must fail, exactly these, once
// the tool service runs upstream tools (before that they are among
// awaitingUpstreamTools). None now: the upstream's log messages during a
// call (tools-call-with-logging) are relayed and must pass.
var notRelayedYet = map[string]map[string]string{}

// awaitingUpstreamTools are the scenarios that call one of the reference
// server's tools: they pass through the endpoint only once the tool
// service runs a server's tools by their exposed names. Until then (the
// test asks the service at run time) they must fail, exactly these.
var awaitingUpstreamTools = map[string][]string{
	"2025-11-25": {"tools-call-simple-text", "tools-call-image", "tools-call-audio", "tools-call-embedded-resource",
		"tools-call-mixed-content", "tools-call-with-logging", "tools-call-error", "tools-call-with-progress"},
	"2026-07-28": {"tools-call-simple-text", "tools-call-image", "tools-call-audio", "tools-call-embedded-resource",
		"tools-call-mixed-content", "tools-call-error", "tools-call-with-progress"},
}

// upstreamGenerations are the protocol generations the suite runs at, each
// against the reference server as the suite runs it for that generation.
var upstreamGenerations = []struct {
	spec string
	opts conformance.ReferenceOptions
}{
	{spec: "2025-11-25", opts: conformance.ReferenceOptions{Stateless: false}},
	{spec: "2026-07-28", opts: conformance.ReferenceOptions{Stateless: true}},
}

// TestUpstreamConformance adds the conformance suite's reference server to
// a workspace (on loopback, allowed by UPSTREAM_PRIVATE_NETWORKS), turns
// every one of its tools on through the server service (approval none, so
// that the scenarios' calls run at once), and runs the official suite
// against the connector URL of its own endpoint, /c/<key>/mcp/<server>, of
// a real gateway: every scenario that passes against the reference server
// directly passes there, except the second stage's (secondStage); a
// scenario that does not is listed with the suite's reason.
func TestUpstreamConformance(t *testing.T) {
	suite := conformance.Install(t)
	for _, g := range upstreamGenerations {
		t.Run(g.spec, func(t *testing.T) {
			ref := conformance.StartReference(t, g.opts)
			direct := suite.Run(t, ref, conformance.Options{SpecVersion: g.spec})
			want := conformance.Names(direct, conformance.Passed)
			if len(want) == 0 {
				t.Fatal("no scenario passes against the reference server directly")
			}

			// The suite checks DNS-rebinding protection as a local server
			// needs it: a request with a foreign Host and Origin refused, one
			// whose Origin is the URL's own accepted. The gateway accepts
			// only its own origin (PUBLIC_URL) and ALLOWED_ORIGINS, so the
			// address it listens on is chosen first and allowed, as an
			// operator running it on loopback would.
			addr := freeLoopbackAddr(t)
			e := newE2EEnvWith(t, 1, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8",
				"LISTEN_ADDR": addr, "ALLOWED_ORIGINS": "http://" + addr})
			base := e.replicas[0].url
			u := e.signup(base, "conformance@example.com", "")
			ws := u.personal
			u.api(http.MethodPost, "/api/v1/workspaces/"+ws+"/servers", map[string]any{"name": "reference", "url": ref}, http.StatusCreated)
			turnAllToolsOn(t, u, ws, "reference")
			key := u.createKey(ws, "conformance", "", nil)
			toolsServed := upstreamToolsServed(t, u, ws, "reference_test_simple_text")

			front := base + "/c/" + key.Key + "/mcp/reference"
			got := conformance.Index(suite.Run(t, front, conformance.Options{SpecVersion: g.spec}))
			awaiting := map[string]bool{}
			if !toolsServed {
				for _, name := range awaitingUpstreamTools[g.spec] {
					awaiting[name] = true
				}
				t.Logf("the tool service does not run upstream tools yet: %d scenarios that call a tool must fail", len(awaiting))
			} else {
				for name := range notRelayedYet[g.spec] {
					awaiting[name] = true
				}
			}
			var failed []string
			required := 0
			for _, name := range want {
				if _, excluded := secondStage[name]; excluded {
					continue
				}
				if _, excluded := sessionScenarios[g.spec][name]; excluded {
					continue
				}
				r := got[name]
				if !awaiting[name] {
					required++
				}
				switch {
				case awaiting[name] && r.Status == conformance.Passed:
					t.Errorf("%s passes although it is listed as not passing yet: the list is stale", name)
				case awaiting[name]:
					why := "awaiting upstream tools in the tool service"
					if toolsServed {
						why = notRelayedYet[g.spec][name]
					}
					t.Logf("not passing yet, as listed: %s (%s): %s", name, why, redactKey(r.Message, key.Key))
				case r.Status != conformance.Passed:
					failed = append(failed, name)
					t.Errorf("%s passes directly but not through the gateway (%s): %s", name, r.Status, redactKey(r.Message, key.Key))
				}
			}
			for name, why := range secondStage {
				if slices.Contains(want, name) {
					t.Logf("not served in this stage: %s (%s): %s", name, why, got[name].Status)
				}
			}
			for name, why := range sessionScenarios[g.spec] {
				t.Logf("not served in this stage: %s (%s): %s", name, why, got[name].Status)
			}
			t.Logf("through the gateway: %d direct passes, %d required now, %d failed: %s",
				len(want), required, len(failed), strings.Join(failed, " "))
		})
	}
}

// freeLoopbackAddr returns a loopback address with a port free a moment
// ago, for a server that must know its address before it starts.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// upstreamToolsServed asks the tool service, through the API's call route,
// whether it runs a server's tool by its exposed name: a not_found answer
// means it does not know such names yet.
func upstreamToolsServed(t *testing.T, u *e2eUser, ws, exposed string) bool {
	t.Helper()
	status, raw := u.do(context.Background(), http.MethodPost, "/api/v1/workspaces/"+ws+"/tools/"+exposed+"/call",
		map[string]any{"arguments": map[string]any{}})
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &body)
	if status == http.StatusNotFound && body.Error.Code == "not_found" {
		return false
	}
	if status != http.StatusOK {
		t.Fatalf("call %s through the API = %d %s, want 200 (or not_found while upstream tools are not served)", exposed, status, raw)
	}
	return true
}

// turnAllToolsOn turns every tool of a server on, with no approval, as a
// workspace admin does in the dashboard.
func turnAllToolsOn(t *testing.T, u *e2eUser, ws, server string) {
	t.Helper()
	var srv struct {
		Tools []struct {
			Name     string `json:"name"`
			Enabled  bool   `json:"enabled"`
			Approval string `json:"approval"`
		} `json:"tools"`
	}
	u.decode(u.api(http.MethodGet, "/api/v1/workspaces/"+ws+"/servers/"+server, nil, http.StatusOK), &srv)
	if len(srv.Tools) == 0 {
		t.Fatalf("server %s lists no tools", server)
	}
	for _, tool := range srv.Tools {
		if tool.Enabled && tool.Approval == "none" {
			continue
		}
		u.api(http.MethodPut, "/api/v1/workspaces/"+ws+"/servers/"+server+"/tools/"+tool.Name,
			map[string]any{"enabled": true, "approval": "none"}, http.StatusOK)
	}
}

func redactKey(s, key string) string { return strings.ReplaceAll(s, key, "[key]") }
