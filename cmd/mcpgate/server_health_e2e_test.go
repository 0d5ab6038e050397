package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/upstream/upstreamtest"
)

// TestServerHealthE2E: the program as it ships, two replicas on one
// database. Three calls on one replica that cannot reach a server mark it
// down for both: its tool leaves the other replica's tools/list, a call of
// it there says since when and why, and the API shows the health; the
// workspace's other tools stay. The credential is in no log or table.
func TestServerHealthE2E(t *testing.T) {
	e := newE2EEnvWith(t, 2, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8"})
	r1, r2 := e.replicas[0], e.replicas[1]
	up := upstreamtest.New(t, &sdk.Tool{Name: "search", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}})
	target, _ := url.Parse(up.URL)
	target.Path = ""
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	var failing atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	secret := "Bearer health-" + testutil.RandomHex(12)
	e.rec.secret(strings.TrimPrefix(secret, "Bearer "), "upstream credential")

	alice := e.signup(r1.url, "alice-health@example.com", "")
	ws := alice.personal
	e2eAddServer(alice, ws, "docs", front.URL+"/mcp", secret)
	key := alice.createKey(ws, "full", "", nil)
	cs1 := e.session(t, e2eConnectorURL(r1.url, key), nil, "", nil)
	cs2 := e.session(t, e2eConnectorURL(r2.url, key), nil, "", nil)
	if e2eFindTool(t, cs2, "docs_search") == nil {
		t.Fatal("docs_search is not listed")
	}
	others := len(e2eToolNames(t, cs2)) - 1

	failing.Store(true)
	for i := range 3 {
		if res := e2eCall(t, cs1, "docs_search", nil); !res.IsError || strings.Contains(testutil.ToolText(res), "unreachable since") {
			t.Fatalf("call %d on the failing server = %q, want the hop's error", i+1, testutil.ToolText(res))
		}
	}
	e.waitApplied(t)
	if e2eFindTool(t, cs2, "docs_search") != nil {
		t.Error("the other replica still lists the down server's tool")
	}
	if got := len(e2eToolNames(t, cs2)); got != others {
		t.Errorf("the other replica lists %d tools, want the %d of the rest of the workspace", got, others)
	}
	res := e2eCall(t, cs2, "docs_search", nil)
	if text := testutil.ToolText(res); !res.IsError || !strings.Contains(text, "server docs is unreachable since ") ||
		!strings.Contains(text, "HTTP 503") || !strings.HasSuffix(text, "the gateway retries every 30 s") {
		t.Errorf("a call of the down server's tool = %q", text)
	}
	var srv struct {
		Health      string `json:"health"`
		LastError   string `json:"last_error"`
		DownSince   string `json:"down_since"`
		NextCheckAt string `json:"next_check_at"`
	}
	alice.decode(alice.api(http.MethodGet, "/api/v1/workspaces/"+ws+"/servers/docs", nil, http.StatusOK), &srv)
	if srv.Health != "error" || srv.DownSince == "" || srv.NextCheckAt == "" || !strings.Contains(srv.LastError, "3 calls in a row failed") {
		t.Errorf("the server's JSON = %+v, want down since a time, why, and the next try", srv)
	}
	e.noSecretLeaks(t)
}
