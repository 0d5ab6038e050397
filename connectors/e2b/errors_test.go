package e2b_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

// TestErrors maps every E2B failure to one coded, actionable error, for
// every tool, and records the upstream status for the audit log.
func TestErrors(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	id := e.create(nil)
	tmpl := e.mustCall(e2b.ToolListTemplates, nil)["data"].([]any)[0].(map[string]any)["template_id"]
	args := map[string]map[string]any{
		e2b.ToolListTemplateBuilds: {"template_id": tmpl},
		e2b.ToolGetSandbox:         {"sandbox_id": id},
		e2b.ToolGetSandboxLogs:     {"sandbox_id": id},
		e2b.ToolGetSandboxMetrics:  {"sandbox_id": id},
		e2b.ToolSetSandboxTimeout:  {"sandbox_id": id, "timeout": 600},
		e2b.ToolPauseSandbox:       {"sandbox_id": id},
		e2b.ToolResumeSandbox:      {"sandbox_id": id},
		e2b.ToolKillSandbox:        {"sandbox_id": id},
	}
	tests := []struct {
		name       string
		fault      e2bsim.Fault
		wantCode   mcpgate.Code
		wantStatus int
		wantText   string
	}{
		{"400", e2bsim.Fault{Status: 400, Message: "Timeout cannot be greater than 1 hours"}, mcpgate.EInvalid, 400, "timeout parameter"},
		{"401", e2bsim.Fault{Status: 401, Message: "Invalid API key"}, mcpgate.EUnauthorized, 401, "team API key"},
		{"403", e2bsim.Fault{Status: 403}, mcpgate.EForbidden, 403, ""},
		{"404", e2bsim.Fault{Status: 404}, mcpgate.ENotFound, 404, "not found"},
		{"409", e2bsim.Fault{Status: 409}, mcpgate.EConflict, 409, ""},
		{"429", e2bsim.Fault{Status: 429, RetryAfter: "12"}, mcpgate.ETooMany, 429, "wait 12 seconds"},
		{"429 without Retry-After", e2bsim.Fault{Status: 429, RetryAfter: "soon"}, mcpgate.ETooMany, 429, "wait 30 seconds"},
		{"500", e2bsim.Fault{Status: 500}, mcpgate.EUpstream, 500, "E2B had a problem on its side"},
		{"502", e2bsim.Fault{Status: 502}, mcpgate.EUpstream, 502, "HTTP 502"},
		{"503", e2bsim.Fault{Status: 503, Body: `{"code":503,"message":"no capacity","error_code":"sandbox_capacity_unavailable"}`},
			mcpgate.EUnavailable, 503, "no capacity"},
		{"malformed JSON", e2bsim.Fault{Status: 200, Body: `{"templates": [`}, mcpgate.EUpstream, 200, "could not read"},
		{"non-JSON error body", e2bsim.Fault{Status: 500, Body: `<html>oops</html>`}, mcpgate.EUpstream, 500, ""},
		{"reset", e2bsim.Fault{Reset: true}, mcpgate.EUnavailable, 0, "could not reach E2B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, tl := range e.conn.Tools() {
				if tt.name == "malformed JSON" && tl.Name != e2b.ToolListDefaultTemplates && tl.Name != e2b.ToolGetSandbox {
					continue // 2xx without a body are fine for 204 routes
				}
				remove := e.sim.Inject(tt.fault)
				_, err := e.call(tl.Name, args[tl.Name])
				remove()
				if got := mcpgate.ErrorCode(err); got != tt.wantCode {
					t.Errorf("%s: err = %v (code %q), want %q", tl.Name, err, got, tt.wantCode)
					continue
				}
				if got := connectors.UpstreamStatus(err); got != tt.wantStatus {
					t.Errorf("%s: UpstreamStatus() = %d, want %d", tl.Name, got, tt.wantStatus)
				}
				if msg := mcpgate.ErrorMessage(err); !strings.Contains(msg, tt.wantText) {
					t.Errorf("%s: message %q, want it to contain %q", tl.Name, msg, tt.wantText)
				}
			}
		})
	}
	remove := e.sim.Inject(e2bsim.Fault{Status: 429, RetryAfter: "12"})
	_, err := e.call(e2b.ToolListSandboxes, nil)
	remove()
	if got := mcpgate.ErrorRetryAfter(err); got != 12 {
		t.Errorf("RetryAfter = %d, want 12", got)
	}
}

