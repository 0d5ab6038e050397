package store_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// planNode is one node of EXPLAIN (FORMAT JSON).
type planNode struct {
	NodeType     string  `json:"Node Type"`
	RelationName string  `json:"Relation Name"`
	IndexName    string  `json:"Index Name"`
	PlanRows     float64 `json:"Plan Rows"`
	// Filled by EXPLAIN ANALYZE: rows an index scan read and threw away.
	RemovedByFilter  float64    `json:"Rows Removed by Filter"`
	RemovedByRecheck float64    `json:"Rows Removed by Index Recheck"`
	Plans            []planNode `json:"Plans"`
}

func (n planNode) walk(fn func(planNode)) {
	fn(n)
	for _, c := range n.Plans {
		c.walk(fn)
	}
}

// mustExplain returns the plan of q; with analyze, it runs q (without timing)
// so that the plan carries the rows each node read.
func mustExplain(t *testing.T, db *store.DB, q string, args []any, analyze bool) planNode {
	t.Helper()
	var raw []byte
	opts := "FORMAT JSON"
	if analyze {
		opts = "ANALYZE, TIMING OFF, FORMAT JSON"
	}
	if err := db.Pool.QueryRow(context.Background(), "EXPLAIN ("+opts+") "+q, args...).Scan(&raw); err != nil {
		t.Fatalf("EXPLAIN %s: %v", q, err)
	}
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		t.Fatalf("decode plan %s: %v", raw, err)
	}
	return out[0].Plan
}

