//lint:file-ignore SA1019 a server that logs and a client that reads its log messages

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestUpstreamLogsRelayed: an upstream's log messages sent during a tool
// call reach the calling client on the call's stream, while the call runs
// (the upstream answers only once the client has the first one), on /mcp
// and on the server's own endpoint: info and above (go-sdk's level for a
// stateless session), the data as the upstream sent it, the upstream's
// credential replaced.
func TestUpstreamLogsRelayed(t *testing.T) {
	e := newE2EEnvWith(t, 1, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8"})
	secret := "Bearer upstream-log-" + testutil.RandomHex(12)
	e.rec.secret(strings.TrimPrefix(secret, "Bearer "), "upstream credential")

	var mu sync.Mutex
	var seen chan struct{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "log-upstream", Version: "v1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "chatty", Description: "logs while it works", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "worker",
				Data: json.RawMessage(`{"step":1,"ratio":1.50,"auth":"` + secret + `"}`)})
			mu.Lock()
			wait := seen
			mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Data: "below the level"})
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: "done <&>"})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)

	base := e.replicas[0].url
	u := e.signup(base, "logs@example.com", "")
	ws := u.personal
	e2eAddServer(u, ws, "logs", ts.URL+"/mcp", secret)
	key := u.createKey(ws, "full", "", nil)

	for _, tc := range []struct{ name, url, tool string }{
		{"mcp", e2eConnectorURL(base, key), "logs_chatty"},
		{"server endpoint", e2eConnectorURL(base, key) + "/logs", "chatty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan struct{})
			mu.Lock()
			seen = got
			mu.Unlock()
			var once sync.Once
			var lmu sync.Mutex
			var logs []*mcp.LoggingMessageParams
			arrived := make(chan struct{}, 8)
			cs := e.session(t, tc.url, nil, "2025-11-25", &mcp.ClientOptions{
				LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
					lmu.Lock()
					logs = append(logs, req.Params)
					lmu.Unlock()
					arrived <- struct{}{}
					once.Do(func() { close(got) })
				}})
			res := e2eCall(t, cs, tc.tool, nil)
			if res.IsError || testutil.ToolText(res) != "ok" {
				t.Fatalf("%s = %v %q", tc.tool, res.IsError, testutil.ToolText(res))
			}
			// go-sdk's client hands notifications to their handler apart
			// from answers: the last may be handled just after the result.
			for range 2 {
				select {
				case <-arrived:
				case <-time.After(10 * time.Second):
					t.Fatal("the log messages did not all arrive")
				}
			}
			lmu.Lock()
			defer lmu.Unlock()
			if len(logs) != 2 {
				for _, l := range logs {
					t.Logf("got %+v", l)
				}
				t.Fatalf("log messages = %d, want the info and the warning", len(logs))
			}
			first, _ := json.Marshal(logs[0].Data)
			if logs[0].Level != "info" || logs[0].Logger != "worker" || string(first) != `{"auth":"[redacted]","ratio":1.5,"step":1}` {
				t.Errorf("first message = %+v %s, want the upstream's with the credential replaced", logs[0], first)
			}
			if logs[1].Level != "warning" || logs[1].Data != "done <&>" {
				t.Errorf("second message = %+v", logs[1])
			}
		})
	}
}
