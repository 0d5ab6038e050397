package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// The health of upstream servers, per server and shared by every replica
// through the database: a server is down after a failed discovery or probe,
// or after FailuresToDown consecutive calls or relays of one replica that
// failed on the hop (the server not reached, the hop's policy refusing it,
// an HTTP 5xx, a timeout). A tool's error result or a JSON-RPC error answer
// came from the server, which is up. The count is kept in memory per
// replica; the transition is written once, with the reason, and sends the
// invalidation that rebuilds every replica's tool sets.

// The defaults of UpstreamHealthOptions.
const (
	DefaultFailuresToDown = 3
	DefaultProbeEvery     = 30 * time.Second
)

// UpstreamHealthOptions configure the health of upstream servers.
type UpstreamHealthOptions struct {
	DB     *store.DB
	Logger *slog.Logger
	Now    func() time.Time
	// FailuresToDown consecutive failed calls mark a server down
	// (default 3).
	FailuresToDown int
	// ProbeEvery is how often a server that is down is probed (default
	// 30 s): the monitor's interval, named in the calls' errors.
	ProbeEvery time.Duration
}

// UpstreamHealth counts each server's consecutive failed calls on this
// replica and writes the server down when they reach the threshold.
type UpstreamHealth struct {
	db         *store.DB
	log        *slog.Logger
	now        func() time.Time
	threshold  int
	probeEvery time.Duration

	mu       sync.Mutex
	failures map[healthKey]int
}

type healthKey struct{ workspaceID, server string }

// NewUpstreamHealth returns the health tracker of this replica.
func NewUpstreamHealth(o UpstreamHealthOptions) *UpstreamHealth {
	if o.FailuresToDown <= 0 {
		o.FailuresToDown = DefaultFailuresToDown
	}
	if o.ProbeEvery <= 0 {
		o.ProbeEvery = DefaultProbeEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &UpstreamHealth{db: o.DB, log: o.Logger, now: o.Now, threshold: o.FailuresToDown, probeEvery: o.ProbeEvery,
		failures: map[healthKey]int{}}
}

// ProbeEvery is how often a server that is down is probed.
func (h *UpstreamHealth) ProbeEvery() time.Duration {
	if h == nil {
		return DefaultProbeEvery
	}
	return h.probeEvery
}

// Outcome records how one call or relay to a server went (err nil: it
// answered) and reports whether it marked the server down, for the caller
// to drop this replica's tool sets at once (the store notifies the others).
// callerGone says the caller's own context ended: that says nothing of
// the server.
func (h *UpstreamHealth) Outcome(ctx context.Context, workspaceID, server string, err error, callerGone bool) bool {
	if h == nil || callerGone {
		return false
	}
	k := healthKey{workspaceID, server}
	reason, failed := hopFailure(err)
	h.mu.Lock()
	if !failed {
		delete(h.failures, k)
		h.mu.Unlock()
		return false
	}
	h.failures[k]++
	n := h.failures[k]
	if n >= h.threshold {
		delete(h.failures, k) // counted again from none after this mark
	}
	h.mu.Unlock()
	if n < h.threshold {
		return false
	}
	reason = fmt.Sprintf("%d calls in a row failed: %s", n, reason)
	return h.markDown(context.WithoutCancel(ctx), workspaceID, server, reason)
}

// markDown writes a server down since now for reason; only the transition
// from up reports true.
func (h *UpstreamHealth) markDown(ctx context.Context, workspaceID, server, reason string) bool {
	now := h.now().UTC()
	wentDown, err := h.db.MarkServerDown(ctx, workspaceID, server, cutText(reason, maxMessage), now, now.Add(h.probeEvery))
	if err != nil {
		h.log.WarnContext(ctx, "record server health", "server", server, "workspace_id", workspaceID, "err", err)
		return false
	}
	if wentDown {
		h.log.InfoContext(ctx, "upstream server down", "server", server, "workspace_id", workspaceID, "reason", reason)
	}
	return wentDown
}

// hopFailure reports whether err is a failure on the hop that says the
// server is not there (and its safe message): the pool's messages hold no
// credential value (its redactor replaced them), and the detail kept for
// logs is left out.
func hopFailure(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	var rpc *upstream.RPCError
	if errors.As(err, &rpc) {
		return "", false // the server answered
	}
	var hop *upstream.Error
	if errors.As(err, &hop) {
		switch {
		case hop.Status >= 500:
			return fmt.Sprintf("the server answered HTTP %d", hop.Status), true
		case hop.Kind == upstream.KindUnreachable, hop.Kind == upstream.KindRefused, hop.Kind == upstream.KindTimeout,
			hop.Kind == upstream.KindTLS:
			return hop.Message, true
		}
		return "", false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "the server did not answer in time", true
	}
	return "", false
}

// errServerDown is the tool error of a call to a server that is down.
func errServerDown(server string, since time.Time, reason string, retry time.Duration) error {
	return mcpgate.Errorf(mcpgate.EUnavailable, "server %s is unreachable since %s: %s; the gateway retries every %s",
		server, since.UTC().Format(time.RFC3339), reason, retryText(retry))
}

func retryText(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", int(d/time.Second))
	}
	return d.String()
}

// answered forgets the failures counted against a server that answered a
// probe or a discovery.
func (h *UpstreamHealth) answered(workspaceID, server string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.failures, healthKey{workspaceID, server})
}