// TestErrors_realStatuses: the simulator's own refusals. E2B's concurrency
// 429 has no Retry-After; the gateway suggests a wait anyway, and the
// message says what lifts the limit, which waiting alone would not.
func TestErrors_realStatuses(t *testing.T) {
	e := newEnv(t, e2bsim.Options{MaxRunning: 1})
	e.create(nil)
	_, err := e.call(e2b.ToolCreateSandbox, nil)
	wantCode(t, err, mcpgate.ETooMany)
	if mcpgate.ErrorRetryAfter(err) <= 0 {
		t.Errorf("RetryAfter = %d, want > 0", mcpgate.ErrorRetryAfter(err))
	}
	if msg := mcpgate.ErrorMessage(err); !strings.Contains(msg, "concurrent sandboxes") || !strings.Contains(msg, "Pause or kill") {
		t.Errorf("message = %q", msg)
	}
	e.sim.BlockTeam(testKey.Reveal(), true)
	_, err = e.call(e2b.ToolCreateSandbox, nil)
	wantCode(t, err, mcpgate.EForbidden)
}

func TestErrors_timeout(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	conn := e2b.New(e2b.Options{BaseURL: e.srv.URL, HTTPClient: e.srv.Client(), Timeout: 50 * time.Millisecond})
	e.sim.Inject(e2bsim.Fault{Delay: 5 * time.Second})
	start := time.Now()
	_, err := conn.Client().ListSandboxes(context.Background(), testKey, e2b.ListSandboxesParams{})
	wantCode(t, err, mcpgate.EUnavailable)
	if !strings.Contains(mcpgate.ErrorMessage(err), "did not answer") {
		t.Errorf("message = %q", mcpgate.ErrorMessage(err))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("call took %v, want the 50 ms deadline to stop it", d)
	}
}

func TestErrors_connectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	conn := e2b.New(e2b.Options{BaseURL: "http://" + addr, Timeout: time.Second})
	_, err = conn.Client().GetSandbox(context.Background(), testKey, "iabcdefghij0123456789")
	wantCode(t, err, mcpgate.EUnavailable)
	if connectors.UpstreamStatus(err) != 0 {
		t.Errorf("UpstreamStatus() = %d, want 0", connectors.UpstreamStatus(err))
	}
	if strings.Contains(err.Error(), testKey.Reveal()) {
		t.Errorf("error carries the key: %v", err)
	}
}

func TestErrors_oversized(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`[` + strings.Repeat(`{"sandboxID":"x"},`, e2b.MaxResponseBytes/17) + `{}]`))
	}))
	defer srv.Close()
	conn := e2b.New(e2b.Options{BaseURL: srv.URL, HTTPClient: srv.Client()})
	_, err := conn.Client().ListSandboxes(context.Background(), testKey, e2b.ListSandboxesParams{})
	wantCode(t, err, mcpgate.EUpstream)
	if !strings.Contains(mcpgate.ErrorMessage(err), "larger than 8 MiB") {
		t.Errorf("message = %q", mcpgate.ErrorMessage(err))
	}
}

// TestClient_request checks what goes on the wire: auth header, units and
// encodings E2B expects.
func TestClient_request(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set("X-Next-Token", "tok")
		w.Header().Set("X-Total-Running", "3")
		w.Write([]byte(`[]`))
	}))
	defer srv.Close()
	c := e2b.NewClient(e2b.Options{BaseURL: srv.URL, HTTPClient: srv.Client()})
	page, err := c.ListSandboxes(context.Background(), testKey, e2b.ListSandboxesParams{
		States: []string{"running", "paused"}, Metadata: map[string]string{"user": "a b&c"},
		StartedAfter: epoch, Limit: 5, NextToken: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	if page.NextToken != "tok" || page.TotalRunning == nil || *page.TotalRunning != 3 {
		t.Errorf("page = %+v", page)
	}
	q := got.URL.Query()
	if got.Header.Get("X-API-Key") != testKey.Reveal() || q.Get("state") != "running,paused" || len(q["state"]) != 1 ||
		q.Get("metadata") != "user=a%2Bb%2526c" /* three levels, see TestContract_metadata */ || q.Get("startedAfter") != "2026-03-01T12:00:00Z" ||
		q.Get("limit") != "5" || q.Get("nextToken") != "abc" {
		t.Errorf("request = %s %v", got.URL, got.Header)
	}

	_, err = c.SandboxMetrics(context.Background(), testKey, "iabcdefghij0123456789", epoch, epoch.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if q := got.URL.Query(); q.Get("start") != "1772366400" || q.Get("end") != "1772366460" {
		t.Errorf("metrics query = %s, want Unix seconds", got.URL.RawQuery)
	}
}
