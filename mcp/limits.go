package mcp

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/limiter"
)

// limitShared takes a token from the limits shared beyond one credential:
// per person (all of their keys and grants together: twenty keys must not
// mean twenty times the rate) and per workspace (all of its people). Like
// the per-key limit it counts tool calls only (limitCall), and a refusal is
// a tool error with retry_after, which every MCP client shows.
func (g *Gateway) limitShared(a *mcpgate.Actor) error {
	now := g.now()
	for _, l := range []struct {
		set   *limiter.Buckets
		name  string
		limit string
		msg   string
	}{
		{g.userLimits, a.UserID, "person", "your keys together are sending too many tool calls; slow down"},
		{g.workspaceLimits, a.WorkspaceID, "workspace", "this workspace is sending too many tool calls; slow down"},
	} {
		if l.name == "" {
			continue
		}
		if ok, wait := l.set.Allow(l.name, now); !ok {
			g.refuse(a, l.limit, now)
			return retryAfter(mcpgate.Errorf(mcpgate.ETooMany, "%s", l.msg), wait)
		}
	}
	return nil
}

// refuse counts a call a rate limit refused: in the metrics, and in the
// credential's aggregate audit entry.
func (g *Gateway) refuse(a *mcpgate.Actor, limit string, now time.Time) {
	g.metrics.RateLimited()
	g.refused.add(a, limit, now, g.audit)
}

// refusalPeriod is how long refusals of one credential and limit are
// gathered into one audit entry: a flood of refused calls costs one row a
// minute, and an admin sees it within a minute.
const refusalPeriod = time.Minute

// refusals gathers the tool calls the rate limits refuse, which never reach
// the audited path, into one audit entry per credential, limit and period
// (kind "refused": "key X was refused N calls between T1 and T2"), never a
// row per refused call. An entry is written when its period ends, and every
// open one when the gateway closes.
type refusals struct {
	mu     sync.Mutex
	open   map[refusalKey]*refusalWindow
	period time.Duration // refusalPeriod unless a test sets it
}

type refusalKey struct{ credential, limit string }

type refusalWindow struct {
	event       mcpgate.AuditEvent // who, and where, from the first refused call
	first, last time.Time
	count       int
	audit       Auditor
	timer       *time.Timer
}

// add counts one refused call of a, opening the credential's window (and
// its timer) with the first.
func (r *refusals) add(a *mcpgate.Actor, limit string, now time.Time, audit Auditor) {
	if a == nil {
		return
	}
	k := refusalKey{a.CredentialID(), limit}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.open == nil {
		r.open = map[refusalKey]*refusalWindow{}
	}
	w := r.open[k]
	if w == nil {
		w = &refusalWindow{first: now, audit: audit, event: mcpgate.AuditEvent{WorkspaceID: a.WorkspaceID, ActorID: a.UserID,
			KeyID: a.KeyID, GrantID: a.GrantID, ClientName: a.ClientName, Source: a.Source}}
		period := r.period
		if period <= 0 {
			period = refusalPeriod
		}
		w.timer = time.AfterFunc(period, func() { r.flush(k) })
		r.open[k] = w
	}
	w.count++
	w.last = now
}

// flush writes the window of k, if it is still open.
func (r *refusals) flush(k refusalKey) {
	r.mu.Lock()
	w := r.open[k]
	delete(r.open, k)
	r.mu.Unlock()
	if w != nil {
		w.write(k.limit)
	}
}

// flushAll writes every open window now (the gateway is closing).
func (r *refusals) flushAll() {
	r.mu.Lock()
	open := r.open
	r.open = nil
	r.mu.Unlock()
	for k, w := range open {
		w.timer.Stop()
		w.write(k.limit)
	}
}

// refusedBy names each limit as the message says it.
var refusedBy = map[string]string{"key": "the per-key rate limit", "person": "the per-person rate limit (all of one person's keys)",
	"workspace": "the workspace's rate limit"}

func (w *refusalWindow) write(limit string) {
	ev := w.event
	ev.Kind, ev.Action, ev.Outcome, ev.CreatedAt = mcpgate.KindRefused, "rate_limit", mcpgate.OutcomeDenied, w.last
	ev.Message = fmt.Sprintf("%d tool calls refused by %s between %s and %s", w.count, refusedBy[limit],
		w.first.UTC().Format(time.RFC3339), w.last.UTC().Format(time.RFC3339))
	ev.Arguments = map[string]any{"limit": limit, "refused_calls": w.count,
		"first": w.first.UTC().Format(time.RFC3339Nano), "last": w.last.UTC().Format(time.RFC3339Nano)}
	// A background write: the calls it counts were answered long ago.
	w.audit.Record(context.Background(), ev)
}