// The audit views at scale: with a log of 1.2 million rows in one workspace
// (AUDIT_PLAN_ROWS to change it), every query the API and the dashboard run
// reads an index range in the listing's order, or the rollup, never a
// sequential scan of the log and never a sort of every matching row. Plan
// shape and row counts (EXPLAIN ANALYZE without timing), never timings:
// those are the benchmark's (README).
func TestAuditPlans_AtScale(t *testing.T) {
	rows := 1_200_000
	if v := os.Getenv("AUDIT_PLAN_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("AUDIT_PLAN_ROWS=%q: want a number of at least 1000", v)
		}
		rows = n
	}
	db := storetest.Open(t)
	ctx := context.Background()
	start := time.Now()
	fx, err := storetest.FillAudit(ctx, db, storetest.AuditFill{Rows: rows, Days: 3})
	if err != nil {
		t.Fatalf("FillAudit() err = %v", err)
	}
	t.Logf("generated %d audit rows in %v", rows, time.Since(start).Round(time.Millisecond))
	now := time.Now()

	// The cursor of a page deep inside the log, as "Older →" follows it.
	_, next, err := db.ListAudit(ctx, fx.WorkspaceID, mcpgate.AuditFilter{Limit: 200, Since: now.Add(-36 * time.Hour),
		Until: now.Add(-35 * time.Hour)})
	if err != nil || next == "" {
		t.Fatalf("ListAudit() for a cursor = %q, %v", next, err)
	}
	lists := []struct {
		name string
		f    mcpgate.AuditFilter
	}{
		{"first page, admin", mcpgate.AuditFilter{}},
		{"first page, member with 0.1% of the rows", mcpgate.AuditFilter{ActorID: fx.Rare}},
		{"first page, member with 5% of the rows", mcpgate.AuditFilter{ActorID: fx.Busy}},
		{"a page deep in the log", mcpgate.AuditFilter{Cursor: next}},
		{"rarely used tool", mcpgate.AuditFilter{Action: "e2b_kill_sandbox"}},
		{"tool never called", mcpgate.AuditFilter{Action: "e2b_list_snapshots"}},
		{"last hour, tool = kill", mcpgate.AuditFilter{Action: "e2b_kill_sandbox", Since: now.Add(-time.Hour)}},
		{"last 24 hours", mcpgate.AuditFilter{Since: now.Add(-24 * time.Hour)}},
		{"outcome error", mcpgate.AuditFilter{Outcome: "error"}},
		{"outcome denied", mcpgate.AuditFilter{Outcome: "denied"}},
		{"outcome ok", mcpgate.AuditFilter{Outcome: "ok"}},
		{"admin actions", mcpgate.AuditFilter{Kind: "admin"}},
		{"tool calls", mcpgate.AuditFilter{Kind: "tool_call"}},
		{"AI calls (the page's default)", mcpgate.AuditFilter{Source: "mcp"}},
		{"dashboard calls", mcpgate.AuditFilter{Source: "dashboard"}},
		{"member's AI calls (a member's default)", mcpgate.AuditFilter{ActorID: fx.Rare, Source: "mcp"}},
		{"member's dashboard calls", mcpgate.AuditFilter{ActorID: fx.Rare, Source: "dashboard"}},
		{"member with no AI calls, their AI calls", mcpgate.AuditFilter{ActorID: fx.DashboardOnly, Source: "mcp"}},
		// Two filters besides the source read the narrower index and filter
		// on the other: bounded by the member's own rows, not the log's.
		{"member and a rare tool (reads the member's rows)", mcpgate.AuditFilter{ActorID: fx.Rare, Action: "e2b_kill_sandbox"}},
		{"member, last hour", mcpgate.AuditFilter{ActorID: fx.Busy, Since: now.Add(-time.Hour)}},
	}
	for _, tt := range lists {
		t.Run("list/"+tt.name, func(t *testing.T) {
			tt.f.Limit = 50
			q, args, err := store.AuditListQuery(fx.WorkspaceID, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			plan := mustExplain(t, db, q, args, true)
			assertIndexedPlan(t, db, plan, true)
			// Counts, not timings: a page may read and discard a few rows that
			// do not match, not a number that grows with the log.
			removed := 0.0
			plan.walk(func(n planNode) { removed += n.RemovedByFilter + n.RemovedByRecheck })
			if limit := 500.0; removed > limit && !strings.Contains(tt.name, "reads the member's rows") {
				t.Errorf("the page read and discarded %.0f rows", removed)
			}
		})
	}
	exports := []struct {
		name string
		f    mcpgate.AuditFilter
	}{
		{"last hour", mcpgate.AuditFilter{Since: now.Add(-time.Hour)}},
		{"member's rows", mcpgate.AuditFilter{ActorID: fx.Rare}},
		{"one tool", mcpgate.AuditFilter{Action: "e2b_kill_sandbox"}},
	}
	for _, tt := range exports {
		t.Run("export/"+tt.name, func(t *testing.T) {
			q, args, err := store.AuditExportQuery(fx.WorkspaceID, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			// An export returns every matching row: sorting them costs what
			// sending them does, so only the scans are checked.
			assertIndexedPlan(t, db, mustExplain(t, db, q, args, false), false)
		})
	}
	charts := []struct{ name, actor, source string }{
		{"admin", "", ""}, {"member", fx.Rare, ""}, {"admin, AI calls", "", "mcp"}, {"member, AI calls", fx.Rare, "mcp"},
	}
	for _, c := range charts {
		t.Run("24-hour chart/"+c.name, func(t *testing.T) {
			q, args, err := store.AuditHourlyQuery(fx.WorkspaceID, c.actor, c.source, now.Truncate(time.Hour).Add(-23*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			plan := mustExplain(t, db, q, args, false)
			rollup := false
			plan.walk(func(n planNode) {
				if strings.HasPrefix(n.RelationName, "audit_log") {
					t.Errorf("chart reads %s (%s), want only the rollup", n.RelationName, n.NodeType)
				}
				if n.RelationName == "audit_hourly" {
					rollup = true
					if n.NodeType == "Seq Scan" {
						t.Errorf("chart scans the whole rollup")
					}
				}
			})
			if !rollup {
				t.Errorf("chart plan does not read audit_hourly")
			}
		})
	}
}

// assertIndexedPlan fails on a sequential scan of a part of the audit log
// that holds rows (the empty partitions of the coming days cost nothing to
// scan), on a plan that reads the log through no index, and, for a page
// (limited), on a Sort of more than a few thousand rows: the order must come
// from the index, or the filter must be selective enough that sorting what
// matches is cheap.
func assertIndexedPlan(t *testing.T, db *store.DB, plan planNode, limited bool) {
	t.Helper()
	indexed := false
	var shape []string
	plan.walk(func(n planNode) {
		shape = append(shape, strings.TrimSpace(n.NodeType+" "+n.RelationName+" "+n.IndexName))
		switch {
		case n.NodeType == "Seq Scan" && strings.HasPrefix(n.RelationName, "audit_log"):
			var tuples float64
			if err := db.Pool.QueryRow(context.Background(), `SELECT reltuples FROM pg_class WHERE relname = $1`,
				n.RelationName).Scan(&tuples); err != nil {
				t.Fatal(err)
			}
			if tuples > 0 {
				t.Errorf("sequential scan of %s (%.0f rows)", n.RelationName, tuples)
			}
		case limited && (n.NodeType == "Sort" || n.NodeType == "Incremental Sort"):
			for _, c := range n.Plans {
				if c.PlanRows > 10000 {
					t.Errorf("%s of %.0f rows: the index does not give the listing's order", n.NodeType, c.PlanRows)
				}
			}
		case (strings.Contains(n.NodeType, "Index") || n.NodeType == "Bitmap Heap Scan") && strings.HasPrefix(n.RelationName, "audit_log"):
			indexed = true
		}
	})
	if !indexed {
		t.Errorf("no index scan of the audit log")
	}
	if t.Failed() {
		t.Logf("plan: %s", strings.Join(shape, " > "))
	}
}
