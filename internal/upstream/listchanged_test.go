package upstream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

// A server that changes its tools while the gateway holds a session with
// it tells the pool, which tells OnToolListChanged the session's target;
// the tool call that changed them is answered as usual. The server is a
// 2026-07-28 one (go-sdk's streamable handler speaks it stateless), on
// whose session go-sdk's client opens subscriptions/listen itself.
func TestPool_ToolListChangedReportsTheTarget(t *testing.T) {
	noLeaks(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "grows", Version: "v1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "grow", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			srv.AddTool(&mcp.Tool{Name: "grown", InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{}, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grew"}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ts.Close) // after the pool's close (cleanups run last first), which ends the listen stream
	notices := make(chan Target, 4)
	pool := newPool(t, Options{Network: loopback, OnToolListChanged: func(t Target) { notices <- t }})
	target := Target{URL: ts.URL, Headers: map[string]mcpgate.Secret{"Authorization": "Bearer list-changed-0123456789"}}
	// A discovery's own session (which opens a listen stream too) closes
	// whole: noLeaks checks that nothing of it outlives the test.
	if cat, err := pool.Discover(context.Background(), target); err != nil || len(cat.Tools) != 1 {
		t.Fatalf("Discover() = %+v, %v", cat, err)
	}
	res, err := pool.Call(context.Background(), "k", target, CallRequest{Tool: "grow"})
	if err != nil || res.IsError {
		t.Fatalf("Call(grow) = %+v, %v", res, err)
	}
	select {
	case got := <-notices:
		if got.URL != target.URL || got.Headers["Authorization"] != target.Headers["Authorization"] {
			t.Errorf("notice target = %q with %d headers, want the session's", got.URL, len(got.Headers))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notice of the changed tool list within 10 s")
	}
}
