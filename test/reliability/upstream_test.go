package reliability

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestUpstreamFaults drives the real gateway against the e2bsim binary
// while its faults are switched at run time through the simulator's control
// API: E2B failing in every way it can answer, bursts of 500, 503, resets
// and 429 under an open loop of calls, and (concurrently, since the
// gateway's E2B deadline is 30 s and has no setting) a call E2B never
// answers. Each failure is a clear tool error, never an HTTP 5xx; the
// gateway recovers the moment a fault is cleared; every call is audited;
// and the hung call's goroutines are gone once it ends.
func TestUpstreamFaults(t *testing.T) {
	t.Parallel()
	sim := runSim(t)
	dsn := storetest.NewDatabase(t)
	f := newFixture(t, dsn, sim.URL)
	gw, tn, rc, logs := f.gw, f.tn, f.rc, f.logs
	cs := mustSession(t, gw.URL, tn.key.Key, false)
	db := testutil.MustConnect(t, dsn)

	// Warm up at the load's rate, so that the goroutines counted as the
	// baseline include the idle connections such a load leaves.
	var calls callLog
	stop := make(chan struct{})
	wait := openLoop(40, stop, func(i int) { calls.add(rc.call(e2b.ToolListSandboxes, fmt.Sprintf("warm-%d", i))) })
	time.Sleep(time.Second)
	close(stop)
	wait()
	rc.hc.CloseIdleConnections()
	time.Sleep(200 * time.Millisecond)
	baseline := metric(gw.URL, "go_goroutines")

	// A call E2B never answers, consuming a fault meant for it alone.
	const hungID = "ihung0000000000000000"
	sim.setFaults(e2bsim.Fault{Method: "GET", Path: "/sandboxes/" + hungID, Delay: 5 * time.Minute, Times: 1})
	var hung rpcResult
	var hangDone sync.WaitGroup
	hangDone.Go(func() { hung = rc.callArgs(e2b.ToolGetSandbox, "hung", map[string]any{"sandbox_id": hungID}) })
	if !eventually(10*time.Second, func() bool { return len(sim.faults()) == 0 }) {
		t.Fatalf("the hung call did not reach the simulator")
	}

	t.Run("each fault", func(t *testing.T) {
		testEachUpstreamFault(t, sim, cs, db, tn)
	})
	t.Run("bursts under load", func(t *testing.T) {
		calls.add(upstreamBursts(t, sim, rc)...)
	})

	hangDone.Wait()
	d := hung.answered.Sub(hung.sent)
	if hung.status != http.StatusOK || !hung.isError || !strings.Contains(hung.text, "did not answer") ||
		d < e2b.DefaultTimeout || d > e2b.DefaultTimeout+5*time.Second {
		t.Errorf("call E2B never answered = %v after %s, want a tool error at the %s deadline", hung, d.Round(time.Millisecond), e2b.DefaultTimeout)
	}
	rc.hc.CloseIdleConnections()
	var now float64
	if !eventually(5*time.Second, func() bool { now = metric(gw.URL, "go_goroutines"); return now >= 0 && now <= baseline+10 }) {
		t.Errorf("goroutines = %v 5 s after the last call, %v before the faults: a leak", now, baseline)
	}
	t.Logf("hung call: a tool error after %s; goroutines %v before, %v after", d.Round(time.Millisecond), baseline, now)

	if st, _ := httpGet(gw.URL + "/healthz"); st != http.StatusOK {
		t.Errorf("/healthz = %d after the faults", st)
	}
	var missing []rpcResult
	eventually(10*time.Second, func() bool { missing = unaudited(t, db, calls.all()); return len(missing) == 0 })
	if len(missing) > 0 {
		t.Errorf("%d of %d calls have no audit row, the first: %v", len(missing), len(calls.all()), missing[0])
	}
	hungAudited := func() int {
		return count(t, db, `SELECT count(*) FROM audit_log WHERE action = $1 AND arguments->>'sandbox_id' = $2 AND outcome = 'error'`,
			e2b.ToolGetSandbox, hungID)
	}
	if !eventually(10*time.Second, func() bool { return hungAudited() == 1 }) {
		t.Errorf("the hung call has %d audit rows with outcome error, want 1", hungAudited())
	}
	if strings.Contains(logs.String(), tn.e2bKey) || strings.Contains(logs.String(), tn.key.Key) {
		t.Errorf("the gateway logged a key")
	}
}

