package storetest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate/internal/store"
)

// AuditFill describes a generated audit log: Rows tool calls (and a few admin
// actions) in one workspace, spread evenly over the Days days before Now.
type AuditFill struct {
	Rows int
	Days int       // default 3
	Now  time.Time // default time.Now()
}

// AuditFixture is what FillAudit built.
type AuditFixture struct {
	WorkspaceID string
	// Busy is an actor with about 5% of the rows; Rare one with 0.1%;
	// DashboardOnly one with 0.1%, every one made in the dashboard.
	Busy, Rare, DashboardOnly string
	// Other is a second workspace with a handful of rows of its own.
	Other string
}

// The generated log's shape, per row number g: 0.1% of the rows are the rare
// actor's, 0.1% the dashboard-only actor's, 0.1% have no actor, the rest are spread over 19 members;
// e2b_kill_sandbox is 0.01% of the calls, e2b_get_sandbox a third, the rest
// e2b_list_sandboxes, and e2b_list_snapshots is never called; 0.01% are admin
// actions; 2% end in error and 0.2% are denied; 20% come from the dashboard.
const fillSQL = `
	INSERT INTO audit_log (workspace_id, actor_id, key_id, kind, action, arguments, outcome, message,
		upstream_status, duration_ms, source, created_at)
	SELECT $1,
		CASE WHEN g % 1000 = 0 THEN $2::uuid WHEN g % 1000 = 500 THEN $10::uuid WHEN g % 1000 = 250 THEN NULL
			ELSE ($3::uuid[])[1 + g % 19] END,
		'k' || (g % 20),
		CASE WHEN g % 10000 = 3 THEN 'admin' ELSE 'tool_call' END,
		CASE WHEN g % 10000 = 3 THEN 'tool.enabled' WHEN g % 10000 = 7 THEN 'e2b_kill_sandbox'
			WHEN g % 3 = 0 THEN 'e2b_get_sandbox' ELSE 'e2b_list_sandboxes' END,
		'{"state":"running","limit":50}'::jsonb,
		CASE WHEN g % 50 = 1 THEN 'error' WHEN g % 500 = 2 THEN 'denied' ELSE 'ok' END,
		CASE WHEN g % 50 = 1 THEN 'E2B answered 502: try again shortly' ELSE '' END,
		CASE WHEN g % 50 = 1 THEN 502 ELSE 200 END,
		(g % 97) * 1.5,
		CASE WHEN (g / 3) % 5 = 0 OR g % 1000 = 500 THEN 'dashboard' ELSE 'mcp' END,
		$4::timestamptz + (g - 1) * ($5::float8 * interval '1 microsecond')
	FROM generate_series($6::bigint, $7::bigint) g`

