package mcp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/golden"
	"github.com/mcpgate/mcpgate/mcp"
)

// rawRPC posts one JSON-RPC request at a protocol version, as a client of
// that version sends it, and returns the answer's message.
func rawRPC(t *testing.T, url, key, version, method, params string) map[string]json.RawMessage {
	t.Helper()
	if version == "2026-07-28" {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
		if params == "{}" {
			params = "{" + meta + "}"
		} else {
			params = "{" + meta + "," + strings.TrimPrefix(params, "{")
		}
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	if version == "2026-07-28" {
		req.Header.Set("Mcp-Method", method)
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal([]byte(params), &p) == nil && p.URI != "" {
			req.Header.Set("Mcp-Name", p.URI)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	data := string(raw)
	if i := strings.Index(data, "data: "); i >= 0 {
		data = data[i+len("data: "):]
	}
	var msg map[string]json.RawMessage
	if err := json.Unmarshal([]byte(strings.TrimSpace(data)), &msg); err != nil {
		t.Fatalf("%s %s: %d %q is no JSON-RPC answer", version, method, resp.StatusCode, raw)
	}
	return msg
}

func keysOf(raw json.RawMessage) []string {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestAnswersPerVersion_golden pins, per negotiated protocol version, the
// fields of list results and the error of a read of an unknown resource:
// a session of an older version sees nothing of a newer one (once
// ttlMs and cacheScope, of 2026-07-28, reached 2025-06-18 and 2025-11-25
// sessions) and the error code its version lists (-32002 before
// 2026-07-28, -32602 since, SEP-2164). Rewrite with -update and review.
func TestAnswersPerVersion_golden(t *testing.T) {
	fx := mcp.NewFixture(t, mcp.FixtureOptions{Registry: connectors.NewRegistry(e2b.New(e2b.Options{}))})
	key, _ := fx.AddKey(t, mcpgate.ScopeFull)
	got := map[string]any{}
	for _, version := range []string{"", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		answers := map[string]any{}
		// Twice: the first answer of a version is computed, the second
		// served from the fast path's cache.
		for range 2 {
			res := rawRPC(t, fx.URL, key, version, "tools/list", "{}")["result"]
			var tools struct {
				Tools []json.RawMessage `json:"tools"`
			}
			_ = json.Unmarshal(res, &tools)
			if len(tools.Tools) == 0 {
				t.Fatalf("%q tools/list = %s, want tools", version, res)
			}
			answers["tools/list result"] = keysOf(res)
			answers["tools/list tool"] = keysOf(tools.Tools[0])
		}
		answers["prompts/list result"] = keysOf(rawRPC(t, fx.URL, key, version, "prompts/list", "{}")["result"])
		var rpcErr struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(rawRPC(t, fx.URL, key, version, "resources/read", `{"uri":"mcpgate://nothing/here"}`)["error"], &rpcErr)
		answers["resources/read unknown"] = rpcErr
		name := version
		if name == "" {
			name = "no header (2025-03-26)"
		}
		got[name] = answers
	}
	golden.JSON(t, "answers_per_version.golden.json", got)
}
