package reliability

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// faultyUpstream is e2bsim with faults the simulator cannot make itself:
// a reset in the middle of a body, garbage JSON with a 200, an oversized
// body. mode applies to GET /v2/sandboxes only.
type faultyUpstream struct {
	sim  *e2bsim.Server
	mode atomic.Value // string
}

func (f *faultyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mode, _ := f.mode.Load().(string)
	if r.Method != http.MethodGet || r.URL.Path != "/v2/sandboxes" || mode == "" {
		f.sim.ServeHTTP(w, r)
		return
	}
	switch mode {
	case "reset-mid-body":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`[{"sandboxID":"i` + strings.Repeat("a", 500)))
		w.(http.Flusher).Flush()
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = buf.Flush()
			_ = conn.Close()
			return
		}
		panic(http.ErrAbortHandler)
	case "garbage":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"sandboxes": [1, 2, tru`))
	case "oversized":
		w.Header().Set("Content-Type", "application/json")
		bw := bufio.NewWriterSize(w, 64<<10)
		_, _ = bw.WriteString("[")
		item := `{"sandboxID":"` + strings.Repeat("x", 1000) + `"},`
		for n := 0; n < (e2b.MaxResponseBytes/len(item))+100; n++ {
			_, _ = bw.WriteString(item)
		}
		_, _ = bw.WriteString(`{}]`)
		_ = bw.Flush()
	}
}

// TestUpstreamFaults drives the real gateway against an E2B that fails in
// every way it can answer: each failure is a clear tool error, the gateway
// stays healthy, the next call works, and the audit log records the failure
// with the upstream status. (A slow or hung E2B is tested in mcp's
// faults_test.go: the gateway has no setting to shorten its 30 s E2B
// deadline, so a subprocess test of it would take 30 s per case.)
func TestUpstreamFaults(t *testing.T) {
	t.Parallel()
	up := &faultyUpstream{sim: e2bsim.New(e2bsim.Options{})}
	e2bSrv := httptest.NewServer(up)
	t.Cleanup(e2bSrv.Close)
	dsn := storetest.NewDatabase(t)
	var logs testutil.LockedBuffer
	gw := startGateway(t, newGWConfig(t, dsn, e2bSrv.URL), &logs)
	tn := newTenant(t, gw.URL, nil)
	cs := mustSession(t, gw.URL, tn.key.Key, false)
	db := mustDB(t, dsn)

	if r := call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil); !r.ok() {
		t.Fatalf("baseline call = %v", r)
	}
	tests := []struct {
		name       string
		fault      *e2bsim.Fault
		mode       string
		wantText   []string
		wantStatus int // upstream_status in the audit row; 0: none recorded
	}{
		{name: "500", fault: &e2bsim.Fault{Path: "/v2/sandboxes", Status: 500, Message: "boom"},
			wantText: []string{"E2B had a problem on its side", "HTTP 500"}, wantStatus: 500},
		{name: "502", fault: &e2bsim.Fault{Path: "/v2/sandboxes", Status: 502, Body: "<html>bad gateway</html>"},
			wantText: []string{"HTTP 502"}, wantStatus: 502},
		{name: "503", fault: &e2bsim.Fault{Path: "/v2/sandboxes", Status: 503},
			wantText: []string{"temporarily unavailable"}, wantStatus: 503},
		{name: "429 with Retry-After", fault: &e2bsim.Fault{Path: "/v2/sandboxes", Status: 429, RetryAfter: "17"},
			wantText: []string{"wait 17 seconds", "do not retry in a loop"}, wantStatus: 429},
		{name: "reset before answering", fault: &e2bsim.Fault{Path: "/v2/sandboxes", Reset: true},
			wantText: []string{"could not reach E2B"}},
		{name: "reset mid-body", mode: "reset-mid-body", wantText: []string{"could not reach E2B"}},
		{name: "garbage JSON", mode: "garbage", wantText: []string{"could not read"}, wantStatus: 200},
		{name: "oversized body", mode: "oversized", wantText: []string{"larger than 8 MiB"}, wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := count(t, db, `SELECT count(*) FROM audit_log WHERE kind = 'tool_call'`)
			remove := func() {}
			if tt.fault != nil {
				remove = up.sim.Inject(*tt.fault)
			}
			up.mode.Store(tt.mode)
			start := time.Now()
			r := call(cs, 40*time.Second, e2b.ToolListSandboxes, nil, nil)
			up.mode.Store("")
			remove()
			if r.err != nil || !r.isError {
				t.Fatalf("call = %v, want a tool error", r)
			}
			for _, w := range tt.wantText {
				if !strings.Contains(r.text, w) {
					t.Errorf("tool error %q does not say %q", r.text, w)
				}
			}
			for _, leak := range []string{"<html>", "sandboxID", "xxxxxxxx", "aaaaaaaa", tn.e2bKey} {
				if strings.Contains(r.text, leak) {
					t.Errorf("tool error %q carries upstream content %q", r.text, leak)
				}
			}
			if d := time.Since(start); d > 35*time.Second {
				t.Errorf("call took %s, over the deadline", d)
			}
			if st, _ := httpGet(gw.URL + "/healthz"); st != http.StatusOK {
				t.Errorf("/healthz = %d after the fault", st)
			}
			if r := call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil); !r.ok() {
				t.Errorf("next call after the fault = %v", r)
			}
			// The failure and the next success are both audited.
			if !eventually(10*time.Second, func() bool {
				return count(t, db, `SELECT count(*) FROM audit_log WHERE kind = 'tool_call'`) >= before+2
			}) {
				t.Fatalf("audit log did not record the calls")
			}
			var outcome, message string
			var status *int
			err := db.QueryRow(context.Background(), `SELECT outcome, message, upstream_status FROM audit_log
				WHERE kind = 'tool_call' AND outcome <> 'ok' ORDER BY id DESC LIMIT 1`).Scan(&outcome, &message, &status)
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			if status != nil {
				got = *status
			}
			if outcome != "error" || got != tt.wantStatus || message != r.text {
				t.Errorf("audit row = outcome %q, upstream_status %d, message %q; want error, %d, %q",
					outcome, got, message, tt.wantStatus, r.text)
			}
		})
	}
	if strings.Contains(logs.String(), tn.e2bKey) || strings.Contains(logs.String(), tn.key.Key) {
		t.Errorf("the gateway logged a key")
	}
}
