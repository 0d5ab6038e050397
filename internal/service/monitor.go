package service

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// The monitor is one background loop per replica that keeps the upstream
// servers' health and catalogs current without anyone pressing discover:
// a server that is down is probed (a discovery, bounded like one) every
// ProbeEvery (30 s), and one that is up is discovered again every
// RediscoverEvery (15 min, jittered). Each check is claimed by one replica
// in the statement that finds it due (store.ClaimServerChecks), so two
// replicas never check one server at once. A server's own notice that its
// tools changed schedules its re-discovery after the notices settle.

// The defaults of MonitorOptions.
const (
	DefaultMonitorEvery = 5 * time.Second
	DefaultSettle       = 2 * time.Second
	DefaultSettleMax    = 10 * time.Second
	defaultMonitorBatch = 4
)

// MonitorTimer is a timer the monitor settles a server's notices with;
// *time.Timer is one.
type MonitorTimer interface {
	Reset(time.Duration) bool
	Stop() bool
}

// MonitorOptions configure the monitor.
type MonitorOptions struct {
	Servers *Servers
	Logger  *slog.Logger
	// Every is how often the monitor looks for the checks due (default
	// 5 s); Batch bounds the checks one look claims (default 4).
	Every time.Duration
	Batch int
	// A server's notice of a change schedules its re-discovery Settle
	// after the last notice (default 2 s), at most SettleMax after the
	// first (default 10 s): a burst is one discovery.
	Settle, SettleMax time.Duration
	// AfterFunc makes the settle timers (default time.AfterFunc; tests
	// fire their own).
	AfterFunc func(time.Duration, func()) MonitorTimer
}

// Monitor checks the upstream servers of every workspace.
type Monitor struct {
	s                *Servers
	log              *slog.Logger
	every            time.Duration
	batch            int
	settle, settleMx time.Duration
	afterFunc        func(time.Duration, func()) MonitorTimer

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	pending map[string]*pendingCheck
}

// pendingCheck is a re-discovery waiting for a server's notices to settle:
// of one server of a workspace, or of the servers a session's target is.
type pendingCheck struct {
	first             time.Time
	fired             bool // under Monitor.mu
	timer             MonitorTimer
	workspaceID, name string
	target            *upstream.Target
}

// NewMonitor returns the monitor; Run runs it.
func NewMonitor(o MonitorOptions) *Monitor {
	if o.Every <= 0 {
		o.Every = DefaultMonitorEvery
	}
	if o.Batch <= 0 {
		o.Batch = defaultMonitorBatch
	}
	if o.Settle <= 0 {
		o.Settle = DefaultSettle
	}
	if o.SettleMax < o.Settle {
		o.SettleMax = max(DefaultSettleMax, o.Settle)
	}
	if o.AfterFunc == nil {
		o.AfterFunc = func(d time.Duration, f func()) MonitorTimer { return time.AfterFunc(d, f) }
	}
	if o.Logger == nil {
		o.Logger = o.Servers.log
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Monitor{s: o.Servers, log: o.Logger, every: o.Every, batch: o.Batch, settle: o.Settle, settleMx: o.SettleMax,
		afterFunc: o.AfterFunc, ctx: ctx, cancel: cancel, pending: map[string]*pendingCheck{}}
}

// Run looks for the checks due every Every until ctx ends, then stops the
// settle timers and waits for the checks under way.
func (m *Monitor) Run(ctx context.Context) {
	stop := context.AfterFunc(ctx, m.cancel)
	defer stop()
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		m.CheckDue(m.ctx)
		select {
		case <-m.ctx.Done():
			m.Stop()
			return
		case <-t.C:
		}
	}
}

