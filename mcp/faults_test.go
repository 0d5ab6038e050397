package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/servicetest"
	"github.com/mcpgate/mcpgate/mcp"
)

// auditLog keeps recorded events.
type auditLog = servicetest.Recorder

func lastEvent(a *auditLog) (mcpgate.AuditEvent, int) {
	evs := a.Events()
	if len(evs) == 0 {
		return mcpgate.AuditEvent{}, 0
	}
	return evs[len(evs)-1], len(evs)
}

// newFaultGateway returns a gateway whose E2B is upstream, with a short call
// deadline, and the key that works on it.
func newFaultGateway(t *testing.T, upstream string, callTimeout time.Duration) (*mcp.Fixture, *auditLog, string) {
	t.Helper()
	f := mcp.NewFixture(t, mcp.FixtureOptions{
		Registry: connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: upstream, DashboardURL: upstream,
			HTTPClient: &http.Client{Transport: &http.Transport{}}})),
		Credential: "e2b_0123456789abcdef", CallTimeout: callTimeout})
	key, _ := f.AddKey(t, mcpgate.ScopeFull)
	return f, f.Audit, key
}

// ignoreTestDB ignores the test database's pool, which lives until the
// test's cleanup drops the database; only the calls' goroutines count.
var ignoreTestDB = goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck")

// connect returns an MCP session to h with key; closed at cleanup.
func connect(t *testing.T, h http.Handler, key string) (*sdk.ClientSession, func()) {
	t.Helper()
	srv := httptest.NewServer(h)
	tr := &http.Transport{}
	hc := &http.Client{Transport: mcp.BearerTransport{Key: key, Base: tr}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "v0"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		srv.Close()
		t.Fatalf("Connect() err = %v", err)
	}
	return cs, func() {
		_ = cs.Close()
		tr.CloseIdleConnections()
		srv.Close()
	}
}

// TestUpstreamSlowAndHung runs tool calls against an E2B that answers after
// the call deadline, and one that never answers: each call ends with a clear
// tool error shortly after the deadline, the audit log records it, the next
// call works, and nothing is left running (goleak).
func TestUpstreamSlowAndHung(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreTestDB)
	const deadline = 300 * time.Millisecond

	var mode sync.Map // "mode" -> string
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, _ := mode.Load("mode")
		switch m {
		case "slow":
			select {
			case <-time.After(3 * deadline):
			case <-r.Context().Done():
				return
			}
		case "hung":
			// Headers sent, then nothing: the body never comes.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"sandboxes": [`))
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[]`))
	}))
	defer upstream.Close()
	defer close(release)

	g, audit, key := newFaultGateway(t, upstream.URL, deadline)
	defer g.Close()
	cs, closeConn := connect(t, g.Gateway.Handler(), key)
	defer closeConn()

	callList := func() (*sdk.CallToolResult, time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: e2b.ToolListSandboxes})
		if err != nil {
			t.Fatalf("CallTool() err = %v, want a tool result", err)
		}
		return res, time.Since(start)
	}
	if res, _ := callList(); res.IsError {
		t.Fatalf("baseline call = %v", res.Content[0].(*sdk.TextContent).Text)
	}
	for _, m := range []string{"slow", "hung"} {
		t.Run(m, func(t *testing.T) {
			mode.Store("mode", m)
			res, took := callList()
			mode.Store("mode", "")
			text := res.Content[0].(*sdk.TextContent).Text
			if !res.IsError || !strings.Contains(text, "did not answer") && !strings.Contains(text, "took too long") {
				t.Errorf("call = %v %q, want a tool error saying E2B did not answer in time", res.IsError, text)
			}
			if took > deadline+2*time.Second {
				t.Errorf("call took %s with a %s deadline", took, deadline)
			}
			ev, _ := lastEvent(audit)
			if ev.Outcome != mcpgate.OutcomeError || ev.Action != e2b.ToolListSandboxes || ev.Message != text {
				t.Errorf("audit = %+v, want the failed call", ev)
			}
			if res, _ := callList(); res.IsError {
				t.Errorf("next call = %q, want success", res.Content[0].(*sdk.TextContent).Text)
			}
		})
	}
}

// TestUpstreamFaultsInProcess covers the failures E2B can answer with, in
// process, so that goleak sees every goroutine: none may outlive the calls.
// (test/reliability runs the same faults through the real binary.)
func TestUpstreamFaultsInProcess(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreTestDB)
	var mode sync.Map
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, _ := mode.Load("mode")
		switch m {
		case "500":
			http.Error(w, `{"code":500,"message":"db exploded"}`, http.StatusInternalServerError)
		case "429":
			w.Header().Set("Retry-After", "42")
			http.Error(w, `{"code":429,"message":"slow down"}`, http.StatusTooManyRequests)
		case "reset":
			w.Header().Set("Content-Length", "5000")
			w.WriteHeader(200)
			_, _ = w.Write([]byte(`[{"sandboxID":`))
			w.(http.Flusher).Flush()
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		case "garbage":
			_, _ = w.Write([]byte("\x00\xffnot json"))
		case "oversized":
			chunk := make([]byte, 1<<20)
			for i := range chunk {
				chunk[i] = ' '
			}
			_, _ = w.Write([]byte("["))
			for range 9 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			_, _ = w.Write([]byte("]"))
		default:
			_, _ = w.Write([]byte(`[]`))
		}
	}))
	defer upstream.Close()
	g, audit, key := newFaultGateway(t, upstream.URL, 5*time.Second)
	defer g.Close()
	cs, closeConn := connect(t, g.Gateway.Handler(), key)
	defer closeConn()

	tests := []struct {
		mode, want string
		status     int
		retryAfter float64
	}{
		{"500", "HTTP 500", 500, 0},
		{"429", "wait 42 seconds", 429, 42},
		{"reset", "could not reach E2B", 0, 0},
		{"garbage", "could not read", 200, 0},
		{"oversized", "larger than 8 MiB", 200, 0},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			mode.Store("mode", tt.mode)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: e2b.ToolListSandboxes})
			mode.Store("mode", "")
			if err != nil {
				t.Fatalf("CallTool() err = %v, want a tool result", err)
			}
			text := res.Content[0].(*sdk.TextContent).Text
			if !res.IsError || !strings.Contains(text, tt.want) {
				t.Errorf("call = %v %q, want a tool error saying %q", res.IsError, text, tt.want)
			}
			if got, _ := res.Meta["retryAfterSeconds"].(float64); got != tt.retryAfter {
				t.Errorf("_meta.retryAfterSeconds = %v, want %v", res.Meta["retryAfterSeconds"], tt.retryAfter)
			}
			ev, _ := lastEvent(audit)
			if ev.Outcome != mcpgate.OutcomeError || ev.UpstreamStatus != tt.status {
				t.Errorf("audit = outcome %s status %d, want error %d", ev.Outcome, ev.UpstreamStatus, tt.status)
			}
			res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: e2b.ToolListSandboxes})
			if err != nil || res.IsError {
				t.Errorf("next call = %v, %v; want success", res, err)
			}
		})
	}
}
