package mcp

// Fences around what fastpath.go copies from go-sdk because the SDK does
// not export it: a version pin that fails when go-sdk moves, and a
// differential check of each copy against the SDK's own exported behaviour.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestGoSDKVersion fails when go-sdk is not the release fastpath.go's
// copies were checked against.
func TestGoSDKVersion(t *testing.T) {
	testutil.RequireGoSDK(t, "mcp/fastpath.go against go-sdk: depthExceeded and sdkMaxDepth (internal/json/json.go checkMaxDepth), "+
		"streamableAccepts and the version-header check (mcp/streamable.go), clientCapabilitiesV2 and the _meta keys of validMeta "+
		"(mcp/protocol.go, mcp/shared.go decodeMetaValue), newProtocol (mcp/shared.go), the SSE event and headers of writeSSE "+
		"(mcp/event.go writeEvent, mcp/streamable.go), the call results of appendResult and appendErrorResult, and validID (internal/jsonrpc2); "+
		"call.go and server.go against it: relayedResult and appendRelayed (CallToolResult's JSON, annotateServerInfo keeping a "+
		"serverInfo already in _meta), addToolChecked (AddTool panics on a definition it refuses)")
}

// TestProtocolVersions_FromSDK: the fast path's protocol generations are
// the SDK's: newProtocol is one it speaks, and the legacy ones are exactly
// its older ones (plus no header).
func TestProtocolVersions_FromSDK(t *testing.T) {
	versions := sdk.SupportedProtocolVersions()
	if !slices.Contains(versions, newProtocol) {
		t.Fatalf("go-sdk speaks %v, not newProtocol %s", versions, newProtocol)
	}
	want := map[string]bool{"": true}
	for _, v := range versions {
		if v < newProtocol {
			want[v] = true
		}
	}
	if fmt.Sprint(legacyVersions) != fmt.Sprint(want) {
		t.Errorf("legacyVersions = %v, want %v", legacyVersions, want)
	}
}

// sdkDepthExceeded asks the SDK's JSON-RPC decoder, which runs the same
// check before decoding anything.
func sdkDepthExceeded(data []byte) bool {
	_, err := jsonrpc.DecodeMessage(data)
	return err != nil && strings.Contains(err.Error(), "exceeded maximum nesting depth")
}

