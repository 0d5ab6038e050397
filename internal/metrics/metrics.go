package metrics

import (
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpgate/mcpgate"
)

// Options configure a Registry. Every func is optional and is called at
// scrape time only, never on the call path.
type Options struct {
	// Version is the build's version, reported in mcpgate_build_info.
	Version string
	// AuditQueue returns the number of audit events waiting to be written
	// (audit.Writer.Len).
	AuditQueue func() int
	// DBStats returns the database pool's statistics (pgxpool.Pool.Stat).
	DBStats func() *pgxpool.Stat
	// SpoolBytes returns the size of the audit spool file (0 when there is
	// none): non-zero only between a stop during an outage and the replay.
	SpoolBytes func() int64
	// AuditSpool returns the audit writer's exact counts
	// (audit.Writer.SpoolStats).
	AuditSpool func() AuditSpool
	// Listening reports whether the cross-replica invalidation listener is
	// connected (while it is not, every call reloads from the database).
	Listening func() bool
	// Replicas returns how many replicas this one counts as serving (each
	// enforces its share of the rate limits).
	Replicas func() int
}

// Registry holds the gateway's metrics. It is safe for concurrent use, and
// its recording methods do not allocate for tools and outcomes already seen.
type Registry struct {
	reg *prometheus.Registry

	toolCalls   *prometheus.CounterVec
	gatewayTime *prometheus.HistogramVec
	upstream    *prometheus.HistogramVec
	upErrors    *prometheus.CounterVec
	authFails   *prometheus.CounterVec
	rateLimited prometheus.Counter

	// byTool caches the per-tool children, so a call costs no label hashing
	// and no allocation.
	mu     sync.RWMutex
	byTool map[toolOutcome]*toolChildren
}

type toolOutcome struct {
	tool    string
	outcome mcpgate.Outcome
}

type toolChildren struct {
	calls    prometheus.Counter
	gateway  prometheus.Observer
	upstream prometheus.Observer
}

// gatewayBuckets resolve the gateway's own cost per call, which should stay
// well under a millisecond: 25 µs to 1 s.
var gatewayBuckets = []float64{0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}

// upstreamBuckets cover E2B's latency: 1 ms to 60 s (sandbox creation and
// idle detection are the slow ones).
var upstreamBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// New returns a registry with every collector registered.
func New(opts Options) *Registry {
	m := &Registry{reg: prometheus.NewRegistry(), byTool: map[toolOutcome]*toolChildren{}}
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgate_tool_calls_total",
		Help: "Tool calls by tool and outcome (ok, error, denied, confirmation_required, cancelled).",
	}, []string{"tool", "outcome"})
	m.gatewayTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcpgate_tool_call_gateway_seconds",
		Help:    "Time a tool call spent in the gateway itself (policy, credential, audit, encoding), excluding the upstream call.",
		Buckets: gatewayBuckets,
	}, []string{"tool"})
	m.upstream = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcpgate_tool_call_upstream_seconds",
		Help:    "Time a tool call spent waiting for the upstream API (E2B).",
		Buckets: upstreamBuckets,
	}, []string{"tool"})
	m.upErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgate_upstream_errors_total",
		Help: "Upstream (E2B) responses with an error status, by HTTP status.",
	}, []string{"status"})
	m.authFails = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgate_auth_failures_total",
		Help: "MCP requests refused for their key, by reason (missing, malformed, unknown, revoked, expired).",
	}, []string{"reason"})
	m.rateLimited = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mcpgate_rate_limited_total",
		Help: "MCP requests refused with 429 by the per-key or per-address limits.",
	})
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "mcpgate_build_info",
		Help:        "Build information; the value is always 1.",
		ConstLabels: prometheus.Labels{"version": orDev(opts.Version), "goversion": runtime.Version()},
	})
	buildInfo.Set(1)
	m.reg.MustRegister(m.toolCalls, m.gatewayTime, m.upstream, m.upErrors, m.authFails, m.rateLimited, buildInfo,
		// go_gc_gogc_percent and go_gc_gomemlimit_bytes report the GC
		// settings; go_memstats_* and process_* show whether memory is flat.
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if opts.AuditQueue != nil {
		m.reg.MustRegister(gauge("mcpgate_audit_queue_depth", "Audit events waiting to be written to the database.",
			func() float64 { return float64(opts.AuditQueue()) }))
	}
	if opts.DBStats != nil {
		m.reg.MustRegister(&poolCollector{stat: opts.DBStats})
	}
	if opts.SpoolBytes != nil {
		m.reg.MustRegister(gauge("mcpgate_audit_spool_bytes",
			"Bytes of audit events in the local spool, waiting for the next start to be written.",
			func() float64 { return float64(opts.SpoolBytes()) }))
	}
	if opts.AuditSpool != nil {
		m.registerAuditSpool(opts.AuditSpool)
	}
	if opts.Listening != nil {
		m.reg.MustRegister(gauge("mcpgate_invalidation_listener_connected",
			"1 while the cross-replica invalidation listener is connected, 0 while it reconnects.",
			func() float64 {
				if opts.Listening() {
					return 1
				}
				return 0
			}))
	}
	if opts.Replicas != nil {
		m.reg.MustRegister(gauge("mcpgate_replicas",
			"Replicas this one counts as serving; each enforces that share of every rate limit.",
			func() float64 { return float64(opts.Replicas()) }))
	}
	// Pre-create the series of the label values known up front, so that
	// dashboards and alerts see zeros rather than absent series.
	m.rateLimited.Add(0)
	for _, r := range []string{"missing", "malformed", "unknown", "revoked", "expired"} {
		m.authFails.WithLabelValues(r)
	}
	return m
}

