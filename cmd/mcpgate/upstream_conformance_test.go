package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil/conformance"
)

// notServed are the scenarios the reference server passes directly that
// the per-server endpoint does not pass, or not every time, by protocol
// generation and number of replicas, each for its reason: they are run
// and logged. Everything else that passes directly must pass through the
// gateway, on one replica and on two.
var notServed = map[string]map[string]string{}

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
// that the scenarios' calls run at once) and its requests to the client
// (sampling and roots; elicitation always is), and runs the official suite
// against the connector URL of its own endpoint, /c/<key>/mcp/<server>, of
// a real gateway: every scenario that passes against the reference server
// directly passes there (but notServed's), on one replica and on two
// behind a proxy that sends each request to the other replica than the
// last (so that a client's answer to a relayed request, and a session's
// next request, land on another replica than the call).
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
			for _, replicas := range []int{1, 2} {
				t.Run(fmt.Sprintf("%d replicas", replicas), func(t *testing.T) {
					front, u, ws := conformanceFront(t, replicas)
					u.api(http.MethodPost, "/api/v1/workspaces/"+ws+"/servers", map[string]any{"name": "reference", "url": ref}, http.StatusCreated)
					turnAllToolsOn(t, u, ws, "reference")
					u.api(http.MethodPatch, "/api/v1/workspaces/"+ws+"/servers/reference",
						map[string]any{"allow_sampling": true, "allow_roots": true}, http.StatusOK)
					key := u.createKey(ws, "conformance", "", nil)
					if replicas > 1 {
						u.env.waitApplied(t)
					}
					got := conformance.Index(suite.Run(t, front+"/c/"+key.Key+"/mcp/reference", conformance.Options{SpecVersion: g.spec}))
					var failed []string
					for _, name := range want {
						r := got[name]
						if why, ok := notServed[fmt.Sprintf("%s/%d", g.spec, replicas)][name]; ok {
							t.Logf("not served: %s (%s): %s", name, why, r.Status)
							continue
						}
						if r.Status != conformance.Passed {
							failed = append(failed, name)
							t.Errorf("%s passes directly but not through the gateway (%s): %s", name, r.Status, redactKey(r.Message, key.Key))
						}
					}
					t.Logf("through the gateway on %d replicas: %d direct passes, %d failed: %s",
						replicas, len(want), len(failed), strings.Join(failed, " "))
				})
			}
		})
	}
}

// conformanceFront starts the gateway as the suite reaches it and signs a
// person up: on one replica listening on an address chosen first, or on
// two behind a round-robin proxy on it. The suite checks DNS-rebinding
// protection as a local server needs it (a request with a foreign Host and
// Origin refused, one whose Origin is the URL's own accepted); the gateway
// accepts only its own origin (PUBLIC_URL) and ALLOWED_ORIGINS, so the
// address is allowed, as an operator running it on loopback would. The
// person's set-up goes to the first replica; the suite's requests to the
// front.
func conformanceFront(t *testing.T, replicas int) (string, *e2eUser, string) {
	t.Helper()
	addr := freeLoopbackAddr(t)
	env := map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8", "ALLOWED_ORIGINS": "http://" + addr}
	if replicas == 1 {
		env["LISTEN_ADDR"] = addr
	}
	e := newE2EEnvWith(t, replicas, env)
	u := e.signup(e.replicas[0].url, "conformance@example.com", "")
	if replicas == 1 {
		return e.replicas[0].url, u, u.personal
	}
	targets := make([]*url.URL, len(e.replicas))
	for i, r := range e.replicas {
		var err error
		if targets[i], err = url.Parse(r.url); err != nil {
			t.Fatal(err)
		}
	}
	var next atomic.Uint64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(targets[next.Add(1)%uint64(len(targets))])
			pr.Out.Host = pr.In.Host // the suite's Host, as a load balancer keeps it
		},
		FlushInterval: -1, // SSE streams pass as they are written
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + addr, u, u.personal
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
