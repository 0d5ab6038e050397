package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcpgate/mcpgate"
)

// nilUUID stands for "no actor" in audit_hourly, whose key cannot hold NULL.
const nilUUID = "00000000-0000-0000-0000-000000000000"

// InsertAudit writes a batch of audit events and adds them to the hourly
// rollup, in one transaction: a batch is stored whole or not at all.
//
// An event is stored once: one whose EventID (with its time, the partition
// key) is already stored is skipped, and only the rows inserted count in the
// rollup. So a batch written again (the spool replayed after a crash, or a
// retry after a commit whose answer was lost) adds nothing.
//
// Two failures are repaired here rather than retried for ever by the writer:
// a row for a day that has no partition yet (the partition is added, then the
// batch written again), and a row whose workspace or user was deleted while
// it waited in the queue (its workspace's log is gone with the workspace, so
// the row is dropped; a deleted user's row is kept without the actor, as ON
// DELETE SET NULL would have left it).
func (db *DB) InsertAudit(ctx context.Context, events []mcpgate.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	for i := range events {
		if events[i].CreatedAt.IsZero() {
			events[i].CreatedAt = time.Now()
		}
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = db.insertAudit(ctx, events)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			break
		}
		switch pgErr.Code {
		case "23514": // no partition of relation "audit_log" found for row
			if perr := db.addAuditPartitions(ctx, events); perr != nil {
				return mapError(perr, "")
			}
			continue
		case "23503": // a foreign key names a workspace or user that is gone
			events, err = db.dropOrphanEvents(ctx, events)
			if err != nil {
				return mapError(err, "")
			}
			if len(events) == 0 {
				return nil
			}
			continue
		}
		break
	}
	return mapError(err, "")
}

// auditRows are a batch's columns, one array each, for unnest: the insert
// is one statement whatever the batch's size.
type auditRows struct {
	eventIDs, workspaces, actors, keys, grants, args []*string
	kinds, actions, outcomes, messages, sources      []string
	clients                                          []string
	statuses                                         []*int32
	durations                                        []float64
	times                                            []time.Time
}

func newAuditRows(events []mcpgate.AuditEvent) (*auditRows, error) {
	r := &auditRows{}
	for _, e := range events {
		var args *string
		if len(e.Arguments) > 0 {
			b, err := json.Marshal(e.Arguments)
			if err != nil {
				return nil, fmt.Errorf("encode audit arguments: %w", err)
			}
			s := string(b)
			args = &s
		}
		var status *int32
		if e.UpstreamStatus != 0 {
			v := int32(e.UpstreamStatus)
			status = &v
		}
		ws := e.WorkspaceID
		r.eventIDs, r.workspaces = append(r.eventIDs, optional(e.EventID)), append(r.workspaces, &ws)
		r.actors, r.keys, r.grants = append(r.actors, optional(e.ActorID)), append(r.keys, optional(e.KeyID)),
			append(r.grants, optional(e.GrantID))
		r.args, r.statuses = append(r.args, args), append(r.statuses, status)
		r.kinds, r.actions, r.outcomes = append(r.kinds, string(e.Kind)), append(r.actions, e.Action), append(r.outcomes, string(e.Outcome))
		r.messages, r.sources, r.clients = append(r.messages, e.Message), append(r.sources, string(e.Source)), append(r.clients, e.ClientName)
		r.durations, r.times = append(r.durations, e.DurationMS), append(r.times, e.CreatedAt)
	}
	return r, nil
}

// optional is s, or NULL when it is empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// insertedAudit is what the rollup needs of a row the insert stored.
type insertedAudit struct {
	ws, actor, source, kind, outcome string
	at                               time.Time
}