// FillAudit builds a large audit log quickly, server-side (generate_series),
// and its hourly rollup, then analyzes both, so that plans are those of a
// real log of that size. It is for tests and benchmarks on a fresh database:
// the empty pre-partitioning partition is dropped, so that the rows land in
// day partitions as they do on an installation older than a day.
func FillAudit(ctx context.Context, db *store.DB, f AuditFill) (*AuditFixture, error) {
	ctx = store.WithoutQueryTimeout(ctx) // a bulk load, bounded by ctx alone
	if f.Days <= 0 {
		f.Days = 3
	}
	if f.Now.IsZero() {
		f.Now = time.Now()
	}
	fx := &AuditFixture{}
	actors := make([]string, 19)
	for i := range actors {
		u, err := db.CreateUser(ctx, fmt.Sprintf("member%02d@fill.example.com", i), "x", nil)
		if err != nil {
			return nil, err
		}
		actors[i] = u.ID
		if i == 0 {
			wss, err := db.WorkspacesOfUser(ctx, u.ID)
			if err != nil || len(wss) == 0 {
				return nil, fmt.Errorf("workspace of the first user: %v", err)
			}
			fx.WorkspaceID = wss[0].ID
		}
	}
	rare, err := db.CreateUser(ctx, "rare@fill.example.com", "x", nil)
	if err != nil {
		return nil, err
	}
	dash, err := db.CreateUser(ctx, "dashboard-only@fill.example.com", "x", nil)
	if err != nil {
		return nil, err
	}
	fx.Rare, fx.Busy, fx.DashboardOnly = rare.ID, actors[0], dash.ID
	wss, err := db.WorkspacesOfUser(ctx, rare.ID)
	if err != nil || len(wss) == 0 {
		return nil, fmt.Errorf("workspace of the rare user: %v", err)
	}
	fx.Other = wss[0].ID

	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'audit_log'::regclass AND c.relname LIKE 'audit_log_before_%'`)
	if err != nil {
		return nil, err
	}
	legacy, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for _, name := range legacy {
		var empty bool
		if err := conn.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM `+pgx.Identifier{name}.Sanitize()+`)`).Scan(&empty); err != nil {
			return nil, err
		}
		if empty {
			if _, err := conn.Exec(ctx, `DROP TABLE `+pgx.Identifier{name}.Sanitize()); err != nil {
				return nil, err
			}
		}
	}
	// Each day is filled as a plain table without indexes, then attached as
	// that day's partition: attaching builds the indexes in one sorted pass
	// each, several times faster than maintaining them row by row.
	start := f.Now.Add(-time.Duration(f.Days) * 24 * time.Hour)
	step := float64(time.Duration(f.Days)*24*time.Hour/time.Microsecond) / float64(max(f.Rows, 1))
	_, _ = conn.Exec(ctx, `SET maintenance_work_mem = '256MB'`)
	defer conn.Exec(context.Background(), `RESET maintenance_work_mem`)
	// Foreign-key checks are much of the cost of a bulk insert; the ids are
	// known to exist. Only a superuser may skip them, so a failure to is not
	// an error.
	_, _ = conn.Exec(ctx, `SET session_replication_role = replica`)
	defer conn.Exec(context.Background(), `RESET session_replication_role`)
	for d := start.UTC().Truncate(24 * time.Hour); d.Before(f.Now.AddDate(0, 0, 4)); d = d.AddDate(0, 0, 1) {
		name := "audit_log_p" + d.Format("20060102")
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
			return nil, err
		}
		end := d.AddDate(0, 0, 1)
		if exists && d.Before(f.Now) {
			// Added ahead by the migration of an older template: refill it.
			var empty bool
			t := pgx.Identifier{name}.Sanitize()
			if err := conn.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM `+t+`)`).Scan(&empty); err != nil {
				return nil, err
			}
			if empty {
				if _, err := conn.Exec(ctx, `DROP TABLE `+t); err != nil {
					return nil, err
				}
				exists = false
			}
		}
		if !exists && d.Before(f.Now) {
			t := pgx.Identifier{name}.Sanitize()
			if _, err := conn.Exec(ctx, `CREATE TABLE `+t+` (LIKE audit_log INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`); err != nil {
				return nil, err
			}
			// The row numbers of the day, widened by one each side; the
			// WHERE keeps exactly the day's rows.
			lo := max(1, int(float64(d.Sub(start)/time.Microsecond)/step))
			hi := min(f.Rows, int(float64(end.Sub(start)/time.Microsecond)/step)+2)
			if lo <= hi {
				q := strings.Replace(fillSQL, "INSERT INTO audit_log", "INSERT INTO "+t, 1)
				q = strings.Replace(q, "FROM generate_series($6::bigint, $7::bigint) g",
					"FROM generate_series($6::bigint, $7::bigint) g WHERE $4::timestamptz + (g - 1) * ($5::float8 * interval '1 microsecond') >= $8 AND $4::timestamptz + (g - 1) * ($5::float8 * interval '1 microsecond') < $9", 1)
				if _, err := conn.Exec(ctx, q, fx.WorkspaceID, fx.Rare, actors, start, step, lo, hi, d, end, fx.DashboardOnly); err != nil {
					return nil, fmt.Errorf("fill audit rows of %s: %w", d.Format(time.DateOnly), err)
				}
			}
			if _, err := conn.Exec(ctx, fmt.Sprintf(`ALTER TABLE audit_log ATTACH PARTITION %s FOR VALUES FROM ('%s') TO ('%s')`,
				t, d.Format(time.RFC3339), end.Format(time.RFC3339))); err != nil {
				return nil, fmt.Errorf("attach %s: %w", name, err)
			}
			continue
		}
		if _, err := conn.Exec(ctx, `SELECT audit_log_add_partition($1::date)`, d.Format(time.DateOnly)); err != nil {
			return nil, fmt.Errorf("add partition %s: %w", d.Format(time.DateOnly), err)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workspace_id = $1`, fx.WorkspaceID).Scan(&n); err != nil {
		return nil, err
	}
	if n != f.Rows {
		return nil, fmt.Errorf("filled %d audit rows, want %d (a day partition existed already?)", n, f.Rows)
	}
	if _, err := conn.Exec(ctx, `
		INSERT INTO audit_log (workspace_id, actor_id, kind, action, outcome, source, created_at)
		SELECT $1, $2, 'tool_call', 'e2b_list_sandboxes', 'ok', 'mcp', $3::timestamptz - g * interval '1 minute'
		FROM generate_series(1, 10) g`, fx.Other, fx.Rare, f.Now); err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `
		INSERT INTO audit_hourly (workspace_id, hour, actor_id, source, calls, errors)
		SELECT workspace_id, date_trunc('hour', created_at, 'UTC'), coalesce(actor_id, '00000000-0000-0000-0000-000000000000'),
			source, count(*), count(*) FILTER (WHERE outcome <> 'ok')
		FROM audit_log WHERE kind = 'tool_call' GROUP BY 1, 2, 3, 4`); err != nil {
		return nil, fmt.Errorf("fill audit rollup: %w", err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE audit_log`); err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `ANALYZE audit_hourly`); err != nil {
		return nil, err
	}
	return fx, nil
}
