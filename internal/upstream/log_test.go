package upstream

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

// logServer is a go-sdk server whose tool "log" logs at debug (which the
// gateway must ask for) with raw data, then at info. (Calls held in flight
// at once, each with its own messages: sessions_test.go.)
func logServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "logs", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "log", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Q string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			//lint:ignore SA1019 a server that logs
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Logger: "l", Data: json.RawMessage(`{"n":1.50, "k":"key-secret-1"}`)})
			//lint:ignore SA1019 a server that logs
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "after " + in.Q})
			return &mcp.CallToolResult{Content: text("ok")}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts
}

// TestCall_LogRelayed: the log messages of a call reach OnLog, every level
// (the gateway asks for debug), the data byte for byte but for the
// credential's value.
func TestCall_LogRelayed(t *testing.T) {
	noLeaks(t)
	ts := logServer(t)
	p := newPool(t, Options{})
	target := Target{URL: ts.URL, Headers: map[string]mcpgate.Secret{"X-Api-Key": "key-secret-1"}}
	var mu sync.Mutex
	var got []LogMessage
	mustCall(t, p, target, CallRequest{Tool: "log", Arguments: json.RawMessage(`{"q":"a"}`), OnLog: func(m LogMessage) {
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("log messages = %+v, want 2", got)
	}
	if got[0].Level != "debug" || got[0].Logger != "l" || string(got[0].Data) != `{"n":1.50,"k":"[redacted]"}` {
		t.Errorf("first = %+v (data %s), want debug, the data as sent with the credential replaced", got[0], got[0].Data)
	}
	if got[1].Level != "info" || string(got[1].Data) != `"after a"` {
		t.Errorf("second = %+v (data %s)", got[1], got[1].Data)
	}
}
