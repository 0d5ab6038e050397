package logctx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/logctx"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// The gateway's tool handlers log with the context go-sdk hands them. This
// proves that context carries the HTTP request's values in stateless mode
// (as mcp.Gateway.Handler configures it), so a tool's error line has the id
// of the POST that carried tools/call: an SDK upgrade that cut the link
// would fail here.
func TestHandler_ReachesToolHandlersThroughTheSDK(t *testing.T) {
	logs := &testutil.LockedBuffer{}
	log := slog.New(logctx.New(slog.NewJSONHandler(logs, nil)))

	srv := sdk.NewServer(&sdk.Implementation{Name: "probe", Version: "v0"}, nil)
	srv.AddTool(&sdk.Tool{Name: "fail", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			log.ErrorContext(ctx, "tool call failed", "tool", "fail")
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no"}}}, nil
		})
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	var n int
	var mu sync.Mutex
	// What api's requestLog does: an id per request, in the header and the
	// context.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		id := fmt.Sprintf("req-%d", n)
		mu.Unlock()
		w.Header().Set("X-Request-Id", id)
		mcpHandler.ServeHTTP(w, r.WithContext(mcpgate.NewContextWithRequestID(r.Context(), id)))
	}))
	defer ts.Close()

	rec := &methodIDs{base: http.DefaultTransport, ids: map[string]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "probe-client", Version: "v0"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: &http.Client{Transport: rec}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("Connect() err = %v", err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "fail", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("CallTool() err = %v", err)
	}
	callID := rec.id("tools/call")
	if callID == "" || callID == rec.id("initialize") {
		t.Fatalf("X-Request-Id of tools/call = %q (initialize %q), want its own", callID, rec.id("initialize"))
	}
	var line struct {
		Msg       string `json:"msg"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(logs.String())), &line); err != nil || line.Msg != "tool call failed" {
		t.Fatalf("log = %q, want one tool call failed line", logs)
	}
	if line.RequestID != callID {
		t.Fatalf("the tool's error line has request_id %q, want %q (the tools/call request's)", line.RequestID, callID)
	}
}

// methodIDs records the X-Request-Id answered to each JSON-RPC method.
type methodIDs struct {
	base http.RoundTripper
	mu   sync.Mutex
	ids  map[string]string
}

func (m *methodIDs) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := m.base.RoundTrip(r)
	if err == nil {
		var msg struct{ Method string }
		if json.Unmarshal(body, &msg) == nil && msg.Method != "" {
			m.mu.Lock()
			m.ids[msg.Method] = resp.Header.Get("X-Request-Id")
			m.mu.Unlock()
		}
	}
	return resp, err
}

func (m *methodIDs) id(method string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ids[method]
}
