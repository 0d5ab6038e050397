package store

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpgate/mcpgate"
)

// Options size and bound the pool. The zero value is what the gateway runs
// with by default.
type Options struct {
	// MaxConns is the pool's size (DATABASE_MAX_CONNS); 0 takes
	// pool_max_conns from the URL when it is there, else DefaultMaxConns.
	MaxConns int32
	// QueryTimeout bounds every statement and every wait for a pool
	// connection whose context has no earlier deadline (0:
	// DefaultQueryTimeout). Long reads opt out with WithoutQueryTimeout.
	QueryTimeout time.Duration
}

// DefaultQueryTimeout is how long one statement, or one wait for a
// connection, may take. The gateway's statements take milliseconds; a
// database that does not answer in this time is treated as away (the
// callers' outage rules then apply) rather than waited on, however it fails:
// refusing, or hanging with every byte held (a partition, a stopped host).
const DefaultQueryTimeout = 5 * time.Second

// connectTimeout bounds dialling and the start-up handshake of a new
// connection when the URL sets no connect_timeout.
const connectTimeout = 5 * time.Second

// tcpUserTimeout is how long sent bytes may stay unacknowledged before the
// kernel drops the connection (the TCP_USER_TIMEOUT socket option), and
// keepAlive the TCP keep-alive probe period: a peer that vanished without a
// FIN or RST is noticed in seconds rather than the kernel's 15 minutes.
const (
	tcpUserTimeout = 10 * time.Second
	keepAlive      = 5 * time.Second
)

// DefaultMaxConns sizes the pool from the machine: four connections per CPU
// the Go runtime uses, at least 16 and at most 64. The gateway's statements
// are short, but a connection is also held for the length of a mutating
// E2B call (the sandbox's advisory lock) and for the length of a long read
// (an audit export, capped by LongReadSlots), so a pool as small as the CPU
// count would queue tool calls behind network waits. The cap keeps a few
// replicas within PostgreSQL's default max_connections of 100; an operator
// with more replicas or a bigger server sets DATABASE_MAX_CONNS.
func DefaultMaxConns() int32 {
	return int32(min(64, max(16, 4*runtime.GOMAXPROCS(0))))
}

// MinMaxConns is the smallest pool the gateway runs with: one connection
// for long reads and three for the hot path.
const MinMaxConns = 4

// longReadSlots is how many pool connections long reads may hold at once:
// a quarter of the pool, at least one. The rest stays with the hot path
// (keys, policies, credentials, audit writes, logins), so that no number
// of exports, from any number of tenants, can take the connections other
// tenants' calls need.
func longReadSlots(maxConns int32) int { return max(1, int(maxConns)/4) }

// configure applies o to cfg: the pool's size, the connect timeout, TCP
// keep-alive and user timeout, and the tracer that puts a deadline on every
// statement and connection wait.
func (db *DB) configure(cfg *pgxpool.Config, dsn string, o Options) {
	switch {
	case o.MaxConns > 0:
		cfg.MaxConns = o.MaxConns
	case strings.Contains(dsn, "pool_max_conns"):
		cfg.MaxConns = max(cfg.MaxConns, MinMaxConns)
	default:
		cfg.MaxConns = DefaultMaxConns()
	}
	cc := cfg.ConnConfig
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = connectTimeout
	}
	dialer := &net.Dialer{Timeout: cc.ConnectTimeout, KeepAliveConfig: net.KeepAliveConfig{Enable: true,
		Idle: keepAlive, Interval: keepAlive, Count: 3}, Control: setTCPUserTimeout(tcpUserTimeout)}
	// The server's own tcp_user_timeout is not sent as a start-up
	// parameter: PgBouncer refuses unknown ones, and PostgreSQL before 12
	// does not know it. It protects the server from dead clients, which is
	// the server's concern (DATABASE_URL can set it with
	// options=-ctcp_user_timeout=10000).
	cc.DialFunc = dialer.DialContext
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = DefaultQueryTimeout
	}
	db.queryTimeout.Store(int64(o.QueryTimeout))
	cc.Tracer = &deadlineTracer{db: db}
	db.longReads = make(chan struct{}, longReadSlots(cfg.MaxConns))
}

