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
// gateway must ask for) and at info with raw data, then waits for hold
// (when set) and logs once more.
func logServer(t *testing.T, hold func(ctx context.Context, q string)) *httptest.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "logs", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "log", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Q string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			//lint:ignore SA1019 a server that logs
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Logger: "l", Data: json.RawMessage(`{"n":1.50, "k":"key-secret-1"}`)})
			if hold != nil {
				hold(ctx, in.Q)
			}
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
	ts := logServer(t, nil)
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

// TestCall_LogWithTwoCallsInFlight: a message sent while two calls are in
// flight on one session names neither, and goes to neither; once one call
// is alone, its messages are its own again.
func TestCall_LogWithTwoCallsInFlight(t *testing.T) {
	noLeaks(t)
	started := make(chan struct{}, 2)
	release := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	ts := logServer(t, func(ctx context.Context, q string) {
		if release[q] == nil {
			return // the warm-up call
		}
		started <- struct{}{}
		select {
		case <-release[q]:
		case <-ctx.Done():
		}
	})
	p := newPool(t, Options{})
	target := Target{URL: ts.URL}
	mustCall(t, p, target, CallRequest{Tool: "log", Arguments: json.RawMessage(`{"q":"warm"}`)}) // one session, open
	var mu sync.Mutex
	logs := map[string][]string{}
	call := func(q string) {
		mustCall(t, p, target, CallRequest{Tool: "log", Arguments: json.RawMessage(`{"q":"` + q + `"}`), OnLog: func(m LogMessage) {
			mu.Lock()
			logs[q] = append(logs[q], string(m.Data))
			mu.Unlock()
		}})
	}
	done := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	for _, q := range []string{"a", "b"} {
		go func() { defer close(done[q]); call(q) }()
	}
	<-started
	<-started // both calls in flight, each has sent its first message
	// a's last message comes before its answer, while b is in flight.
	close(release["a"])
	<-done["a"]
	// b is alone now: its last message is its own.
	close(release["b"])
	<-done["b"]
	mu.Lock()
	defer mu.Unlock()
	if len(logs["a"]) != 0 || len(logs["b"]) != 1 || logs["b"][0] != `"after b"` {
		t.Errorf("logs = %v, want none for a, and b's last, sent when it was alone", logs)
	}
}
