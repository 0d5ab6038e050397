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
	"testing/slogtest"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/logctx"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestHandler(t *testing.T) {
	withID := mcpgate.NewContextWithRequestID(context.Background(), "req-1")
	tests := []struct {
		name string
		ctx  context.Context
		log  func(l *slog.Logger, ctx context.Context)
		want map[string]any // the line, without time, level and msg
	}{
		{
			name: "id added",
			ctx:  withID,
			log:  func(l *slog.Logger, ctx context.Context) { l.ErrorContext(ctx, "m", "a", 1) },
			want: map[string]any{"a": 1.0, "request_id": "req-1"},
		},
		{
			name: "no context",
			ctx:  withID,
			log:  func(l *slog.Logger, _ context.Context) { l.Error("m", "a", 1) },
			want: map[string]any{"a": 1.0},
		},
		{
			name: "context without an id",
			ctx:  context.Background(),
			log:  func(l *slog.Logger, ctx context.Context) { l.InfoContext(ctx, "m") },
			want: map[string]any{},
		},
		{
			name: "record sets it already",
			ctx:  withID,
			log:  func(l *slog.Logger, ctx context.Context) { l.InfoContext(ctx, "m", "request_id", "own") },
			want: map[string]any{"request_id": "own"},
		},
		{
			name: "logger sets it already",
			ctx:  withID,
			log: func(l *slog.Logger, ctx context.Context) {
				l.With("request_id", "own", "b", 2).InfoContext(ctx, "m")
			},
			want: map[string]any{"request_id": "own", "b": 2.0},
		},
		{
			name: "With keeps its attributes",
			ctx:  withID,
			log:  func(l *slog.Logger, ctx context.Context) { l.With("b", 2).With("c", 3).WarnContext(ctx, "m", "a", 1) },
			want: map[string]any{"a": 1.0, "b": 2.0, "c": 3.0, "request_id": "req-1"},
		},
		{
			name: "many attributes",
			ctx:  withID,
			log: func(l *slog.Logger, ctx context.Context) {
				l.InfoContext(ctx, "m", "a", 1, "b", 2, "c", 3, "d", 4, "e", 5, "f", 6)
			},
			want: map[string]any{"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0, "f": 6.0, "request_id": "req-1"},
		},
		{
			name: "id stays at the top level inside a group",
			ctx:  withID,
			log: func(l *slog.Logger, ctx context.Context) {
				l.With("top", 0).WithGroup("g").With("b", 2).WithGroup("h").InfoContext(ctx, "m", "a", 1)
			},
			want: map[string]any{"top": 0.0, "request_id": "req-1",
				"g": map[string]any{"b": 2.0, "h": map[string]any{"a": 1.0}}},
		},
		{
			name: "a request_id inside a group is another key",
			ctx:  withID,
			log: func(l *slog.Logger, ctx context.Context) {
				l.WithGroup("g").InfoContext(ctx, "m", "request_id", "inner")
			},
			want: map[string]any{"request_id": "req-1", "g": map[string]any{"request_id": "inner"}},
		},
		{
			name: "set before a group",
			ctx:  withID,
			log: func(l *slog.Logger, ctx context.Context) {
				l.With("request_id", "own").WithGroup("g").InfoContext(ctx, "m", "a", 1)
			},
			want: map[string]any{"request_id": "own", "g": map[string]any{"a": 1.0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := slog.New(logctx.New(slog.NewJSONHandler(&buf, nil)))
			tt.log(l, tt.ctx)
			line := buf.String()
			if n := strings.Count(line, `"request_id"`); n > 1+strings.Count(line, `"inner"`) {
				t.Fatalf("request_id appears %d times: %s", n, line)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("not one JSON line: %q", line)
			}
			delete(got, "time")
			delete(got, "level")
			delete(got, "msg")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("line (-want +got):\n%s\n%s", diff, line)
			}
		})
	}
}

// Loggers derived from one share nothing: a group or attribute added to one
// never shows in the other's lines.
func TestHandler_DerivedLoggersIndependent(t *testing.T) {
	var buf bytes.Buffer
	ctx := mcpgate.NewContextWithRequestID(context.Background(), "req-2")
	g := slog.New(logctx.New(slog.NewJSONHandler(&buf, nil))).WithGroup("g")
	a, b := g.With("a", 1), g.With("b", 2)
	a.InfoContext(ctx, "m")
	b.InfoContext(ctx, "m")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"g":{"a":1}`) || !strings.Contains(lines[1], `"g":{"b":2}`) ||
		!strings.Contains(lines[0], `"request_id":"req-2"`) || !strings.Contains(lines[1], `"request_id":"req-2"`) {
		t.Fatalf("lines:\n%s", buf.String())
	}
}

func TestHandler_Enabled(t *testing.T) {
	h := logctx.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if h.Enabled(context.Background(), slog.LevelInfo) || !h.Enabled(context.Background(), slog.LevelWarn) {
		t.Fatal("Enabled() does not follow the wrapped handler's level")
	}
}

// The wrapper keeps every rule a slog.Handler must follow.
func TestHandler_SlogTest(t *testing.T) {
	var buf bytes.Buffer
	h := logctx.New(slog.NewJSONHandler(&buf, nil))
	results := func() []map[string]any {
		var out []map[string]any
		for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatalf("not JSON: %q", line)
			}
			out = append(out, m)
		}
		return out
	}
	if err := slogtest.TestHandler(h, results); err != nil {
		t.Fatal(err)
	}
}

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
