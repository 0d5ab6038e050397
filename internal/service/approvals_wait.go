package service

import (
	"context"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
)

// Waiting for a person's decision. A call that needs a human approval may
// hold open (the workspace's approval_wait_seconds) until a person decides
// in the dashboard, on any replica. The wait holds no database connection
// (the pool is small, and a connection per waiting call would let one tenant
// exhaust it): only a place in this replica's list of waits, woken by the
// decision's notification (store.InvalidateApproval, heard by the listener
// every replica runs) or, on the deciding replica, by the decision itself.
// The row is read when the wait begins, when it is woken, and once when it
// ends (a notification lost while the listener reconnected is not missed).

// The bounds of waiting calls on one replica: per person in a workspace, and
// per workspace. A wait costs a connection to the client and a goroutine,
// nothing in the database, so the bounds only keep one tenant (or one
// looping agent) from holding a replica's connections; a call past them gets
// the link answer at once.
const (
	maxWaitsPerUser      = 5
	maxWaitsPerWorkspace = 20
)

// approvalProgressEvery is how often a waiting call tells its client it is
// still waiting, well inside the idle timeouts of proxies and clients.
const approvalProgressEvery = 5 * time.Second

// WaitTimer makes one timer of an approval wait: a channel that receives
// once d has passed, and a function that stops it. Tests pass one whose
// channels they fire themselves (Options.WaitTimer).
type WaitTimer func(d time.Duration) (<-chan time.Time, func() bool)

func realWaitTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// approvalWaits are this replica's waiting calls. The zero value is ready.
type approvalWaits struct {
	mu      sync.Mutex
	waiting map[*approvalWaiter]struct{}
	perWS   map[string]int
	perUser map[[2]string]int // workspace, user
}

// approvalWaiter is one waiting call; wake holds at most one pending
// signal (a second wake before the read adds nothing).
type approvalWaiter struct {
	ws, user, approval string
	wake               chan struct{}
}

// reserve takes a place for a wait, or reports that the bounds are reached.
func (w *approvalWaits) reserve(ws, user, approval string) (*approvalWaiter, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiting == nil {
		w.waiting, w.perWS, w.perUser = map[*approvalWaiter]struct{}{}, map[string]int{}, map[[2]string]int{}
	}
	if w.perWS[ws] >= maxWaitsPerWorkspace || w.perUser[[2]string{ws, user}] >= maxWaitsPerUser {
		return nil, false
	}
	wt := &approvalWaiter{ws: ws, user: user, approval: approval, wake: make(chan struct{}, 1)}
	w.waiting[wt] = struct{}{}
	w.perWS[ws]++
	w.perUser[[2]string{ws, user}]++
	return wt, true
}

func (w *approvalWaits) release(wt *approvalWaiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiting, wt)
	if w.perWS[wt.ws]--; w.perWS[wt.ws] <= 0 {
		delete(w.perWS, wt.ws)
	}
	key := [2]string{wt.ws, wt.user}
	if w.perUser[key]--; w.perUser[key] <= 0 {
		delete(w.perUser, key)
	}
}

// wake wakes the waits for one approval of a workspace, or every wait when
// id is "".
func (w *approvalWaits) wake(ws, id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wt := range w.waiting {
		if id == "" || wt.ws == ws && wt.approval == id {
			select {
			case wt.wake <- struct{}{}:
			default:
			}
		}
	}
}

func (w *approvalWaits) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waiting)
}

// WakeApprovalWaits tells this replica's waiting calls that an approval
// request of a workspace was decided (the listener's InvalidateApproval),
// or, with id "", that notifications may have been missed (the listener
// reconnected): each re-reads its request.
func (s *Set) WakeApprovalWaits(workspaceID, id string) { s.waits.wake(workspaceID, id) }

// ApprovalWaits counts the calls waiting for a decision on this replica.
func (s *Set) ApprovalWaits() int { return s.waits.count() }