var depthCases = []string{
	``, `{}`, `[`, `]]]]`, `"`, `"\"`, `"\\"`, `"[[["`, `"\"[[["`, `\[[`, `{"a":"\\\"[["}`,
	strings.Repeat("[", sdkMaxDepth), strings.Repeat("[", sdkMaxDepth+1), strings.Repeat("{", sdkMaxDepth+1),
	strings.Repeat("[]", 5000), strings.Repeat("]", 10) + strings.Repeat("[", sdkMaxDepth+1),
	`"` + strings.Repeat("[", sdkMaxDepth+1), `"a"` + strings.Repeat("[", sdkMaxDepth+1),
	`"\` + `"` + strings.Repeat("{", sdkMaxDepth+1), strings.Repeat("[", sdkMaxDepth) + `"x` + strings.Repeat("[", 5),
}

// TestDepthExceeded_MatchesSDK holds the copied nesting check, and its
// limit, to the SDK's decoder.
func TestDepthExceeded_MatchesSDK(t *testing.T) {
	_, err := jsonrpc.DecodeMessage([]byte(strings.Repeat("[", 100_000)))
	if err == nil || !strings.Contains(err.Error(), "exceeded maximum nesting depth of "+strconv.Itoa(sdkMaxDepth)) {
		t.Fatalf("the SDK's decoder answered %v for a deep body; want its depth error with the limit %d (re-check sdkMaxDepth and depthExceeded)", err, sdkMaxDepth)
	}
	for _, c := range depthCases {
		if got, want := depthExceeded([]byte(c), sdkMaxDepth), sdkDepthExceeded([]byte(c)); got != want {
			t.Errorf("depthExceeded(%.40q...) = %v, the SDK: %v", c, got, want)
		}
	}
}

func FuzzDepthExceeded(f *testing.F) {
	for _, c := range depthCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// Deep inputs are where the two can differ; repeat the fuzzed
		// text so that it reaches the limit.
		for _, data := range []string{s, strings.Repeat(s, sdkMaxDepth/max(1, len(s))+2)} {
			if got, want := depthExceeded([]byte(data), sdkMaxDepth), sdkDepthExceeded([]byte(data)); got != want {
				t.Errorf("depthExceeded(%.60q) = %v, the SDK: %v", data, got, want)
			}
		}
	})
}

// sdkAccepts asks the SDK's handler whether it takes a POST with these
// Accept values.
func sdkAccepts(t testing.TB, values []string) bool {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "accept"}, nil)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	for _, v := range values {
		r.Header.Add("Accept", v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return !(rec.Code == http.StatusBadRequest && strings.Contains(rec.Body.String(), "Accept must contain"))
}

var acceptCases = [][]string{
	nil, {""}, {"application/json, text/event-stream"}, {"application/json", "text/event-stream"}, {"*/*"},
	{"application/*, text/*"}, {"APPLICATION/JSON;q=0.5 , Text/Event-Stream"}, {"application/json"}, {"text/event-stream"},
	{"application/json,text/event-stream;charset=utf-8"}, {"application/jsonx, text/event-stream"}, {" application/json ;x, ,text/event-stream"},
	{"application/json\ttext/event-stream"}, {"*/*;q=0"}, {"text/html, application/xml"}, {"application/json;text/event-stream"},
}

// TestStreamableAccepts_MatchesSDK holds the copied Accept check to the
// SDK's handler.
func TestStreamableAccepts_MatchesSDK(t *testing.T) {
	if !sdkAccepts(t, []string{"application/json, text/event-stream"}) || sdkAccepts(t, nil) {
		t.Fatal("the SDK's handler no longer answers a bad Accept with its message; re-check streamableAccepts and sdkAccepts")
	}
	for _, c := range acceptCases {
		jsonOK, streamOK := streamableAccepts(c)
		if got, want := jsonOK && streamOK, sdkAccepts(t, c); got != want {
			t.Errorf("streamableAccepts(%q) takes it: %v, the SDK: %v", c, got, want)
		}
	}
}

func FuzzStreamableAccepts(f *testing.F) {
	for _, c := range acceptCases {
		f.Add(strings.Join(c, "\n"))
	}
	f.Fuzz(func(t *testing.T, s string) {
		values := strings.Split(s, "\n")
		for _, v := range values {
			if !validHeaderValue(v) {
				return
			}
		}
		jsonOK, streamOK := streamableAccepts(values)
		if got, want := jsonOK && streamOK, sdkAccepts(t, values); got != want {
			t.Errorf("streamableAccepts(%q) takes it: %v, the SDK: %v", values, got, want)
		}
	})
}

// TestAddToolChecked_SDKPanics: go-sdk's AddTool panics on an input schema
// that is not an object; an upstream's definition must be left out with
// an error instead, and one it accepts published.
func TestAddToolChecked_SDKPanics(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "fence"}, nil)
	h := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{}, nil
	}
	if err := addToolChecked(srv, &sdk.Tool{Name: "bad", InputSchema: json.RawMessage(`{"type":"string"}`)}, h); err == nil {
		t.Error("addToolChecked(non-object schema) = nil; does go-sdk no longer refuse it?")
	}
	info := mcpgate.ToolInfo{Name: "up_ok", Server: "up", Approval: mcpgate.ApprovalNone,
		Definition: json.RawMessage(`{"name":"ok","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-vendor":[1]}}},"_meta":{"k":"v"}}`)}
	tool, err := upstreamSDKTool(info)
	if err != nil {
		t.Fatal(err)
	}
	if err := addToolChecked(srv, tool, h); err != nil {
		t.Errorf("addToolChecked(object schema) = %v", err)
	}
	b, _ := json.Marshal(tool)
	if !strings.Contains(string(b), `"x-vendor":[1]`) || !strings.Contains(string(b), `"_meta":{"k":"v"}`) || !strings.Contains(string(b), `"name":"up_ok"`) {
		t.Errorf("published tool = %s, want the upstream's members under the exposed name", b)
	}
}

// TestServerInfo_SDKKeepsAResultsOwn: on 2026-07-28 go-sdk names the
// server in a result's _meta only when the result does not already name
// one, so an upstream's serverInfo relayed as it came would name the
// upstream as the server the caller talks to: relayedResult drops it.
func TestServerInfo_SDKKeepsAResultsOwn(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "gateway", Version: "v1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{}, Meta: sdk.Meta{sdk.MetaKeyServerInfo: map[string]any{"name": "upstream"}}}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: true})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{` + pvMeta + `,` + capsMeta + `}}}`
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Mcp-Protocol-Version", newProtocol)
	r.Header.Set("Mcp-Method", "tools/call")
	r.Header.Set("Mcp-Name", "t")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if !strings.Contains(rec.Body.String(), `"name":"upstream"`) {
		t.Errorf("go-sdk answered %s; does it now replace a result's serverInfo? relayedResult's stripping may go", rec.Body.String())
	}
	relayed := relayedResult(json.RawMessage(`{"content":[],"_meta":{"` + sdk.MetaKeyServerInfo + `":{"name":"upstream"},"k":"v"}}`))
	if _, ok := relayed.Meta[sdk.MetaKeyServerInfo]; ok || relayed.Meta["k"] != "v" {
		t.Errorf("relayedResult _meta = %v, want the upstream's serverInfo dropped, the rest kept", relayed.Meta)
	}
}
