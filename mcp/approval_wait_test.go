package mcp_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/mcp"
)

// waitTimers are approval-wait timers the test fires: one channel per
// duration, so that a fire is a handoff to the wait that armed it. Arming
// and stopping are reported.
type waitTimers struct {
	mu      sync.Mutex
	chans   map[time.Duration]chan time.Time
	armed   chan time.Duration
	stopped chan time.Duration
}

func newWaitTimers() *waitTimers {
	return &waitTimers{chans: map[time.Duration]chan time.Time{}, armed: make(chan time.Duration, 256),
		stopped: make(chan time.Duration, 256)}
}

func (w *waitTimers) ch(d time.Duration) chan time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.chans[d] == nil {
		w.chans[d] = make(chan time.Time)
	}
	return w.chans[d]
}

func (w *waitTimers) timer(d time.Duration) (<-chan time.Time, func() bool) {
	w.armed <- d
	return w.ch(d), func() bool { w.stopped <- d; return true }
}

func (w *waitTimers) fire(d time.Duration) { w.ch(d) <- time.Time{} }

func (w *waitTimers) next(t *testing.T, ch chan time.Duration, d time.Duration, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == d {
				return
			}
		case <-deadline:
			t.Fatalf("the wait's timer was not %s", what)
		}
	}
}

const mcpTestWait = 40 * time.Second

// newWaitGateway is the demo gateway with demo_delete under a person's
// approval and a 40 s approval wait, on the test's wait timers.
func newWaitGateway(t *testing.T) (*gwGateway, *waitTimers) {
	t.Helper()
	timers := newWaitTimers()
	tg := &gwGateway{clock: e2bsim.NewManualClock(time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)), conn: newGWConnector()}
	tg.Fixture = mcp.NewFixture(t, mcp.FixtureOptions{Registry: connectors.NewRegistry(tg.conn),
		Credential: "demo-credential", Now: tg.clock.Now, WaitTimer: timers.timer})
	tg.url = tg.URL
	ctx := context.Background()
	human := mcpgate.ApprovalHuman
	if _, err := tg.Service.Tools.UpdateTool(ctx, tg.Owner(), "demo_delete", mcpgate.ToolUpdate{Approval: &human}); err != nil {
		t.Fatal(err)
	}
	seconds := int(mcpTestWait / time.Second)
	if _, err := tg.Service.Workspaces.UpdateWorkspace(ctx, tg.Owner(), mcpgate.WorkspaceUpdate{ApprovalWaitSeconds: &seconds}); err != nil {
		t.Fatal(err)
	}
	return tg, timers
}

// progressSession connects with a handler that passes every progress
// notification on.
func progressSession(t *testing.T, tg *gwGateway, key, version string) (*sdk.ClientSession, <-chan *sdk.ProgressNotificationParams) {
	t.Helper()
	got := make(chan *sdk.ProgressNotificationParams, 64)
	cs := tg.connect(t, key, version, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) { got <- req.Params }})
	return cs, got
}

type callResult struct {
	res *sdk.CallToolResult
	err error
}

// callWaiting calls demo_delete in the background with a progress token.
func callWaiting(ctx context.Context, cs *sdk.ClientSession, id string) <-chan callResult {
	done := make(chan callResult, 1)
	p := &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": id}}
	p.SetProgressToken("wait-" + id)
	go func() {
		res, err := cs.CallTool(ctx, p)
		done <- callResult{res, err}
	}()
	return done
}

// firstProgress is the notification the wait sends as it begins; it names
// the page where a person decides, and so the approval's id.
func firstProgress(t *testing.T, got <-chan *sdk.ProgressNotificationParams, done <-chan callResult) string {
	t.Helper()
	select {
	case p := <-got:
		prefix := "http://gateway.test/app/w/"
		i := strings.Index(p.Message, prefix)
		if i < 0 || !strings.Contains(p.Message, "Waiting for a person") || p.Progress != 0 || p.Total != mcpTestWait.Seconds() {
			t.Fatalf("first progress = %+v, want 0 of %v with the approval page", p, mcpTestWait.Seconds())
		}
		url := p.Message[i:]
		return url[strings.LastIndex(url, "/")+1:]
	case r := <-done:
		t.Fatalf("call ended before it waited: %v, %v", r.res, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("no progress notification")
	}
	return ""
}

func waitResult(t *testing.T, done <-chan callResult) callResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call did not return")
	}
	return callResult{}
}

