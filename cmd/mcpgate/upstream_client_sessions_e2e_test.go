package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestUpstreamClientSessions: an admin sets a server that keeps state per
// session to client scope; then each 2025-11-25 client of its endpoint
// gets a session id of its own, and its calls run on an upstream session
// of its own, the same on every call of that client and another for
// another client of the same key; a forged session id is answered 404; a
// 2026-07-28 client gets no session id and is served as before.
func TestUpstreamClientSessions(t *testing.T) {
	e := newE2EEnvWith(t, 1, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8"})
	srv := mcp.NewServer(&mcp.Implementation{Name: "stateful", Version: "v1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "whoami", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "session " + req.Session.ID()}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	base := e.replicas[0].url
	u := e.signup(base, "client-sessions@example.com", "")
	ws := u.personal
	e2eAddServer(u, ws, "state", ts.URL+"/mcp", "Bearer state-credential-0123456789")
	key := u.createKey(ws, "full", "", nil)
	u.api(http.MethodPatch, "/api/v1/workspaces/"+ws+"/servers/state", map[string]any{"session_scope": "client"}, http.StatusOK)
	url := e2eConnectorURL(base, key) + "/state"

	whoami := func(cs *mcp.ClientSession) string {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
		if err != nil || res.IsError || len(res.Content) != 1 {
			t.Fatalf("whoami = %+v, %v", res, err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	one := e.session(t, url, nil, "2025-11-25", nil)
	two := e.session(t, url, nil, "2025-11-25", nil)
	if one.ID() == "" || one.ID() == two.ID() {
		t.Fatalf("client session ids %q and %q, want two, distinct", one.ID(), two.ID())
	}
	a1, b1, a2, b2 := whoami(one), whoami(two), whoami(one), whoami(two)
	if a1 != a2 || b1 != b2 || a1 == b1 {
		t.Errorf("upstream sessions: first client %q then %q, second %q then %q; want one each, not shared", a1, a2, b1, b2)
	}
	if strings.Contains(a1, one.ID()) {
		t.Error("the upstream saw the gateway's client session id")
	}

	forged := one.ID()[:len(one.ID())-4] + "AAAA"
	if forged == one.ID() {
		forged = one.ID()[:len(one.ID())-4] + "BBBB"
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", forged)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a forged session id = %d, want 404", resp.StatusCode)
	}

	newer := e.session(t, url, nil, "", nil)
	if newer.ID() != "" {
		t.Errorf("a 2026-07-28 client got session id %q, want none", newer.ID())
	}
	whoami(newer)
}
