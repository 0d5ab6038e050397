package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// auditWriterStats is the audit writer's throughput: rows recorded by
// concurrent callers as fast as they can, until the last one is stored.
type auditWriterStats struct {
	Rows       int     `json:"rows"`
	Seconds    float64 `json:"seconds"`
	RowsPerSec float64 `json:"rows_per_sec"`
	// MaxQueue is the longest the queue grew (of QueueCap); Saturated counts
	// the samples in which the writer reported itself saturated, when the
	// gateway refuses tool calls.
	MaxQueue  int `json:"max_queue"`
	QueueCap  int `json:"queue_cap"`
	Saturated int `json:"saturated_samples"`
	// Paced is the same writer offered OfferedRate events/s for 5 s: on a
	// healthy database its queue must stay far from saturation.
	OfferedRate     float64 `json:"offered_rate"`
	PacedMaxQueue   int     `json:"paced_max_queue"`
	PacedSaturated  int     `json:"paced_saturated_samples"`
	PacedRowsPerSec float64 `json:"paced_rows_per_sec"`
}

// measureAuditWriter records rows events through the same audit.Writer and
// store the gateway uses, on the benchmark's database (already migrated),
// and times until every one is written (Close drains the queue).
func measureAuditWriter(ctx context.Context, dsn string, rows int, rate float64) (auditWriterStats, error) {
	st := auditWriterStats{Rows: rows, QueueCap: 10000, OfferedRate: rate}
	db, err := openMigrated(ctx, dsn)
	if err != nil {
		return st, err
	}
	defer db.Close()
	// A few workspaces and actors, as the rollup sees them in production.
	type who struct{ ws, user string }
	var whos []who
	for i := range 8 {
		u, err := db.CreateUser(ctx, fmt.Sprintf("writer%d-%s@bench.example.com", i, randomHex(4)), "x", nil)
		if err != nil {
			return st, err
		}
		wss, err := db.WorkspacesOfUser(ctx, u.ID)
		if err != nil || len(wss) == 0 {
			return st, fmt.Errorf("workspace of bench user: %v", err)
		}
		whos = append(whos, who{wss[0].ID, u.ID})
	}
	event := func(i int) mcpgate.AuditEvent {
		who := whos[i%len(whos)]
		outcome := mcpgate.OutcomeOK
		if i%50 == 0 {
			outcome = mcpgate.OutcomeError
		}
		return mcpgate.AuditEvent{WorkspaceID: who.ws, ActorID: who.user, KeyID: "bench", Kind: "tool_call",
			Action: "e2b_list_sandboxes", Arguments: map[string]any{"state": "running", "limit": 50},
			Outcome: outcome, Source: "mcp", DurationMS: 12.5}
	}
	// run records events with record, sampling the queue, and returns the
	// time until every one is stored, the queue's peak and the saturated
	// samples.
	run := func(record func(w *audit.Writer)) (time.Duration, int, int, error) {
		w := audit.New(audit.Options{Sink: db, QueueSize: st.QueueCap})
		var maxQ, sat int
		stopSampling := sampleEvery(5*time.Millisecond, func() {
			maxQ = max(maxQ, w.Len())
			if w.Saturated() {
				sat++
			}
		})
		start := time.Now()
		record(w)
		closeCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		err := w.Close(closeCtx)
		elapsed := time.Since(start)
		stopSampling()
		if err != nil {
			return elapsed, 0, 0, fmt.Errorf("audit writer did not drain: %w", err)
		}
		return elapsed, maxQ, sat, nil
	}
	const callers = 16
	elapsed, maxQ, sat, err := run(func(w *audit.Writer) {
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				for i := c; i < rows; i += callers {
					w.Record(ctx, event(i))
				}
			})
		}
		wg.Wait()
	})
	if err != nil {
		return st, err
	}
	st.Seconds, st.MaxQueue, st.Saturated = elapsed.Seconds(), maxQ, sat
	st.RowsPerSec = float64(rows) / st.Seconds
	paced := 0
	if rate > 0 {
		const window = 5 * time.Second
		elapsed, maxQ, sat, err := run(func(w *audit.Writer) {
			// Ticks of 10 ms, each recording the events due by then.
			start := time.Now()
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for now := range t.C {
				due := int(now.Sub(start).Seconds() * rate)
				for ; paced < due; paced++ {
					w.Record(ctx, event(paced))
				}
				if now.Sub(start) >= window {
					return
				}
			}
		})
		if err != nil {
			return st, err
		}
		st.PacedMaxQueue, st.PacedSaturated = maxQ, sat
		st.PacedRowsPerSec = float64(paced) / elapsed.Seconds()
	}
	var stored int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE key_id = 'bench'`).Scan(&stored); err != nil {
		return st, err
	}
	if stored != rows+paced {
		return st, fmt.Errorf("audit writer stored %d of %d rows", stored, rows+paced)
	}
	return st, nil
}

func printAuditWriter(w io.Writer, st *auditWriterStats) {
	if st == nil {
		return
	}
	fmt.Fprintf(w, "\naudit writer, flooded: %d rows from 16 callers as fast as they go, all stored in %.2f s: %.0f rows/s "+
		"(COPY batches of up to 500 plus the hourly rollup, one transaction each, 2 in flight); queue peak %d of %d\n",
		st.Rows, st.Seconds, st.RowsPerSec, st.MaxQueue, st.QueueCap)
	if st.OfferedRate > 0 {
		fmt.Fprintf(w, "audit writer, paced: %.0f events/s offered for 5 s: queue peak %d of %d, saturated in %d samples of 5 ms\n",
			st.OfferedRate, st.PacedMaxQueue, st.QueueCap, st.PacedSaturated)
	}
}

// auditView is one query the API or the dashboard makes of the audit log.
type auditView struct {
	name string
	run  func(ctx context.Context, db *store.DB, fx *storetest.AuditFixture, now time.Time) error
}

func listView(name string, f func(fx *storetest.AuditFixture, now time.Time) mcpgate.AuditFilter) auditView {
	return auditView{name, func(ctx context.Context, db *store.DB, fx *storetest.AuditFixture, now time.Time) error {
		ff := f(fx, now)
		ff.Limit = 50
		_, _, err := db.ListAudit(ctx, fx.WorkspaceID, ff)
		return err
	}}
}

// auditViews are the measurements (first page, member, rare tool,
// tool never called, last hour of one tool, the 24-hour charts) and the
// other filters the API offers.
var auditViews = []auditView{
	listView("first page, admin", func(*storetest.AuditFixture, time.Time) mcpgate.AuditFilter { return mcpgate.AuditFilter{} }),
	listView("first page, member with 0.1% of rows", func(fx *storetest.AuditFixture, _ time.Time) mcpgate.AuditFilter {
		return mcpgate.AuditFilter{ActorID: fx.Rare}
	}),
	listView("rarely used tool (kill)", func(*storetest.AuditFixture, time.Time) mcpgate.AuditFilter {
		return mcpgate.AuditFilter{Action: "e2b_kill_sandbox"}
	}),
	listView("tool never called", func(*storetest.AuditFixture, time.Time) mcpgate.AuditFilter {
		return mcpgate.AuditFilter{Action: "e2b_list_snapshots"}
	}),
	listView("last hour, tool = kill", func(_ *storetest.AuditFixture, now time.Time) mcpgate.AuditFilter {
		return mcpgate.AuditFilter{Action: "e2b_kill_sandbox", Since: now.Add(-time.Hour)}
	}),
	listView("outcome = error", func(*storetest.AuditFixture, time.Time) mcpgate.AuditFilter {
		return mcpgate.AuditFilter{Outcome: "error"}
	}),
	listView("admin actions", func(*storetest.AuditFixture, time.Time) mcpgate.AuditFilter {
		return mcpgate.AuditFilter{Kind: "admin"}
	}),
	listView("AI calls (page default)", func(*storetest.AuditFixture, time.Time) mcpgate.AuditFilter {
		return mcpgate.AuditFilter{Source: "mcp"}
	}),
	listView("member's AI calls", func(fx *storetest.AuditFixture, _ time.Time) mcpgate.AuditFilter {
		return mcpgate.AuditFilter{ActorID: fx.Rare, Source: "mcp"}
	}),
	listView("AI calls of a dashboard-only member", func(fx *storetest.AuditFixture, _ time.Time) mcpgate.AuditFilter {
		return mcpgate.AuditFilter{ActorID: fx.DashboardOnly, Source: "mcp"}
	}),
	{"24-hour chart, admin", func(ctx context.Context, db *store.DB, fx *storetest.AuditFixture, now time.Time) error {
		_, err := db.AuditHourly(ctx, fx.WorkspaceID, "", now.Truncate(time.Hour).Add(-23*time.Hour))
		return err
	}},
	{"24-hour chart, member", func(ctx context.Context, db *store.DB, fx *storetest.AuditFixture, now time.Time) error {
		_, err := db.AuditHourly(ctx, fx.WorkspaceID, fx.Rare, now.Truncate(time.Hour).Add(-23*time.Hour))
		return err
	}},
	{"export, member's rows (all)", func(ctx context.Context, db *store.DB, fx *storetest.AuditFixture, now time.Time) error {
		return db.StreamAudit(ctx, fx.WorkspaceID, mcpgate.AuditFilter{ActorID: fx.Rare, Since: now.Add(-24 * time.Hour)},
			func(*mcpgate.AuditEvent) error { return nil })
	}},
}

// auditScale is the audit views' timings on a log of one size.
type auditScale struct {
	Rows        int                `json:"rows"`
	Days        int                `json:"days"`
	FillSeconds float64            `json:"fill_seconds"`
	SizeGB      float64            `json:"size_gb"`
	MedianMS    map[string]float64 `json:"median_ms"`
}

// measureAuditScale builds a log of n rows in a fresh database and times
// each view: the median of 7 runs after one warm-up.
func measureAuditScale(ctx context.Context, admin string, n int, logf func(string, ...any)) (auditScale, error) {
	// About 5 million rows a day (58 calls/s, a busy instance), and at least
	// three days, so that the views cross partitions.
	res := auditScale{Rows: n, Days: min(max(3, n/5_000_000), 60), MedianMS: map[string]float64{}}
	dsn, drop, err := freshDatabase(ctx, admin)
	if err != nil {
		return res, err
	}
	defer drop()
	db, err := openMigrated(ctx, dsn)
	if err != nil {
		return res, err
	}
	defer db.Close()
	logf("audit scale: generating %d rows over %d days", n, res.Days)
	start := time.Now()
	fx, err := storetest.FillAudit(ctx, db, storetest.AuditFill{Rows: n, Days: res.Days})
	if err != nil {
		return res, err
	}
	res.FillSeconds = time.Since(start).Seconds()
	var bytes int64
	if err := db.Pool.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits
		WHERE inhparent = 'audit_log'::regclass`).Scan(&bytes); err != nil {
		return res, err
	}
	res.SizeGB = float64(bytes) / (1 << 30)
	now := time.Now()
	for _, v := range auditViews {
		var ms []float64
		for i := range 8 {
			t0 := time.Now()
			if err := v.run(ctx, db, fx, now); err != nil {
				return res, fmt.Errorf("%s: %w", v.name, err)
			}
			if i > 0 {
				ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
			}
		}
		slices.Sort(ms)
		res.MedianMS[v.name] = ms[len(ms)/2]
	}
	return res, nil
}

