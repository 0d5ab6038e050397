package service_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/store"
)

// waitTimers are timers the test fires: one channel per duration, so that a
// fire is a handoff to the wait that armed it (it blocks until the wait
// takes it). Each stop is reported on stopped.
type waitTimers struct {
	mu      sync.Mutex
	chans   map[time.Duration]chan time.Time
	stopped chan time.Duration
}

func newWaitTimers() *waitTimers {
	return &waitTimers{chans: map[time.Duration]chan time.Time{}, stopped: make(chan time.Duration, 256)}
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
	return w.ch(d), func() bool { w.stopped <- d; return true }
}

func (w *waitTimers) fire(d time.Duration) { w.ch(d) <- time.Time{} }

// ended waits until the timer of a whole wait (d) is stopped: the wait is
// over and has released its place.
func (w *waitTimers) ended(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-w.stopped:
			if got == d {
				return
			}
		case <-deadline:
			t.Fatal("the wait did not end")
		}
	}
}

type waitFixture struct {
	*padFixture
	timers *waitTimers
	key    *mcpgate.Actor
}

const testWait = 30 * time.Second

// newWaitFixture is the pad fixture with the test's wait timers, pads_end
// under a person's approval, a 30 s wait and an MCP key of the member.
func newWaitFixture(t *testing.T) *waitFixture {
	t.Helper()
	pads, clk, timers := newPadConnector(), e2bsim.NewManualClock(time.Now()), newWaitTimers()
	f := newSvcFixture(t, func(o *service.Options) {
		notes, _ := o.Registry.Connector("notes")
		o.Registry = connectors.NewRegistry(notes, pads)
		o.Now = clk.Now
		o.WaitTimer = timers.timer
	})
	if _, err := f.svc.Connections.PutConnection(context.Background(), f.owner, "pads", "pads-credential"); err != nil {
		t.Fatal(err)
	}
	wf := &waitFixture{padFixture: &padFixture{svcFixture: f, pads: pads, clock: clk}, timers: timers}
	wf.enableEnd(t, mcpgate.ApprovalHuman)
	wf.setWait(t, f.owner, int(testWait/time.Second))
	wf.key = wf.keyActor(t, f.member)
	return wf
}

func (f *waitFixture) setWait(t *testing.T, owner *mcpgate.Actor, seconds int) {
	t.Helper()
	if _, err := f.svc.Workspaces.UpdateWorkspace(context.Background(), owner, mcpgate.WorkspaceUpdate{ApprovalWaitSeconds: &seconds}); err != nil {
		t.Fatalf("UpdateWorkspace(wait %d) err = %v", seconds, err)
	}
}

// waitResult is what AwaitApproval returned.
type waitResult struct {
	state mcpgate.ApprovalState
	err   error
}

// progressCall is one call of the progress function.
type progressCall struct{ waited, wait time.Duration }

// start runs AwaitApproval in the background and returns once the wait has
// begun (its first progress call), with the rest of the progress calls and
// the result to come.
func (f *waitFixture) start(t *testing.T, ctx context.Context, key *mcpgate.Actor, ap *mcpgate.ApprovalRequest) (<-chan progressCall, <-chan waitResult) {
	t.Helper()
	progress, done := make(chan progressCall, 16), make(chan waitResult, 1)
	go func() {
		st, err := f.svc.Approvals.AwaitApproval(ctx, key, ap, func(waited, wait time.Duration) error {
			progress <- progressCall{waited, wait}
			return nil
		})
		done <- waitResult{st, err}
	}()
	select {
	case p := <-progress:
		if p != (progressCall{0, testWait}) {
			t.Fatalf("first progress = %+v, want 0 of %s", p, testWait)
		}
	case r := <-done:
		t.Fatalf("AwaitApproval() = %v, %v before it waited", r.state, r.err)
	}
	return progress, done
}

func result(t *testing.T, done <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("AwaitApproval() did not return")
	}
	return waitResult{}
}

// runWithApproval is the call again with its approval, as the MCP endpoint
// makes it once the wait ended on a decision.
func (f *waitFixture) runWithApproval(key *mcpgate.Actor, pad, id string) error {
	_, err := f.svc.Tools.CallTool(context.Background(), key, mcpgate.ToolCall{Tool: "pads_end", Arguments: []byte(`{"pad":"` + pad + `"}`), ApprovalID: id})
	return err
}