// testEachUpstreamFault switches each fault on, makes one call, switches it
// off and makes another: the first is a clear tool error without E2B's
// content, audited with the upstream status; the second works.
func testEachUpstreamFault(t *testing.T, sim *simProc, cs *sdk.ClientSession, db *pgx.Conn, tn *tenant) {
	if r := call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil); !r.ok() {
		t.Fatalf("baseline call = %v", r)
	}
	const path = "/v2/sandboxes"
	tests := []struct {
		name       string
		fault      e2bsim.Fault
		wantText   []string
		wantStatus int // upstream_status in the audit row; 0: none recorded
	}{
		{name: "500", fault: e2bsim.Fault{Path: path, Status: 500, Message: "boom"},
			wantText: []string{"E2B had a problem on its side", "HTTP 500"}, wantStatus: 500},
		{name: "502", fault: e2bsim.Fault{Path: path, Status: 502, Body: "<html>bad gateway</html>"},
			wantText: []string{"HTTP 502"}, wantStatus: 502},
		{name: "503", fault: e2bsim.Fault{Path: path, Status: 503},
			wantText: []string{"temporarily unavailable"}, wantStatus: 503},
		{name: "429 with Retry-After", fault: e2bsim.Fault{Path: path, Status: 429, RetryAfter: "17"},
			wantText: []string{"wait 17 seconds", "do not retry in a loop"}, wantStatus: 429},
		{name: "reset before answering", fault: e2bsim.Fault{Path: path, Reset: true},
			wantText: []string{"could not reach E2B"}},
		{name: "reset mid-body", fault: e2bsim.Fault{Path: path, ResetMidBody: true}, wantText: []string{"could not reach E2B"}},
		{name: "garbage JSON", fault: e2bsim.Fault{Path: path, Status: 200, Body: `{"sandboxes": [1, 2, tru`},
			wantText: []string{"could not read"}, wantStatus: 200},
		{name: "oversized body", fault: e2bsim.Fault{Path: path, Oversize: e2b.MaxResponseBytes + 100<<10},
			wantText: []string{"larger than 8 MiB"}, wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := count(t, db, `SELECT count(*) FROM audit_log WHERE kind = 'tool_call'`)
			sim.setFaults(tt.fault)
			start := time.Now()
			r := call(cs, 40*time.Second, e2b.ToolListSandboxes, nil, nil)
			sim.setFaults()
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
			if r := call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil); !r.ok() {
				t.Errorf("next call after the fault was cleared = %v", r)
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
				WHERE kind = 'tool_call' AND outcome <> 'ok' AND action = $1 ORDER BY id DESC LIMIT 1`, e2b.ToolListSandboxes).
				Scan(&outcome, &message, &status)
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
}

// upstreamBursts offers 40 calls/s while E2B answers, for a second each,
// nothing but 500, 503, resets and 429, switched at run time, then nothing
// wrong. Every answer is HTTP 200 with a result; each failure is a clear
// tool error; every call sent after the faults were cleared succeeds. It
// returns the calls, for the audit check.
func upstreamBursts(t *testing.T, sim *simProc, rc *rpcClient) []rpcResult {
	const path = "/v2/sandboxes"
	bursts := []struct {
		name  string
		fault e2bsim.Fault
	}{
		{"500", e2bsim.Fault{Path: path, Status: 500}},
		{"503", e2bsim.Fault{Path: path, Status: 503}},
		{"reset", e2bsim.Fault{Path: path, Reset: true}},
		{"429", e2bsim.Fault{Path: path, Status: 429, RetryAfter: "3"}},
	}
	clear := []string{"E2B had a problem on its side", "temporarily unavailable", "could not reach E2B", "wait 3 seconds"}
	var calls callLog
	stop := make(chan struct{})
	wait := openLoop(40, stop, func(i int) { calls.add(rc.call(e2b.ToolListSandboxes, fmt.Sprintf("burst-%d", i))) })
	time.Sleep(500 * time.Millisecond)
	for _, b := range bursts {
		sim.setFaults(b.fault)
		time.Sleep(time.Second)
	}
	sim.setFaults()
	cleared := time.Now()
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wait()

	all := calls.all()
	failed, after := 0, 0
	for _, r := range all {
		if r.status != http.StatusOK || r.rpcError || r.err != nil {
			t.Errorf("call %v, want HTTP 200 with a tool result", r)
			continue
		}
		if r.sent.After(cleared) {
			after++
			if !r.ok() {
				t.Errorf("call sent %s after the faults were cleared failed: %v", r.sent.Sub(cleared).Round(time.Millisecond), r)
			}
		}
		if !r.isError {
			continue
		}
		failed++
		if !containsAny(r.text, clear) {
			t.Errorf("tool error %q is not one of the clear messages %q", r.text, clear)
		}
	}
	if failed < len(bursts)*20 {
		t.Errorf("only %d of %d calls failed during %d one-second bursts at 40 calls/s", failed, len(all), len(bursts))
	}
	t.Logf("%d calls at 40 calls/s through bursts of %d faults: %d clear tool errors, 0 HTTP 5xx; all %d sent after the clear succeeded",
		len(all), len(bursts), failed, after)
	return all
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