// AwaitApproval implements mcpgate.ApprovalWaiter.
func (s *Approvals) AwaitApproval(ctx context.Context, a *mcpgate.Actor, ap *mcpgate.ApprovalRequest,
	progress func(waited, wait time.Duration) error) (mcpgate.ApprovalState, error) {
	seconds, err := s.db.ApprovalWait(ctx, a.WorkspaceID)
	if err != nil {
		return mcpgate.ApprovalPending, mcpgate.WrapError(mcpgate.EUnavailable, err,
			"the gateway could not read this workspace's approval wait, so it did not wait for the decision")
	}
	if seconds <= 0 {
		return mcpgate.ApprovalPending, nil
	}
	wait := time.Duration(min(seconds, mcpgate.MaxApprovalWaitSeconds)) * time.Second
	timer := s.opts.WaitTimer
	if timer == nil {
		timer = realWaitTimer
	}
	// Deferred in this order, the place is released before the timers
	// stop: a wait whose timers stopped holds nothing.
	end, stopEnd := timer(wait)
	defer stopEnd()
	wt, ok := s.waits.reserve(a.WorkspaceID, a.UserID, ap.ID)
	if !ok {
		return mcpgate.ApprovalPending, mcpgate.Errorf(mcpgate.ETooMany, "The gateway did not wait for the decision: "+
			"%d calls of this workspace (or %d of yours) are already waiting for one.", maxWaitsPerWorkspace, maxWaitsPerUser)
	}
	defer s.waits.release(wt)
	// Read after the place is taken: a decision made before is in the
	// row, one made after wakes the wait.
	st, err := s.waitedState(ctx, a, ap.ID)
	if err != nil || st != mcpgate.ApprovalPending {
		return st, err
	}
	return s.waitForDecision(ctx, a, wt, end, timer, wait, progress)
}

// waitForDecision is the wait itself: until the request is decided, the
// wait is over, ctx ends or progress fails.
func (s *Approvals) waitForDecision(ctx context.Context, a *mcpgate.Actor, wt *approvalWaiter, end <-chan time.Time, timer WaitTimer,
	wait time.Duration, progress func(waited, wait time.Duration) error) (mcpgate.ApprovalState, error) {
	if progress == nil {
		progress = func(time.Duration, time.Duration) error { return nil }
	}
	if progress(0, wait) != nil {
		return mcpgate.ApprovalPending, nil
	}
	tick, stopTick := timer(approvalProgressEvery)
	defer func() { stopTick() }()
	var waited time.Duration
	for {
		select {
		case <-ctx.Done():
			return mcpgate.ApprovalPending, nil
		case <-wt.wake:
			if st, err := s.waitedState(ctx, a, wt.approval); err == nil && st != mcpgate.ApprovalPending {
				return st, nil
			}
		case <-end:
			// The one read at the end: a decision whose notification was
			// lost is still seen.
			st, _ := s.waitedState(ctx, a, wt.approval)
			return st, nil
		case <-tick:
			waited += approvalProgressEvery
			tick, stopTick = timer(approvalProgressEvery)
			if progress(min(waited, wait), wait) != nil {
				return mcpgate.ApprovalPending, nil
			}
		}
	}
}

// waitedState reads the state of the request a wait is for. Only the call
// that opened it waits for it: another workspace's, key's, app's or
// person's is not found.
func (s *Approvals) waitedState(ctx context.Context, a *mcpgate.Actor, id string) (mcpgate.ApprovalState, error) {
	ap, _, err := s.db.FindApproval(ctx, a.WorkspaceID, id)
	if err == nil && (ap.RequestedBy != a.UserID || ap.KeyID != a.KeyID || ap.GrantID != a.GrantID) {
		err = mcpgate.Errorf(mcpgate.ENotFound, "no such approval request in this workspace")
	}
	if err != nil {
		if mcpgate.ErrorCode(err) != mcpgate.ENotFound {
			err = mcpgate.WrapError(mcpgate.EUnavailable, err, "the gateway could not read the approval request, so it did not wait for the decision")
		}
		return mcpgate.ApprovalPending, err
	}
	return ap.EffectiveState(s.now()), nil
}

// checkApprovalWait refuses a wait out of range before anything changes.
func checkApprovalWait(seconds *int) error {
	if seconds != nil && (*seconds < 0 || *seconds > mcpgate.MaxApprovalWaitSeconds) {
		return mcpgate.Errorf(mcpgate.EInvalid, "approval_wait_seconds must be between 0 (answer at once with the approval link) and %d",
			mcpgate.MaxApprovalWaitSeconds)
	}
	return nil
}

// setApprovalWait stores the workspace's approval wait for UpdateWorkspace
// and audits the change.
func (s *Service) setApprovalWait(ctx context.Context, a *mcpgate.Actor, seconds int) error {
	if err := s.db.SetApprovalWait(ctx, a.WorkspaceID, seconds); err != nil {
		return err
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionWorkspaceUpdated, map[string]any{"approval_wait_seconds": seconds}))
	return nil
}
