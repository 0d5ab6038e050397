package replicas

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// Store keeps the heartbeat rows (internal/store implements it).
type Store interface {
	// HeartbeatReplica records that id serves and returns how many
	// replicas were seen within ttl, itself included.
	HeartbeatReplica(ctx context.Context, id string, ttl time.Duration) (int, error)
	// LiveReplicas returns how many replicas were seen within ttl.
	LiveReplicas(ctx context.Context, ttl time.Duration) (int, error)
	// LeaveReplica removes id.
	LeaveReplica(ctx context.Context, id string) error
}

// Options configure a Membership.
type Options struct {
	Store  Store
	Logger *slog.Logger
	// Every is the time between heartbeats (default 5 s).
	Every time.Duration
	// TTL is how long a replica counts after its last heartbeat (default
	// three heartbeats, so one late write does not drop it).
	TTL time.Duration
}

// Membership is this replica's place among the replicas.
type Membership struct {
	opts    Options
	id      string
	count   atomic.Int64
	refresh chan struct{}
	healthy bool
}

// New returns a membership that counts one replica (itself) until Run's
// first heartbeat.
func New(o Options) *Membership {
	o.Every = cmp.Or(o.Every, 5*time.Second)
	o.TTL = cmp.Or(o.TTL, 3*o.Every)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	m := &Membership{opts: o, id: newID(), refresh: make(chan struct{}, 1), healthy: true}
	m.count.Store(1)
	return m
}

// ID is this replica's id in the heartbeat table.
func (m *Membership) ID() string { return m.id }

// Count returns how many replicas serve, at least 1.
func (m *Membership) Count() int { return int(max(m.count.Load(), 1)) }

// Refresh asks Run to count again now (another replica joined or left). It
// never blocks.
func (m *Membership) Refresh() {
	select {
	case m.refresh <- struct{}{}:
	default:
	}
}

// queryTimeout bounds each heartbeat and count: a database that hangs must
// not stop the loop, whose count then stands.
const queryTimeout = 3 * time.Second

// Run writes heartbeats until ctx ends, then removes this replica's row so
// that the others count again at once.
func (m *Membership) Run(ctx context.Context) {
	m.beat(ctx)
	t := time.NewTicker(m.opts.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queryTimeout)
			defer cancel()
			if err := m.opts.Store.LeaveReplica(leaveCtx, m.id); err != nil {
				m.opts.Logger.Warn("replica leave not recorded; the others count it until its heartbeat is stale",
					"err", err, "ttl", m.opts.TTL)
			}
			return
		case <-t.C:
			m.beat(ctx)
		case <-m.refresh:
			m.recount(ctx)
		}
	}
}

func (m *Membership) beat(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	n, err := m.opts.Store.HeartbeatReplica(qctx, m.id, m.opts.TTL)
	m.set(ctx, n, err)
}

func (m *Membership) recount(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	n, err := m.opts.Store.LiveReplicas(qctx, m.opts.TTL)
	m.set(ctx, n, err)
}

// set takes a count, or keeps the last one through an error (logged once
// per failure spell).
func (m *Membership) set(ctx context.Context, n int, err error) {
	if err != nil {
		if m.healthy && ctx.Err() == nil {
			m.opts.Logger.Warn("replica count not updated; keeping the last one", "err", err, "replicas", m.Count())
		}
		m.healthy = false
		return
	}
	m.healthy = true
	if old := m.count.Swap(int64(n)); old != int64(n) {
		m.opts.Logger.Info("replicas serving", "replicas", n, "was", old)
	}
}

// newID returns a random UUID (version 4).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