// CountApprovalWaits publishes n, the calls this replica holds open for a
// person's decision (service.Set.ApprovalWaits), as mcpgate_approval_waits.
// It is a method, called once by the wiring, because the services that
// count the waits are built after the metrics they are given; nothing reads
// n before this call. A second call panics (a duplicate series).
func (m *Registry) CountApprovalWaits(n func() int) {
	m.reg.MustRegister(gauge("mcpgate_approval_waits",
		"Calls this replica holds open for a person's approval decision (approval_wait_seconds).",
		func() float64 { return float64(n()) }))
}

// CountHeldCalls publishes n, the tool calls this replica runs held for
// 2026-07-28 callers, in flight or waiting for the retry that answers
// their upstream's request (mcp.Gateway.HeldCalls), as mcpgate_held_calls. Called once by the
// wiring, as CountApprovalWaits.
func (m *Registry) CountHeldCalls(n func() int) {
	m.reg.MustRegister(gauge("mcpgate_held_calls",
		"Tool calls this replica runs held (2026-07-28 callers' calls of a server's tools), in flight or waiting for the caller's retry.",
		func() float64 { return float64(n()) }))
}

// AuditSpool are the audit spool's counts.
type AuditSpool struct {
	// Events wait in the spool to be written to the database.
	Events int
	// Spooled and Lost are every event this process put in the spool, and
	// every one it could neither write nor spool.
	Spooled, Lost int64
	// Full: the spool's last append did not fit (a full disk or its bound).
	Full bool
	// FreeBytes is the space left on the spool's disk (-1: unknown).
	FreeBytes int64
}

func (m *Registry) registerAuditSpool(read func() AuditSpool) {
	m.reg.MustRegister(
		gauge("mcpgate_audit_spool_events", "Audit events in the local spool, waiting to be written to the database.",
			func() float64 { return float64(read().Events) }),
		gauge("mcpgate_audit_spool_full", "1 while the audit spool refuses events: its last append did not fit "+
			"(the disk under DATA_DIR is full, or the spool's bound is reached).",
			func() float64 {
				if read().Full {
					return 1
				}
				return 0
			}),
		gauge("mcpgate_audit_spool_free_bytes", "Space left on the disk under DATA_DIR that holds the audit spool "+
			"(-1 when unknown); near 0, a stop during a database outage can spool little and loses the rest.",
			func() float64 { return float64(read().FreeBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcpgate_audit_spooled_total",
			Help: "Audit events this process wrote to the local spool (during outages and at shutdown)."},
			func() float64 { return float64(read().Spooled) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcpgate_audit_lost_total",
			Help: "Audit events this process could neither write to the database nor spool."},
			func() float64 { return float64(read().Lost) }))
}

// gauge is a gauge read from value at each scrape.
func gauge(name, help string, value func() float64) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, value)
}