// Stop cancels the settle timers and waits for the checks they started
// (Run stops so when its context ends).
func (m *Monitor) Stop() {
	m.mu.Lock()
	m.cancel() // under mu: no timer starts a check after this
	for k, p := range m.pending {
		p.timer.Stop()
		delete(m.pending, k)
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// CheckDue claims the checks due now (up to Batch) and runs them, at once
// and each bounded like a discovery, returning how many it claimed.
func (m *Monitor) CheckDue(ctx context.Context) int {
	checks, err := m.s.db.ClaimServerChecks(ctx, m.s.now().UTC(), m.s.checks, m.batch)
	if err != nil {
		if ctx.Err() == nil {
			m.log.WarnContext(ctx, "server monitor: claim the checks due", "err", err)
		}
		return 0
	}
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Go(func() { m.s.check(ctx, c) })
	}
	wg.Wait()
	return len(checks)
}

// Rediscover schedules a re-discovery of one server of a workspace once
// the requests for it settle.
func (m *Monitor) Rediscover(workspaceID, server string) {
	m.schedule("server|"+workspaceID+"|"+server, func() *pendingCheck {
		return &pendingCheck{workspaceID: workspaceID, name: server}
	})
}

// ToolListChanged is the pool's report that the upstream at target said
// its tools changed: the servers it is (the one whose URL and credential
// the session carries, in its own workspace) are re-discovered once the
// notices settle. A server that sends notices without end is discovered
// at most once per SettleMax.
func (m *Monitor) ToolListChanged(target upstream.Target) {
	m.schedule("target|"+upstream.Fingerprint(target), func() *pendingCheck {
		t := target
		return &pendingCheck{target: &t}
	})
}

// schedule starts, or moves, the settle timer of key: Settle after now,
// never later than SettleMax after the first request.
func (m *Monitor) schedule(key string, newCheck func() *pendingCheck) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil {
		return
	}
	now := time.Now()
	if p := m.pending[key]; p != nil {
		p.timer.Reset(max(0, min(m.settle, p.first.Add(m.settleMx).Sub(now))))
		return
	}
	p := newCheck()
	p.first = now
	m.pending[key] = p
	p.timer = m.afterFunc(m.settle, func() { m.fire(key, p) })
}

// fire runs a settled re-discovery, once however often its timer fired:
// the check is claimed like the periodic ones, so that a replica that
// checked the server a moment ago (or is checking it) is not followed by
// another.
func (m *Monitor) fire(key string, p *pendingCheck) {
	m.mu.Lock()
	if p.fired || m.ctx.Err() != nil {
		m.mu.Unlock()
		return
	}
	p.fired = true
	if m.pending[key] == p {
		delete(m.pending, key)
	}
	m.wg.Add(1)
	m.mu.Unlock()
	defer m.wg.Done()
	ctx := m.ctx
	servers := []store.ServerTarget{{WorkspaceID: p.workspaceID, Name: p.name}}
	if p.target != nil {
		servers = m.serversOf(ctx, *p.target)
	}
	for _, srv := range servers {
		c, err := m.s.db.ClaimServerCheck(ctx, srv.WorkspaceID, srv.Name, m.s.now().UTC(), m.settleMx, m.s.checks)
		if err != nil {
			if ctx.Err() == nil {
				m.log.WarnContext(ctx, "server monitor: claim a check", "server", srv.Name, "workspace_id", srv.WorkspaceID, "err", err)
			}
			continue
		}
		if c != nil {
			m.s.check(ctx, *c)
		}
	}
}

// serversOf are the enabled servers whose URL and credential are target's.
func (m *Monitor) serversOf(ctx context.Context, target upstream.Target) []store.ServerTarget {
	found, err := m.s.db.FindServerTargetsByURL(ctx, target.URL)
	if err != nil {
		m.log.WarnContext(ctx, "server monitor: find the server of a notice", "err", err)
		return nil
	}
	var out []store.ServerTarget
	for _, f := range found {
		h, err := f.Headers.Open(ctx, m.s.keyring, f.WorkspaceID)
		if err == nil && sameHeaders(h, target.Headers) {
			out = append(out, f)
		}
	}
	return out
}

func sameHeaders(a, b map[string]mcpgate.Secret) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w.Reveal() != v.Reveal() {
			return false
		}
	}
	return true
}
