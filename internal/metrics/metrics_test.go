package metrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/metrics"
	"github.com/mcpgate/mcpgate/mcp"
)

// The registry is what the gateway reports to.
var _ mcp.Metrics = (*metrics.Registry)(nil)

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics status = %d, want 200", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type = %q, want text/plain exposition format", ct)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRegistry_Scrape(t *testing.T) {
	// A pool that never connects: Stat works without a server.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	queue := 7
	m := metrics.New(metrics.Options{Version: "v1.2.3", AuditQueue: func() int { return queue }, DBStats: pool.Stat})
	waits := 3
	m.CountApprovalWaits(func() int { return waits })
	held := 2
	m.CountHeldCalls(func() int { return held })

	m.ToolCall("e2b_list_sandboxes", mcpgate.OutcomeOK, 300*time.Microsecond, 20*time.Millisecond)
	m.ToolCall("e2b_list_sandboxes", mcpgate.OutcomeOK, 200*time.Microsecond, 10*time.Millisecond)
	m.ToolCall("e2b_get_sandbox", mcpgate.OutcomeError, 100*time.Microsecond, 5*time.Millisecond)
	m.ToolCall("e2b_kill_sandbox", mcpgate.OutcomeDenied, 0, 0)
	m.UpstreamError(404)
	m.UpstreamError(0)
	m.AuthFailure("revoked")
	m.RateLimited()
	m.RateLimited()

	out := scrape(t, m.Handler())
	want := []string{
		`mcpgate_tool_calls_total{outcome="ok",tool="e2b_list_sandboxes"} 2`,
		`mcpgate_tool_calls_total{outcome="error",tool="e2b_get_sandbox"} 1`,
		`mcpgate_tool_calls_total{outcome="denied",tool="e2b_kill_sandbox"} 1`,
		`mcpgate_tool_call_gateway_seconds_bucket{tool="e2b_list_sandboxes",le="0.00025"} 1`,
		`mcpgate_tool_call_gateway_seconds_bucket{tool="e2b_list_sandboxes",le="0.0005"} 2`,
		`mcpgate_tool_call_gateway_seconds_count{tool="e2b_list_sandboxes"} 2`,
		`mcpgate_tool_call_upstream_seconds_count{tool="e2b_list_sandboxes"} 2`,
		`mcpgate_tool_call_upstream_seconds_sum{tool="e2b_list_sandboxes"} 0.03`,
		`mcpgate_tool_call_upstream_seconds_bucket{tool="e2b_get_sandbox",le="0.005"} 1`,
		`mcpgate_upstream_errors_total{status="404"} 1`,
		`mcpgate_upstream_errors_total{status="other"} 1`,
		`mcpgate_auth_failures_total{reason="revoked"} 1`,
		`mcpgate_auth_failures_total{reason="unknown"} 0`,
		`mcpgate_rate_limited_total 2`,
		`mcpgate_audit_queue_depth 7`,
		`mcpgate_approval_waits 3`,
		`mcpgate_held_calls 2`,
		`mcpgate_build_info{goversion="go`,
		`version="v1.2.3"} 1`,
		`mcpgate_db_pool_acquired_connections 0`,
		`mcpgate_db_pool_max_connections `,
		`mcpgate_db_pool_acquires_total 0`,
		`mcpgate_db_pool_acquire_wait_seconds_total 0`,
		`go_gc_gogc_percent `,
		`go_gc_gomemlimit_bytes `,
		`go_memstats_heap_inuse_bytes `,
		`process_resident_memory_bytes `,
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("scrape lacks %q", w)
		}
	}
	// A call refused before the upstream is not an upstream observation.
	if strings.Contains(out, `mcpgate_tool_call_upstream_seconds_count{tool="e2b_kill_sandbox"}`) &&
		!strings.Contains(out, `mcpgate_tool_call_upstream_seconds_count{tool="e2b_kill_sandbox"} 0`) {
		t.Errorf("a denied call was observed as upstream time")
	}
	queue, waits, held = 0, 0, 0
	if out := scrape(t, m.Handler()); !strings.Contains(out, "mcpgate_audit_queue_depth 0\n") || !strings.Contains(out, "mcpgate_approval_waits 0\n") ||
		!strings.Contains(out, "mcpgate_held_calls 0\n") {
		t.Errorf("audit queue depth, approval waits or held calls not read at scrape time")
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", out)
	}
}

// TestRegistry_LabelsBounded checks that only the low-cardinality labels
// exist: no key, workspace or sandbox ids, whatever was recorded.
func TestRegistry_LabelsBounded(t *testing.T) {
	m := metrics.New(metrics.Options{})
	m.ToolCall("e2b_get_sandbox", mcpgate.OutcomeOK, time.Millisecond, time.Millisecond)
	m.UpstreamError(429)
	m.AuthFailure("unknown")
	allowed := map[string]bool{"tool": true, "outcome": true, "status": true, "reason": true, "le": true,
		"version": true, "goversion": true, "quantile": true}
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if !allowed[l.GetName()] {
					t.Errorf("metric %s has label %q", f.GetName(), l.GetName())
				}
			}
		}
	}
	// Without the optional sources, their metrics are absent, not zero.
	out := scrape(t, m.Handler())
	for _, absent := range []string{"mcpgate_audit_queue_depth", "mcpgate_db_pool_"} {
		if strings.Contains(out, absent) {
			t.Errorf("scrape has %s without its source", absent)
		}
	}
	if !strings.Contains(out, `version="dev"`) {
		t.Errorf("empty version not reported as dev")
	}
}

func BenchmarkToolCall(b *testing.B) {
	m := metrics.New(metrics.Options{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ToolCall("e2b_list_sandboxes", mcpgate.OutcomeOK, 200*time.Microsecond, 5*time.Millisecond)
		}
	})
}