func orDev(v string) string {
	if v == "" {
		return "dev"
	}
	return v
}

// Handler serves the metrics in the Prometheus exposition format.
func (m *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Gatherer exposes the registry, for tests and for adding collectors.
func (m *Registry) Gatherer() prometheus.Gatherer { return m.reg }

func (m *Registry) children(tool string, outcome mcpgate.Outcome) *toolChildren {
	k := toolOutcome{tool, outcome}
	m.mu.RLock()
	c := m.byTool[k]
	m.mu.RUnlock()
	if c != nil {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.byTool[k]; c != nil {
		return c
	}
	c = &toolChildren{calls: m.toolCalls.WithLabelValues(tool, string(outcome)),
		gateway: m.gatewayTime.WithLabelValues(tool), upstream: m.upstream.WithLabelValues(tool)}
	m.byTool[k] = c
	return c
}

// ToolCall records one tool call: its outcome, the time spent in the gateway
// and the time spent waiting for the upstream. A call that never reached the
// upstream (refused, invalid arguments) has upstream == 0 and is not
// observed in the upstream histogram.
func (m *Registry) ToolCall(tool string, outcome mcpgate.Outcome, gateway, upstream time.Duration) {
	c := m.children(tool, outcome)
	c.calls.Inc()
	if gateway > 0 {
		c.gateway.Observe(gateway.Seconds())
	}
	if upstream > 0 {
		c.upstream.Observe(upstream.Seconds())
	}
}

// UpstreamError records an upstream response with an error status.
func (m *Registry) UpstreamError(status int) {
	m.upErrors.WithLabelValues(statusLabel(status)).Inc()
}

// statusLabel keeps the status label bounded: real HTTP statuses as they are,
// anything else (0 for a network error, nonsense) as "other".
func statusLabel(status int) string {
	if status >= 100 && status <= 599 {
		return strconv.Itoa(status)
	}
	return "other"
}

// AuthFailure records a refused MCP key.
func (m *Registry) AuthFailure(reason string) {
	m.authFails.WithLabelValues(reason).Inc()
}

// RateLimited records a call refused by a rate limit.
func (m *Registry) RateLimited() { m.rateLimited.Inc() }

// poolCollector reports pgxpool statistics at scrape time.
type poolCollector struct {
	stat func() *pgxpool.Stat
}

var (
	poolAcquired = prometheus.NewDesc("mcpgate_db_pool_acquired_connections", "Connections in use.", nil, nil)
	poolIdle     = prometheus.NewDesc("mcpgate_db_pool_idle_connections", "Idle connections.", nil, nil)
	poolTotal    = prometheus.NewDesc("mcpgate_db_pool_total_connections", "Open connections (acquired, idle and being set up).", nil, nil)
	poolMax      = prometheus.NewDesc("mcpgate_db_pool_max_connections", "The pool's size limit.", nil, nil)
	poolAcquires = prometheus.NewDesc("mcpgate_db_pool_acquires_total", "Successful connection acquisitions.", nil, nil)
	poolEmpty    = prometheus.NewDesc("mcpgate_db_pool_empty_acquires_total", "Acquisitions that had to wait because the pool was empty.", nil, nil)
	poolCanceled = prometheus.NewDesc("mcpgate_db_pool_canceled_acquires_total", "Acquisitions canceled by their context.", nil, nil)
	poolWait     = prometheus.NewDesc("mcpgate_db_pool_acquire_wait_seconds_total", "Time spent acquiring connections.", nil, nil)
)

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolAcquired, poolIdle, poolTotal, poolMax, poolAcquires, poolEmpty, poolCanceled, poolWait} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	if s == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(poolAcquired, prometheus.GaugeValue, float64(s.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(poolIdle, prometheus.GaugeValue, float64(s.IdleConns()))
	ch <- prometheus.MustNewConstMetric(poolTotal, prometheus.GaugeValue, float64(s.TotalConns()))
	ch <- prometheus.MustNewConstMetric(poolMax, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(poolAcquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolEmpty, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolCanceled, prometheus.CounterValue, float64(s.CanceledAcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolWait, prometheus.CounterValue, s.AcquireDuration().Seconds())
}