func printAuditScale(w io.Writer, scales []auditScale) {
	if len(scales) == 0 {
		return
	}
	fmt.Fprintf(w, "\naudit views (median ms of 7 runs, through the store as the API calls it, one workspace holding every row)\n")
	fmt.Fprintf(w, "%-38s", "rows")
	for _, s := range scales {
		fmt.Fprintf(w, " %12s", humanCount(s.Rows))
	}
	fmt.Fprintln(w)
	for _, v := range auditViews {
		fmt.Fprintf(w, "%-38s", v.name)
		for _, s := range scales {
			fmt.Fprintf(w, " %12.2f", s.MedianMS[v.name])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%-38s", "(generated in s / size GB / days)")
	for _, s := range scales {
		fmt.Fprintf(w, " %12s", fmt.Sprintf("%.0f/%.1f/%d", s.FillSeconds, s.SizeGB, s.Days))
	}
	fmt.Fprintln(w)
}

func humanCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// parseCounts reads "1000000,10M,100M".
func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		switch {
		case strings.HasSuffix(f, "M"):
			mult, f = 1_000_000, strings.TrimSuffix(f, "M")
		case strings.HasSuffix(f, "k"):
			mult, f = 1000, strings.TrimSuffix(f, "k")
		}
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 1 || n*mult > 1_000_000_000 {
			return nil, fmt.Errorf("%q is not a row count such as 1M", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// openMigrated opens the store on dsn with every migration applied.
func openMigrated(ctx context.Context, dsn string) (*store.DB, error) {
	db, err := store.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if _, err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}