func (f *waitFixture) ended() int {
	f.pads.mu.Lock()
	defer f.pads.mu.Unlock()
	return f.pads.ended
}

// listen runs the invalidation listener of f's replica, wired as the app
// wires it for approvals.
func (f *waitFixture) listen(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		f.db.Listen(ctx, slog.New(slog.DiscardHandler), ready, func(inv store.Invalidation) {
			if inv.Kind == store.InvalidateApproval || inv.Kind == "" {
				f.svc.WakeApprovalWaits(inv.WorkspaceID, inv.ID)
			}
		}, nil)
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	<-ready
}

// otherReplica is a second instance of the services on the same database,
// as another replica runs them.
func (f *waitFixture) otherReplica() *service.Set {
	return service.New(service.Options{DB: f.db, Registry: connectors.NewRegistry(f.pads), PublicURL: "http://gw.test", Now: f.clock.Now})
}

// A call waits on one replica; a person approves on another; the waiting
// replica hears it through the database's notification (no reads in a
// loop) and the call, made again with the approval, runs once.
func TestAwaitApproval_ApprovedOnAnotherReplica(t *testing.T) {
	f := newWaitFixture(t)
	f.listen(t)
	ap := f.request(t, f.key, "p1")
	_, done := f.start(t, context.Background(), f.key, ap)
	if n := f.svc.ApprovalWaits(); n != 1 {
		t.Errorf("ApprovalWaits() = %d while waiting, want 1", n)
	}
	if _, err := f.otherReplica().Approvals.Approve(context.Background(), f.admin, ap.ID); err != nil {
		t.Fatalf("Approve() on the other replica err = %v", err)
	}
	if r := result(t, done); r.state != mcpgate.ApprovalApproved || r.err != nil {
		t.Fatalf("AwaitApproval() = %v, %v; want approved", r.state, r.err)
	}
	f.timers.ended(t, testWait)
	if n := f.svc.ApprovalWaits(); n != 0 {
		t.Errorf("ApprovalWaits() = %d after the wait, want 0", n)
	}
	if err := f.runWithApproval(f.key, "p1", ap.ID); err != nil || f.ended() != 1 {
		t.Fatalf("the call with its approval = %v, ended %d; want it run once", err, f.ended())
	}
	if err := f.runWithApproval(f.key, "p1", ap.ID); err == nil || !strings.Contains(mcpgate.ErrorMessage(err), "already used") {
		t.Errorf("the approval spent twice: err = %v", err)
	}
}

// A denial on the waiting replica ends the wait at once; the call made
// again with the approval is the refusal, saying a person denied it.
func TestAwaitApproval_Denied(t *testing.T) {
	f := newWaitFixture(t)
	ap := f.request(t, f.key, "p1")
	_, done := f.start(t, context.Background(), f.key, ap)
	if _, err := f.svc.Approvals.Deny(context.Background(), f.admin, ap.ID); err != nil {
		t.Fatal(err)
	}
	if r := result(t, done); r.state != mcpgate.ApprovalDenied || r.err != nil {
		t.Fatalf("AwaitApproval() = %v, %v; want denied", r.state, r.err)
	}
	err := f.runWithApproval(f.key, "p1", ap.ID)
	if err == nil || !strings.Contains(mcpgate.ErrorMessage(err), "denied this call") || f.ended() != 0 {
		t.Fatalf("the call after a denial = %v, ended %d; want the refusal", err, f.ended())
	}
}

