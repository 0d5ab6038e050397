package mcp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/mcp"
)

// TestDatabaseAway_RPCShaped503: when the database is away and nothing
// cached stands in, the endpoint answers 503 with Retry-After and a JSON-RPC
// error for the request's id: never go-sdk's 400 "no server available", and
// never a 401 for a valid key it could not check.
func TestDatabaseAway_RPCShaped503(t *testing.T) {
	fx := mcp.NewFixture(t, mcp.FixtureOptions{Registry: connectors.NewRegistry(newGWConnector()), Credential: "demo-credential"})
	known, _ := fx.AddKey(t, mcpgate.ScopeFull)
	unknown, _ := fx.AddKey(t, mcpgate.ScopeFull)
	// The known key is in the cache; the workspace's policy is not yet.
	if a, err := fx.Keys.Authenticate(bearerRequest(known)); err != nil || a == nil {
		t.Fatalf("warm the key cache: %v", err)
	}
	fx.DB.Pool.Close()
	for _, tt := range []struct{ name, key string }{{"policy not loadable", known}, {"key not checkable", unknown}} {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":"call-7","method":"tools/list","params":{}}`
			req, _ := http.NewRequest(http.MethodPost, fx.URL+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
			req.Header.Set("Authorization", "Bearer "+tt.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var msg struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
				json.Unmarshal(b, &msg) != nil || msg.JSONRPC != "2.0" || string(msg.ID) != `"call-7"` || msg.Error == nil ||
				!strings.Contains(msg.Error.Message, "try again") {
				t.Fatalf("answer = %d (Retry-After %q) %s; want a JSON-RPC-shaped 503 for id call-7", resp.StatusCode,
					resp.Header.Get("Retry-After"), b)
			}
		})
	}
}

func bearerRequest(key string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "http://gateway.test/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	return r
}