func (db *DB) insertAudit(ctx context.Context, events []mcpgate.AuditEvent) error {
	r, err := newAuditRows(events)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			INSERT INTO audit_log (event_id, workspace_id, actor_id, key_id, grant_id, arguments, upstream_status,
				kind, action, outcome, message, source, client_name, duration_ms, created_at)
			SELECT e::uuid, w::uuid, a::uuid, k, g::uuid, j::jsonb, st, ki, ac, o, m, so, cl, d, t
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[],
				$8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::float8[], $15::timestamptz[])
				AS u(e, w, a, k, g, j, st, ki, ac, o, m, so, cl, d, t)
			ON CONFLICT (event_id, created_at) WHERE event_id IS NOT NULL DO NOTHING
			RETURNING workspace_id::text, coalesce(actor_id::text, ''), source, kind, outcome, created_at`,
			r.eventIDs, r.workspaces, r.actors, r.keys, r.grants, r.args, r.statuses,
			r.kinds, r.actions, r.outcomes, r.messages, r.sources, r.clients, r.durations, r.times)
		if err != nil {
			return err
		}
		stored, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (insertedAudit, error) {
			var i insertedAudit
			err := row.Scan(&i.ws, &i.actor, &i.source, &i.kind, &i.outcome, &i.at)
			return i, err
		})
		if err != nil {
			return err
		}
		return addHourly(ctx, tx, stored)
	})
}

// addHourly adds the tool calls the insert stored to the hourly rollup.
func addHourly(ctx context.Context, tx pgx.Tx, stored []insertedAudit) error {
	type hourKey struct {
		ws    string
		hour  time.Time
		actor string
		src   string
	}
	counts := map[hourKey][2]int64{}
	for _, e := range stored {
		if e.kind != string(mcpgate.KindToolCall) {
			continue
		}
		k := hourKey{e.ws, e.at.UTC().Truncate(time.Hour), cmp.Or(e.actor, nilUUID), e.source}
		c := counts[k]
		c[0]++
		if e.outcome != string(mcpgate.OutcomeOK) {
			c[1]++
		}
		counts[k] = c
	}
	if len(counts) == 0 {
		return nil
	}
	// Replicas upsert the same rollup rows; taking them in one order means
	// two batches wait for each other instead of deadlocking.
	keys := make([]hourKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b hourKey) int {
		return cmp.Or(strings.Compare(a.ws, b.ws), a.hour.Compare(b.hour), strings.Compare(a.actor, b.actor),
			strings.Compare(a.src, b.src))
	})
	var wss, actors, srcs []string
	var hours []time.Time
	var calls, errs []int64
	for _, k := range keys {
		wss, hours, actors, srcs = append(wss, k.ws), append(hours, k.hour), append(actors, k.actor), append(srcs, k.src)
		calls, errs = append(calls, counts[k][0]), append(errs, counts[k][1])
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO audit_hourly (workspace_id, hour, actor_id, source, calls, errors)
		SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::uuid[], $4::text[], $5::bigint[], $6::bigint[])
		ON CONFLICT (workspace_id, hour, actor_id, source) DO UPDATE
			SET calls = audit_hourly.calls + excluded.calls, errors = audit_hourly.errors + excluded.errors`,
		wss, hours, actors, srcs, calls, errs)
	return err
}

