package mcp

// Ended client sessions. A session id is sealed, not stored, so a DELETE
// cannot remove it; instead the replica that took the DELETE remembers
// the id's random part until the id would have expired anyway, and tells
// the other replicas (SessionEnds, a notification), which remember it
// too: a later request with the id is answered 404, as the spec says of
// a terminated session. Ending a session is the client's housekeeping,
// not a revocation (the credential still admits it, and it initializes
// again), so a replica that missed the notification (it started since,
// or its listener was away) is let to accept the id: at worst a client
// that ended its session may go on using it there.

import (
	"context"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
)

// SessionEnds tells every replica that a client ended a session of a
// workspace (id: the session id's random part); each calls
// Gateway.ClientSessionEnded.
type SessionEnds interface {
	NotifySessionEnded(ctx context.Context, workspaceID, id string) error
}

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

// endSession remembers an ended session here and tells the other replicas.
func (g *Gateway) endSession(ctx context.Context, a *mcpgate.Actor, s streamSession) {
	g.ended.add(s.id, s.expires, g.now())
	if g.opts.SessionEnds == nil {
		return
	}
	if err := g.opts.SessionEnds.NotifySessionEnded(ctx, a.WorkspaceID, s.id); err != nil {
		g.log.WarnContext(ctx, "tell the replicas a client session ended", "workspace_id", a.WorkspaceID, "err", err)
	}
}

// ClientSessionEnded tells this replica that a client ended a session on
// another (store.InvalidateSessionEnd); it is remembered for the longest
// an id lives, since the id's own expiry is not in the notification.
func (g *Gateway) ClientSessionEnded(workspaceID, id string) {
	if id != "" {
		g.ended.add(id, g.now().Add(clientSessionTTL), g.now())
	}
}
