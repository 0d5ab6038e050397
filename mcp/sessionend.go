package mcp

// Ended client sessions. A session id is sealed, not stored, so a DELETE
// cannot remove it; instead the replica that took the DELETE remembers
// the id's random part until the id would have expired anyway, and tells
// the other replicas (SessionEnds, a notification), which remember it
// too: a later request with the id is answered 404, as the spec says of
// a terminated session. Each replica told acknowledges it (it remembers
// the id first), and the DELETE is answered once every live replica has
// (Options.Replicas counts them) or after sessionEndWait: so a request
// the client sends after its DELETE's answer, to whichever replica, is
// answered 404. No request reads the database for it.
//
// Ending a session is the client's housekeeping, not a revocation (the
// credential still admits it, and it initializes again), so a replica
// that missed the notification (it started since, or its listener was
// away) is let to accept the id: at worst a client that ended its session
// may go on using it there.

import (
	"context"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
)

// SessionEnds tells every replica that a client ended a session of a
// workspace (id: the session id's random part); each calls
// Gateway.ClientSessionEnded.
// A replica told acknowledges it (AckSessionEnded, naming itself), which
// every replica hears (Gateway.SessionEndAcked).
type SessionEnds interface {
	NotifySessionEnded(ctx context.Context, workspaceID, id string) error
	AckSessionEnded(ctx context.Context, workspaceID, id, replica string) error
}

// sessionEndWait bounds how long a DELETE waits for the replicas'
// acknowledgements: a replica counted live that died without a word (it
// drops out of the count a few seconds later) or whose listener is away
// delays a DELETE by it, and no more.
const sessionEndWait = 2 * time.Second

// maxEndedSessions bounds what a replica remembers: past it, a DELETE
// still ends the upstream sessions and is answered 204, but its id is
// not remembered (the client is let to go on with it; see above).
const maxEndedSessions = 100_000

// endedSessions are the ended ids this replica knows, until they expire.
type endedSessions struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (e *endedSessions) add(id string, expires, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]time.Time{}
	}
	if len(e.m) >= maxEndedSessions {
		for k, exp := range e.m {
			if !exp.After(now) {
				delete(e.m, k)
			}
		}
		if len(e.m) >= maxEndedSessions {
			return
		}
	}
	e.m[id] = expires
}

func (e *endedSessions) has(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.m[id]
	return ok
}

// endAcks are the DELETEs waiting on this replica for the replicas'
// acknowledgements, by session id.
type endAcks struct {
	mu sync.Mutex
	m  map[string]*endAck
}

type endAck struct {
	want    int
	from    map[string]bool
	reached chan struct{} // closed when want replicas acknowledged
}

func (e *endAcks) add(id string, want int) *endAck {
	w := &endAck{want: want, from: map[string]bool{}, reached: make(chan struct{})}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]*endAck{}
	}
	e.m[id] = w
	return w
}

func (e *endAcks) remove(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, id)
}

func (e *endAcks) ack(id, replica string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.m[id]
	if w == nil || w.from[replica] {
		return
	}
	if w.from[replica] = true; len(w.from) == w.want {
		close(w.reached)
	}
}

// endSession remembers an ended session here, tells the other replicas
// and waits, at most sessionEndWait, until every live replica (this one
// too, which hears its own notification) has acknowledged it.
func (g *Gateway) endSession(ctx context.Context, a *mcpgate.Actor, s streamSession) {
	g.ended.add(s.id, s.expires, g.now())
	if g.opts.SessionEnds == nil {
		return
	}
	want := 1
	if g.opts.Replicas != nil {
		want = max(g.opts.Replicas(), 1)
	}
	acks := g.endAcks.add(s.id, want)
	defer g.endAcks.remove(s.id)
	if err := g.opts.SessionEnds.NotifySessionEnded(ctx, a.WorkspaceID, s.id); err != nil {
		g.log.WarnContext(ctx, "tell the replicas a client session ended", "workspace_id", a.WorkspaceID, "err", err)
		return
	}
	timer := time.NewTimer(sessionEndWait)
	defer timer.Stop()
	select {
	case <-acks.reached:
	case <-timer.C:
		g.log.InfoContext(ctx, "not every replica acknowledged a client session's end in time",
			"workspace_id", a.WorkspaceID, "replicas", want)
	case <-ctx.Done():
	}
}

// ClientSessionEnded tells this replica that a client ended a session
// (store.InvalidateSessionEnd), on another replica or on this one; it is
// remembered for the longest an id lives, since the id's own expiry is
// not in the notification, and then acknowledged.
func (g *Gateway) ClientSessionEnded(workspaceID, id string) {
	if id == "" {
		return
	}
	g.ended.add(id, g.now().Add(clientSessionTTL), g.now())
	if g.opts.SessionEnds == nil {
		return
	}
	// Not on the listener's goroutine, which delivers every notification.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), sessionEndWait)
		defer cancel()
		if err := g.opts.SessionEnds.AckSessionEnded(ctx, workspaceID, id, g.opts.ReplicaID); err != nil {
			g.log.Warn("acknowledge a client session's end", "workspace_id", workspaceID, "err", err)
		}
	}()
}

// SessionEndAcked tells this replica that replica acknowledged the end of
// session id (store.InvalidateSessionEndAck).
func (g *Gateway) SessionEndAcked(workspaceID, id, replica string) { g.endAcks.ack(id, replica) }