// addAuditPartitions adds the daily partitions the events' days need.
func (db *DB) addAuditPartitions(ctx context.Context, events []mcpgate.AuditEvent) error {
	days := map[time.Time]bool{}
	for _, e := range events {
		days[e.CreatedAt.UTC().Truncate(24*time.Hour)] = true
	}
	for d := range days {
		if err := db.addAuditPartition(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

func (db *DB) addAuditPartition(ctx context.Context, day time.Time) error {
	_, err := db.Pool.Exec(ctx, `SELECT audit_log_add_partition($1::date)`, day.UTC().Format(time.DateOnly))
	return err
}

// dropOrphanEvents removes events whose workspace no longer exists and clears
// actors that no longer exist.
func (db *DB) dropOrphanEvents(ctx context.Context, events []mcpgate.AuditEvent) ([]mcpgate.AuditEvent, error) {
	var wss, users []string
	for _, e := range events {
		wss = append(wss, e.WorkspaceID)
		if e.ActorID != "" {
			users = append(users, e.ActorID)
		}
	}
	exist := map[string]bool{}
	rows, err := db.Pool.Query(ctx, `
		SELECT id::text FROM workspaces WHERE id = ANY($1::uuid[])
		UNION ALL SELECT id::text FROM users WHERE id = ANY($2::uuid[])`, wss, users)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		exist[id] = true
	}
	out := events[:0:0]
	for _, e := range events {
		if !exist[e.WorkspaceID] {
			continue
		}
		if e.ActorID != "" && !exist[e.ActorID] {
			e.ActorID = ""
		}
		out = append(out, e)
	}
	return out, nil
}

// auditCursor is a position in the listing's order, (created_at, id)
// descending. It is rendered as "<unix microseconds>_<id>": PostgreSQL keeps
// microseconds, so the time round-trips exactly.
type auditCursor struct {
	at time.Time
	id int64
}

func (c auditCursor) String() string {
	return strconv.FormatInt(c.at.UnixMicro(), 10) + "_" + strconv.FormatInt(c.id, 10)
}

func parseAuditCursor(s string) (auditCursor, error) {
	t, id, ok := strings.Cut(s, "_")
	us, err1 := strconv.ParseInt(t, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if !ok || err1 != nil || err2 != nil || n <= 0 {
		return auditCursor{}, mcpgate.Errorf(mcpgate.EInvalid, "invalid cursor")
	}
	return auditCursor{time.UnixMicro(us), n}, nil
}

// auditQuery builds the SELECT of a listing or an export. Only the filters
// that are set become conditions, so the plan is chosen for exactly those
// (a catch-all "($3 = ” OR actor_id = $3)" would let a cached generic plan
// ignore the index that fits). desc orders newest first.
func auditQuery(workspaceID string, f mcpgate.AuditFilter, c *auditCursor, desc bool, limit int) (string, []any, error) {
	args := []any{workspaceID}
	where := []string{"a.workspace_id = $1"}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	if f.ActorID != "" {
		if !isUUID(f.ActorID) {
			return "", nil, mcpgate.Errorf(mcpgate.EInvalid, "actor must be a user id")
		}
		add("a.actor_id = $?::uuid", f.ActorID)
	}
	if f.Action != "" {
		add("a.action = $?", f.Action)
	}
	if f.Kind != "" {
		add("a.kind = $?", f.Kind)
	}
	if f.Outcome != "" {
		add("a.outcome = $?", f.Outcome)
	}
	if f.Source != "" {
		add("a.source = $?", f.Source)
	}
	if !f.Since.IsZero() {
		add("a.created_at >= $?", f.Since)
	}
	if !f.Until.IsZero() {
		add("a.created_at < $?", f.Until)
	}
	if c != nil {
		// The plain bound lets the planner skip newer partitions; the row
		// comparison is the exact position inside the index order.
		add("a.created_at <= $?", c.at)
		args = append(args, c.id)
		where = append(where, fmt.Sprintf("(a.created_at, a.id) < ($%d, $%d)", len(args)-1, len(args)))
	}
	order := "ORDER BY a.created_at DESC, a.id DESC"
	if !desc {
		order = "ORDER BY a.created_at, a.id"
	}
	q := `SELECT a.id, a.workspace_id, coalesce(a.actor_id::text, ''), coalesce(u.email, ''), coalesce(a.key_id, ''),
			a.kind, a.action, a.arguments, a.outcome, a.message, coalesce(a.upstream_status, 0), a.duration_ms, a.source, a.created_at,
			coalesce(a.grant_id::text, ''), a.client_name
		FROM audit_log a LEFT JOIN users u ON u.id = a.actor_id
		WHERE ` + strings.Join(where, " AND ") + "\n\t\t" + order
	if limit > 0 {
		args = append(args, limit)
		q += " LIMIT $" + strconv.Itoa(len(args))
	}
	return q, args, nil
}

func scanAuditEvent(r pgx.Row) (mcpgate.AuditEvent, error) {
	var e mcpgate.AuditEvent
	var args []byte
	err := r.Scan(&e.ID, &e.WorkspaceID, &e.ActorID, &e.ActorEmail, &e.KeyID, &e.Kind, &e.Action, &args,
		&e.Outcome, &e.Message, &e.UpstreamStatus, &e.DurationMS, &e.Source, &e.CreatedAt, &e.GrantID, &e.ClientName)
	if err == nil && len(args) > 0 {
		err = json.Unmarshal(args, &e.Arguments)
	}
	return e, err
}

// ListAudit returns a page of a workspace's audit log, newest first, and the
// cursor of the next page ("" on the last). The cursor is opaque; a malformed
// one is an EInvalid error.
func (db *DB) ListAudit(ctx context.Context, workspaceID string, f mcpgate.AuditFilter) ([]mcpgate.AuditEvent, string, error) {
	if f.Limit <= 0 || f.Limit > 200 {
		f.Limit = 50
	}
	q, args, err := auditListQuery(workspaceID, f)
	if err != nil {
		return nil, "", err
	}
	rows, err := db.Pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", mapError(err, "")
	}
	events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (mcpgate.AuditEvent, error) { return scanAuditEvent(r) })
	if err != nil {
		return nil, "", mapError(err, "")
	}
	next := ""
	if len(events) > f.Limit {
		events = events[:f.Limit]
		last := events[len(events)-1]
		next = auditCursor{last.CreatedAt, last.ID}.String()
	}
	return events, next, nil
}

func auditListQuery(workspaceID string, f mcpgate.AuditFilter) (string, []any, error) {
	var cur *auditCursor
	if f.Cursor != "" {
		c, err := parseAuditCursor(f.Cursor)
		if err != nil {
			return "", nil, err
		}
		cur = &c
	}
	return auditQuery(workspaceID, f, cur, true, f.Limit+1)
}

// StreamAudit calls fn with every event of a workspace's log that matches f
// (Cursor and Limit are ignored), oldest first, as the rows arrive from the
// database: an export of any size needs the memory of one row. It stops at
// the first error fn returns and returns it. The rows are one consistent
// snapshot of the log.
func (db *DB) StreamAudit(ctx context.Context, workspaceID string, f mcpgate.AuditFilter, fn func(*mcpgate.AuditEvent) error) error {
	q, args, err := auditQuery(workspaceID, f, nil, false, 0)
	if err != nil {
		return err
	}
	rows, err := db.Pool.Query(ctx, q, args...)
	if err != nil {
		return mapError(err, "")
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanAuditEvent(rows)
		if err != nil {
			return mapError(err, "")
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
	return mapError(rows.Err(), "")
}

// AuditBucket is the number of calls and errors in one hour.
type AuditBucket struct {
	Hour   time.Time `json:"hour"`
	Calls  int       `json:"calls"`
	Errors int       `json:"errors"`
}

// AuditHourly counts a workspace's tool calls and failed ones (any outcome
// but ok) per UTC hour from the hour that contains since; with actorID set,
// only that user's. It reads the rollup the writer keeps, so its cost is the
// number of hours and actors, not of calls.
func (db *DB) AuditHourly(ctx context.Context, workspaceID, actorID string, since time.Time) ([]AuditBucket, error) {
	return db.AuditHourlyFrom(ctx, workspaceID, actorID, "", since)
}

// AuditHourlyFrom is AuditHourly for the calls of one source ("mcp" or
// "dashboard"; "" for every source).
func (db *DB) AuditHourlyFrom(ctx context.Context, workspaceID, actorID, source string, since time.Time) ([]AuditBucket, error) {
	q, args, err := auditHourlyQuery(workspaceID, actorID, source, since)
	if err != nil {
		return nil, err
	}
	return listRows(ctx, db, func(r pgx.Row, b *AuditBucket) error { return r.Scan(&b.Hour, &b.Calls, &b.Errors) }, q, args...)
}

func auditHourlyQuery(workspaceID, actorID, source string, since time.Time) (string, []any, error) {
	q := `SELECT hour, sum(calls), sum(errors) FROM audit_hourly WHERE workspace_id = $1 AND hour >= $2`
	args := []any{workspaceID, since.UTC().Truncate(time.Hour)}
	if actorID != "" {
		if !isUUID(actorID) {
			return "", nil, mcpgate.Errorf(mcpgate.EInvalid, "actor must be a user id")
		}
		args = append(args, actorID)
		q += ` AND actor_id = $` + strconv.Itoa(len(args)) + `::uuid`
	}
	if source != "" {
		args = append(args, source)
		q += ` AND source = $` + strconv.Itoa(len(args))
	}
	return q + ` GROUP BY hour ORDER BY hour`, args, nil
}