// No decision within the wait: pending, with a progress call every few
// seconds meanwhile, and the request still open: approved later, the retry
// with approval_id runs.
func TestAwaitApproval_NoDecisionInTime(t *testing.T) {
	f := newWaitFixture(t)
	ap := f.request(t, f.key, "p1")
	progress, done := f.start(t, context.Background(), f.key, ap)
	for i := 1; i <= 2; i++ {
		f.timers.fire(5 * time.Second)
		if p := <-progress; p != (progressCall{time.Duration(i) * 5 * time.Second, testWait}) {
			t.Fatalf("progress %d = %+v", i, p)
		}
	}
	f.timers.fire(testWait)
	if r := result(t, done); r.state != mcpgate.ApprovalPending || r.err != nil {
		t.Fatalf("AwaitApproval() = %v, %v; want pending", r.state, r.err)
	}
	if got, _ := f.svc.Approvals.Approval(context.Background(), f.owner, ap.ID); got.State != mcpgate.ApprovalPending {
		t.Fatalf("request after the wait = %s, want pending", got.State)
	}
	if _, err := f.svc.Approvals.Approve(context.Background(), f.admin, ap.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.runWithApproval(f.key, "p1", ap.ID); err != nil || f.ended() != 1 {
		t.Fatalf("retry after a late approval = %v, ended %d", err, f.ended())
	}
}

// The one read at the end of the wait sees a decision whose notification
// never came (no listener here, and the decision made on another replica).
func TestAwaitApproval_ReadsOnceAtTheEnd(t *testing.T) {
	f := newWaitFixture(t)
	ap := f.request(t, f.key, "p1")
	_, done := f.start(t, context.Background(), f.key, ap)
	if _, err := f.otherReplica().Approvals.Approve(context.Background(), f.admin, ap.ID); err != nil {
		t.Fatal(err)
	}
	f.timers.fire(testWait)
	if r := result(t, done); r.state != mcpgate.ApprovalApproved {
		t.Fatalf("AwaitApproval() = %v, %v; want approved", r.state, r.err)
	}
}

// A listener that reconnects may have missed notifications: the wake of
// every wait makes each read its request again.
func TestAwaitApproval_WakeAllAfterReconnect(t *testing.T) {
	f := newWaitFixture(t)
	ap := f.request(t, f.key, "p1")
	_, done := f.start(t, context.Background(), f.key, ap)
	if _, err := f.otherReplica().Approvals.Deny(context.Background(), f.admin, ap.ID); err != nil {
		t.Fatal(err)
	}
	f.svc.WakeApprovalWaits("", "")
	if r := result(t, done); r.state != mcpgate.ApprovalDenied {
		t.Fatalf("AwaitApproval() = %v, %v; want denied", r.state, r.err)
	}
}

// A client that goes away ends the wait: its place is released, and the
// request stays open and usable.
func TestAwaitApproval_ClientGoesAway(t *testing.T) {
	f := newWaitFixture(t)
	ap := f.request(t, f.key, "p1")
	ctx, cancel := context.WithCancel(context.Background())
	_, done := f.start(t, ctx, f.key, ap)
	cancel()
	if r := result(t, done); r.state != mcpgate.ApprovalPending || r.err != nil {
		t.Fatalf("AwaitApproval() = %v, %v; want pending", r.state, r.err)
	}
	f.timers.ended(t, testWait)
	if n := f.svc.ApprovalWaits(); n != 0 {
		t.Fatalf("ApprovalWaits() = %d after the client left, want 0", n)
	}
	if _, err := f.svc.Approvals.Approve(context.Background(), f.admin, ap.ID); err != nil {
		t.Fatalf("Approve() after the client left err = %v", err)
	}
	if err := f.runWithApproval(f.key, "p1", ap.ID); err != nil || f.ended() != 1 {
		t.Fatalf("retry = %v, ended %d", err, f.ended())
	}
}

// A progress function that fails (the stream to the client broke) ends the
// wait the same way.
func TestAwaitApproval_ProgressFails(t *testing.T) {
	f := newWaitFixture(t)
	ap := f.request(t, f.key, "p1")
	st, err := f.svc.Approvals.AwaitApproval(context.Background(), f.key, ap, func(time.Duration, time.Duration) error { return errors.New("gone") })
	if st != mcpgate.ApprovalPending || err != nil {
		t.Fatalf("AwaitApproval() = %v, %v; want pending", st, err)
	}
	if n := f.svc.ApprovalWaits(); n != 0 {
		t.Fatalf("ApprovalWaits() = %d, want 0", n)
	}
}

// Without a wait set the call answers at once; past the bound of waits of
// one person the next one does too, saying why; another person still waits.
func TestAwaitApproval_NoWaitAndBounds(t *testing.T) {
	f := newWaitFixture(t)
	f.setWait(t, f.owner, 0)
	ap := f.request(t, f.key, "p0")
	called := false
	st, err := f.svc.Approvals.AwaitApproval(context.Background(), f.key, ap, func(time.Duration, time.Duration) error { called = true; return nil })
	if st != mcpgate.ApprovalPending || err != nil || called {
		t.Fatalf("AwaitApproval(no wait) = %v, %v, progress %v; want pending at once", st, err, called)
	}
	f.setWait(t, f.owner, int(testWait/time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	var dones []<-chan waitResult
	for i := range 5 {
		_, done := f.start(t, ctx, f.key, f.request(t, f.key, "p"+string(rune('1'+i))))
		dones = append(dones, done)
	}
	st, err = f.svc.Approvals.AwaitApproval(context.Background(), f.key, f.request(t, f.key, "p9"), nil)
	if st != mcpgate.ApprovalPending || mcpgate.ErrorCode(err) != mcpgate.ETooMany || !strings.Contains(mcpgate.ErrorMessage(err), "already waiting") {
		t.Fatalf("AwaitApproval(sixth) = %v, %v; want pending with too many", st, err)
	}
	adminKey := f.keyActor(t, f.admin)
	_, other := f.start(t, ctx, adminKey, f.request(t, adminKey, "q1"))
	cancel()
	for _, done := range append(dones, other) {
		if r := result(t, done); r.state != mcpgate.ApprovalPending {
			t.Errorf("AwaitApproval() = %v, %v after cancel", r.state, r.err)
		}
	}
	if n := f.svc.ApprovalWaits(); n != 0 {
		t.Fatalf("ApprovalWaits() = %d, want 0", n)
	}
}

// Only the call that opened a request waits for it: another key of the same
// person, or someone in another workspace, is told it does not exist.
func TestAwaitApproval_OnlyItsOwnCall(t *testing.T) {
	f := newWaitFixture(t)
	ap := f.request(t, f.key, "p1")
	f.setWait(t, f.outside, 10)
	for name, a := range map[string]*mcpgate.Actor{"another key": f.keyActor(t, f.member), "another workspace": f.keyActor(t, f.outside)} {
		st, err := f.svc.Approvals.AwaitApproval(context.Background(), a, ap, nil)
		if st != mcpgate.ApprovalPending || mcpgate.ErrorCode(err) != mcpgate.ENotFound {
			t.Errorf("%s: AwaitApproval() = %v, %v; want not found", name, st, err)
		}
	}
	if n := f.svc.ApprovalWaits(); n != 0 {
		t.Fatalf("ApprovalWaits() = %d, want 0", n)
	}
}

// The setting: an owner sets it (audited, shown in the workspace); a value
// out of range is refused with nothing changed, even the other fields of
// the same change; an admin cannot change it.
func TestUpdateWorkspace_ApprovalWait(t *testing.T) {
	f := newSvcFixture(t)
	ctx := context.Background()
	n := 20
	ws, err := f.svc.Workspaces.UpdateWorkspace(ctx, f.owner, mcpgate.WorkspaceUpdate{ApprovalWaitSeconds: &n})
	if err != nil || ws.ApprovalWaitSeconds != 20 {
		t.Fatalf("UpdateWorkspace(20) = %+v, %v", ws, err)
	}
	ev := f.audit.Last()
	if ev.Action != string(mcpgate.ActionWorkspaceUpdated) || ev.Arguments["approval_wait_seconds"] != 20 {
		t.Errorf("audit = %+v, want workspace.updated with approval_wait_seconds", ev)
	}
	on := true
	for _, bad := range []int{-1, mcpgate.MaxApprovalWaitSeconds + 1, 3600} {
		_, err := f.svc.Workspaces.UpdateWorkspace(ctx, f.owner, mcpgate.WorkspaceUpdate{ApprovalWaitSeconds: &bad, ApprovalFourEyes: &on})
		if mcpgate.ErrorCode(err) != mcpgate.EInvalid || !strings.Contains(mcpgate.ErrorMessage(err), "approval_wait_seconds must be between 0") {
			t.Errorf("UpdateWorkspace(%d) err = %v, want invalid", bad, err)
		}
	}
	_, a, _ := f.svc.Workspaces.Enter(ctx, &mcpgate.User{ID: f.owner.UserID}, f.ws, mcpgate.SourceAPI)
	if a.ApprovalWaitSeconds != 20 || a.ApprovalFourEyes {
		t.Errorf("workspace after refused changes = %+v, want wait 20 and four eyes off", a)
	}
	if _, err := f.svc.Workspaces.UpdateWorkspace(ctx, f.admin, mcpgate.WorkspaceUpdate{ApprovalWaitSeconds: &n}); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("UpdateWorkspace(admin) err = %v, want forbidden", err)
	}
}
