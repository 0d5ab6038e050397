package mcp_test

// Tests of the hardening of the MCP endpoint, over real HTTP on the
// real services: bodies, origins, limits, and a database outage.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/mcp"
)

// postMCP sends one raw JSON-RPC body to /mcp with a key and returns the
// status, headers and body.
func postMCP(t *testing.T, url, key, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /mcp err = %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const listBody = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`

// TestMCP_InvalidUTF8: a body with invalid UTF-8 is
// refused with 400 and the JSON API's error shape, not run with U+FFFD in
// its arguments.
func TestMCP_InvalidUTF8(t *testing.T) {
	tg := newGWGateway(t)
	key, _ := tg.AddKey(t, mcpgate.ScopeFull)
	if status, _, body := postMCP(t, tg.url, key, listBody, nil); status != http.StatusOK {
		t.Fatalf("valid body: status = %d (%s), want 200", status, body)
	}
	bad := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"demo_delete","arguments":{"id":"a` + "\xff\xfe" + `"}}}`
	status, _, body := postMCP(t, tg.url, key, bad, nil)
	if status != http.StatusBadRequest {
		t.Fatalf("invalid UTF-8: status = %d (%s), want 400", status, body)
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != "invalid" || !strings.Contains(e.Error.Message, "UTF-8") {
		t.Errorf("invalid UTF-8: body = %s, want the error shape with code invalid naming UTF-8", body)
	}
	if got := tg.conn.deletedIDs(); len(got) != 0 {
		t.Errorf("deleted = %v, want nothing run", got)
	}
}

// TestMCP_Origin: a browser origin other than the
// gateway's own is refused with 403 before anything else; requests without
// Origin (native clients) and from the gateway's origin are served.
func TestMCP_Origin(t *testing.T) {
	tg := newGWGateway(t)
	key, _ := tg.AddKey(t, mcpgate.ScopeFull)
	tests := []struct {
		name, origin string
		want         int
	}{
		{name: "no Origin", want: http.StatusOK},
		{name: "own origin", origin: "http://gateway.test", want: http.StatusOK},
		{name: "own origin, other case", origin: "HTTP://Gateway.Test", want: http.StatusOK},
		{name: "evil", origin: "http://evil.example", want: http.StatusForbidden},
		{name: "own host, other scheme", origin: "https://gateway.test", want: http.StatusForbidden},
		{name: "own host, other port", origin: "http://gateway.test:8081", want: http.StatusForbidden},
		{name: "null", origin: "null", want: http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{}
			if tt.origin != "" {
				h["Origin"] = tt.origin
			}
			status, _, body := postMCP(t, tg.url, key, listBody, h)
			if status != tt.want {
				t.Fatalf("status = %d (%s), want %d", status, body, tt.want)
			}
			if tt.want == http.StatusForbidden && !strings.Contains(body, `"code":"forbidden"`) {
				t.Errorf("body = %s, want the error shape with code forbidden", body)
			}
		})
	}
	// Refused before the key is looked at: no key, still 403, not 401.
	if status, _, _ := postMCP(t, tg.url, "", listBody, map[string]string{"Origin": "http://evil.example"}); status != http.StatusForbidden {
		t.Errorf("evil origin without key: status = %d, want 403", status)
	}
}

// TestMCP_PersonAndWorkspaceLimits: many keys of one
// person share the person's limit, and all of a workspace's callers share
// its limit. Like the per-key limit they count tool calls only,
// and a refusal is a tool error saying when to retry.
func TestMCP_PersonAndWorkspaceLimits(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":"req-7","method":"tools/call","params":{"name":"demo_list","arguments":{}}}`
	tests := []struct {
		name string
		o    mcp.FixtureOptions
		msg  string
	}{
		{name: "per person", o: mcp.FixtureOptions{UserRate: 0.01, UserBurst: 3}, msg: "your keys together"},
		{name: "per workspace", o: mcp.FixtureOptions{WorkspaceRate: 0.01, WorkspaceBurst: 3}, msg: "this workspace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := newGWConnector()
			tt.o.Registry, tt.o.Credential = connectors.NewRegistry(conn), "demo-credential"
			f := mcp.NewFixture(t, tt.o)
			var keys []string
			for range 4 {
				k, _ := f.AddKey(t, mcpgate.ScopeFull)
				keys = append(keys, k)
			}
			// Lists are not counted.
			for range 5 {
				if status, _, body := postMCP(t, f.URL, keys[0], listBody, nil); status != http.StatusOK {
					t.Fatalf("tools/list: status = %d (%s), want 200", status, body)
				}
			}
			for i, k := range keys[:3] {
				if status, _, body := postMCP(t, f.URL, k, call, nil); status != http.StatusOK || strings.Contains(body, "too many") {
					t.Fatalf("call %d with its own key: %d %s, want served", i+1, status, body)
				}
			}
			status, _, body := postMCP(t, f.URL, keys[3], call, nil)
			if status != http.StatusOK || !strings.Contains(body, tt.msg) || !strings.Contains(body, `"isError":true`) {
				t.Fatalf("4th call, 4th key: %d %s, want a tool error naming %q", status, body, tt.msg)
			}
		})
	}
}

// TestDatabaseAway_RPCShaped503: when the database is away and nothing
// cached stands in, the endpoint answers 503 with Retry-After and a JSON-RPC
// error for the request's id: never go-sdk's 400 "no server available", and
// never a 401 for a valid key it could not check.
func TestDatabaseAway_RPCShaped503(t *testing.T) {
	fx := mcp.NewFixture(t, mcp.FixtureOptions{Registry: connectors.NewRegistry(newGWConnector()), Credential: "demo-credential"})
	known, _ := fx.AddKey(t, mcpgate.ScopeFull)
	unknown, _ := fx.AddKey(t, mcpgate.ScopeFull)
	// The known key is in the cache; the workspace's policy is not yet.
	if a, err := fx.Keys.Authenticate(context.Background(), mcpgate.Presented{Value: mcpgate.Secret(known), Bearer: true}); err != nil || a == nil {
		t.Fatalf("warm the key cache: %v", err)
	}
	fx.DB.Pool.Close()
	for _, tt := range []struct{ name, key string }{{"policy not loadable", known}, {"key not checkable", unknown}} {
		t.Run(tt.name, func(t *testing.T) {
			status, header, b := postMCP(t, fx.URL, tt.key, `{"jsonrpc":"2.0","id":"call-7","method":"tools/list","params":{}}`,
				map[string]string{"MCP-Protocol-Version": "2025-11-25"})
			var msg struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if status != http.StatusServiceUnavailable || header.Get("Retry-After") == "" ||
				json.Unmarshal([]byte(b), &msg) != nil || msg.JSONRPC != "2.0" || string(msg.ID) != `"call-7"` || msg.Error == nil ||
				!strings.Contains(msg.Error.Message, "try again") {
				t.Fatalf("answer = %d (Retry-After %q) %s; want a JSON-RPC-shaped 503 for id call-7", status,
					header.Get("Retry-After"), b)
			}
		})
	}
}