// A person approves while the call waits: the same call returns the tool's
// real result, and the approval is spent; on both protocol generations.
func TestApprovalWait_ApprovedReturnsTheResult(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("version "+version, func(t *testing.T) {
			tg, _ := newWaitGateway(t)
			key, _ := tg.AddKey(t, mcpgate.ScopeFull)
			cs, progress := progressSession(t, tg, key, version)
			done := callWaiting(t.Context(), cs, "x1")
			id := firstProgress(t, progress, done)
			if len(tg.conn.deletedIDs()) != 0 {
				t.Fatal("deleted before the approval")
			}
			if _, err := tg.Service.Approvals.Approve(context.Background(), tg.Owner(), id); err != nil {
				t.Fatal(err)
			}
			r := waitResult(t, done)
			if r.err != nil || r.res.IsError || !strings.Contains(testutil.ToolText(r.res), `"deleted":"x1"`) {
				t.Fatalf("waiting call = %v, %v; want the tool's result", r.err, testutil.ToolText(r.res))
			}
			if got := tg.conn.deletedIDs(); len(got) != 1 || got[0] != "x1" {
				t.Fatalf("deleted %v, want x1 once", got)
			}
			res := gwCall(t, cs, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": "x1", "approval_id": id}})
			if !res.IsError || !strings.Contains(testutil.ToolText(res), "already used") {
				t.Errorf("retry with the spent approval = %q, want already used", testutil.ToolText(res))
			}
		})
	}
}

// A person denies it: a tool error saying so, and nothing ran.
func TestApprovalWait_Denied(t *testing.T) {
	tg, _ := newWaitGateway(t)
	key, _ := tg.AddKey(t, mcpgate.ScopeFull)
	cs, progress := progressSession(t, tg, key, "2025-11-25")
	done := callWaiting(t.Context(), cs, "x1")
	id := firstProgress(t, progress, done)
	if _, err := tg.Service.Approvals.Deny(context.Background(), tg.Owner(), id); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, done)
	if r.err != nil || !r.res.IsError || !strings.Contains(testutil.ToolText(r.res), "denied this call") {
		t.Fatalf("waiting call = %v, %q; want a tool error saying it was denied", r.err, testutil.ToolText(r.res))
	}
	if got := tg.conn.deletedIDs(); len(got) != 0 {
		t.Fatalf("deleted %v after a denial", got)
	}
}

// Nobody decides in time: progress every few seconds, then exactly the
// answer without a wait (the link and approval_id), which still works.
func TestApprovalWait_NoDecisionInTime(t *testing.T) {
	tg, timers := newWaitGateway(t)
	key, _ := tg.AddKey(t, mcpgate.ScopeFull)
	cs, progress := progressSession(t, tg, key, "2025-11-25")
	done := callWaiting(t.Context(), cs, "x1")
	id := firstProgress(t, progress, done)
	timers.fire(5 * time.Second)
	if p := <-progress; p.Progress != 5 || p.Total != mcpTestWait.Seconds() || p.ProgressToken != "wait-x1" {
		t.Errorf("second progress = %+v, want 5 of %v", p, mcpTestWait.Seconds())
	}
	timers.fire(mcpTestWait)
	r := waitResult(t, done)
	if r.err != nil || r.res.IsError {
		t.Fatalf("waiting call = %v, %q", r.err, testutil.ToolText(r.res))
	}
	out := r.res.StructuredContent.(map[string]any)
	if out["status"] != "approval_required" || out["approval_id"] != id || out["not_waited"] != nil ||
		!strings.HasSuffix(out["approval_url"].(string), "/approvals/"+id) {
		t.Fatalf("answer after the wait = %v, want approval_required with the link", out)
	}
	if _, err := tg.Service.Approvals.Approve(context.Background(), tg.Owner(), id); err != nil {
		t.Fatal(err)
	}
	res := gwCall(t, cs, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": "x1", "approval_id": id}})
	if res.IsError || len(tg.conn.deletedIDs()) != 1 {
		t.Fatalf("retry with approval_id = %q, deleted %v", testutil.ToolText(res), tg.conn.deletedIDs())
	}
}

// A client without a progress token waits all the same, silently.
func TestApprovalWait_WithoutProgressToken(t *testing.T) {
	tg, timers := newWaitGateway(t)
	key, _ := tg.AddKey(t, mcpgate.ScopeFull)
	cs, progress := progressSession(t, tg, key, "")
	done := make(chan callResult, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": "x1"}})
		done <- callResult{res, err}
	}()
	timers.next(t, timers.armed, mcpTestWait, "armed")
	pending, err := tg.Service.Approvals.Approvals(context.Background(), tg.Owner(), mcpgate.ApprovalPending)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending approvals = %v, %v", pending, err)
	}
	if _, err := tg.Service.Approvals.Approve(context.Background(), tg.Owner(), pending[0].ID); err != nil {
		t.Fatal(err)
	}
	if r := waitResult(t, done); r.err != nil || r.res.IsError || len(tg.conn.deletedIDs()) != 1 {
		t.Fatalf("waiting call = %v, %q", r.err, testutil.ToolText(r.res))
	}
	select {
	case p := <-progress:
		t.Errorf("progress %+v sent to a client that sent no token", p)
	default:
	}
}