// SetQueryTimeout changes the query timeout. A stop sets a short one: what
// is left to write then (last-use times, the audit queue) must not wait on
// a database that hangs for longer than the spool takes to write.
func (db *DB) SetQueryTimeout(d time.Duration) { db.queryTimeout.Store(int64(d)) }

// MaxConns is the pool's size.
func (db *DB) MaxConns() int32 { return db.Pool.Config().MaxConns }

type noQueryTimeoutKey struct{}

// WithoutQueryTimeout marks ctx as a long read's or a job's (an export, a
// migration): its statements are bounded by ctx alone, not by the query
// timeout. Such work must hold a long-read slot (AcquireLongRead) or run
// outside the request path.
func WithoutQueryTimeout(ctx context.Context) context.Context {
	return context.WithValue(ctx, noQueryTimeoutKey{}, true)
}

// deadlineTracer bounds every statement, batch, copy and wait for a pool
// connection by the query timeout, unless the context carries an earlier
// deadline or opted out. While the database is marked down (the listener's
// health ping failed), a wait for a connection fails at once: the callers'
// outage rules then answer from their caches, or refuse, without waiting.
// pgx uses the context a Trace*Start returns for the operation itself, and
// calls the matching Trace*End when it is over, where the deadline's timer
// is released.
type deadlineTracer struct{ db *DB }

type cancelKey struct{}

func (t *deadlineTracer) bound(ctx context.Context) context.Context {
	if ctx.Value(noQueryTimeoutKey{}) != nil {
		return ctx
	}
	d := time.Now().Add(time.Duration(t.db.queryTimeout.Load()))
	if dl, ok := ctx.Deadline(); ok && dl.Before(d) {
		return ctx
	}
	ctx, cancel := context.WithDeadline(ctx, d)
	return context.WithValue(ctx, cancelKey{}, cancel)
}

func release(ctx context.Context) {
	if cancel, ok := ctx.Value(cancelKey{}).(context.CancelFunc); ok {
		cancel()
	}
}

func (t *deadlineTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return t.bound(ctx)
}

func (t *deadlineTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	release(ctx)
}

func (t *deadlineTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return t.bound(ctx)
}

func (t *deadlineTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (t *deadlineTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	release(ctx)
}

func (t *deadlineTracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return t.bound(ctx)
}

func (t *deadlineTracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromEndData) {
	release(ctx)
}

func (t *deadlineTracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	// The listener, which decides down and up, has a connection of its own.
	if t.db.down.Load() {
		// An expired context: Acquire returns context.DeadlineExceeded
		// at once, which mapError calls EUnavailable.
		ctx, cancel := context.WithDeadline(ctx, time.Now())
		return context.WithValue(ctx, cancelKey{}, cancel)
	}
	return t.bound(ctx)
}

func (t *deadlineTracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	release(ctx)
}

// Down reports whether the database is marked unreachable: the listener's
// health ping or reconnection timed out, and it has not connected since.
func (db *DB) Down() bool { return db.down.Load() }

// AcquireLongRead takes one of the pool's long-read slots (a quarter of
// the pool) for work that holds a connection for long, such as an export,
// without waiting: when every slot is taken it answers ETooMany with a
// Retry-After. The returned func gives the slot back.
func (db *DB) AcquireLongRead() (release func(), err error) {
	select {
	case db.longReads <- struct{}{}:
		var once atomic.Bool
		return func() {
			if once.CompareAndSwap(false, true) {
				<-db.longReads
			}
		}, nil
	default:
		return nil, &mcpgate.Error{Code: mcpgate.ETooMany, RetryAfter: longReadRetry,
			Message: "too many exports are running on this gateway; try again in a minute"}
	}
}

// LongReadSlots is how many long reads may run at once.
func (db *DB) LongReadSlots() int { return cap(db.longReads) }

// longReadRetry is the Retry-After of a refused long read, in seconds.
const longReadRetry = 30