// The client goes away during the wait (on the legacy protocol too, whose
// calls go-sdk does not cancel): the wait ends at once, holding nothing,
// and the approval stays usable.
func TestApprovalWait_ClientGoesAway(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("version "+version, func(t *testing.T) {
			tg, timers := newWaitGateway(t)
			key, _ := tg.AddKey(t, mcpgate.ScopeFull)
			cs, progress := progressSession(t, tg, key, version)
			ctx, cancel := context.WithCancel(t.Context())
			done := callWaiting(ctx, cs, "x1")
			id := firstProgress(t, progress, done)
			cancel()
			if r := waitResult(t, done); r.err == nil {
				t.Fatalf("cancelled call = %v, want an error", testutil.ToolText(r.res))
			}
			timers.next(t, timers.stopped, mcpTestWait, "stopped")
			if n := tg.Service.ApprovalWaits(); n != 0 {
				t.Fatalf("ApprovalWaits() = %d after the client left, want 0", n)
			}
			ap, err := tg.Service.Approvals.Approval(context.Background(), tg.Owner(), id)
			if err != nil || ap.State != mcpgate.ApprovalPending {
				t.Fatalf("approval after the client left = %+v, %v; want pending", ap, err)
			}
			if _, err := tg.Service.Approvals.Approve(context.Background(), tg.Owner(), id); err != nil {
				t.Fatal(err)
			}
			cs2 := tg.connect(t, key, version, nil)
			res := gwCall(t, cs2, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": "x1", "approval_id": id}})
			if res.IsError || len(tg.conn.deletedIDs()) != 1 {
				t.Fatalf("retry with approval_id = %q, deleted %v", testutil.ToolText(res), tg.conn.deletedIDs())
			}
		})
	}
}

// Past the bound of waits of one person, a call gets the link at once and is
// told why.
func TestApprovalWait_Bounded(t *testing.T) {
	tg, _ := newWaitGateway(t)
	key, _ := tg.AddKey(t, mcpgate.ScopeFull)
	cs, progress := progressSession(t, tg, key, "2025-11-25")
	for i := range 5 {
		done := callWaiting(t.Context(), cs, "w"+string(rune('0'+i)))
		firstProgress(t, progress, done)
	}
	res := gwCall(t, cs, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": "x9"}})
	out, _ := res.StructuredContent.(map[string]any)
	if res.IsError || out["status"] != "approval_required" || !strings.Contains(testutil.ToolText(res), "did not wait") {
		t.Fatalf("sixth call = %q, want the link at once, saying it did not wait", testutil.ToolText(res))
	}
}

// A client that gets the approval as a URL-mode input request gets it at
// once, wait or not: it shows the page itself and comes back when the
// person is done, and holding the call would hide the page meanwhile.
func TestApprovalWait_URLElicitationAnswersAtOnce(t *testing.T) {
	tg, _ := newWaitGateway(t)
	key, _ := tg.AddKey(t, mcpgate.ScopeFull)
	cs := tg.connect(t, key, "", &sdk.ClientOptions{
		Capabilities:   &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
		MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept"}, nil
		}})
	res := gwCall(t, cs, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": "x1"}})
	if ir, ok := res.InputRequests["approval"].(*sdk.ElicitParams); !ok || ir.Mode != "url" {
		t.Fatalf("call = %+v, want a URL-mode input request at once", res)
	}
	if n := tg.Service.ApprovalWaits(); n != 0 {
		t.Errorf("ApprovalWaits() = %d, want 0", n)
	}
}

// A stop ends the wait with the link, not an error: nothing ran, and the
// approval stays open for a retry on another replica.
func TestApprovalWait_StopAnswersWithTheLink(t *testing.T) {
	tg, _ := newWaitGateway(t)
	key, _ := tg.AddKey(t, mcpgate.ScopeFull)
	cs, progress := progressSession(t, tg, key, "2025-11-25")
	done := callWaiting(t.Context(), cs, "x1")
	id := firstProgress(t, progress, done)
	tg.Gateway.BeginStop(0)
	r := waitResult(t, done)
	if r.err != nil || r.res.IsError {
		t.Fatalf("call waiting at a stop = %v, %q; want the link", r.err, testutil.ToolText(r.res))
	}
	if out := r.res.StructuredContent.(map[string]any); out["status"] != "approval_required" || out["approval_id"] != id {
		t.Fatalf("call waiting at a stop = %v, want approval_required for %s", out, id)
	}
	if ap, err := tg.Service.Approvals.Approval(context.Background(), tg.Owner(), id); err != nil || ap.State != mcpgate.ApprovalPending {
		t.Fatalf("approval after the stop = %+v, %v; want pending", ap, err)
	}
}
