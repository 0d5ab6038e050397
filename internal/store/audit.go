package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
)

// InsertAudit writes a batch of audit events in one round trip.
func (db *DB) InsertAudit(ctx context.Context, events []mcpgate.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	rows := make([][]any, 0, len(events))
	for _, e := range events {
		var args []byte
		if len(e.Arguments) > 0 {
			b, err := json.Marshal(e.Arguments)
			if err != nil {
				return fmt.Errorf("encode audit arguments: %w", err)
			}
			args = b
		}
		var status *int
		if e.UpstreamStatus != 0 {
			status = &e.UpstreamStatus
		}
		created := e.CreatedAt
		if created.IsZero() {
			created = time.Now()
		}
		rows = append(rows, []any{e.WorkspaceID, nullIfEmpty(e.ActorID), nullIfEmpty(e.KeyID), e.Kind, e.Action,
			args, string(e.Outcome), e.Message, status, e.DurationMS, e.Source, created, nullIfEmpty(e.GrantID), e.ClientName})
	}
	_, err := db.Pool.CopyFrom(ctx, pgx.Identifier{"audit_log"},
		[]string{"workspace_id", "actor_id", "key_id", "kind", "action", "arguments", "outcome", "message",
			"upstream_status", "duration_ms", "source", "created_at", "grant_id", "client_name"}, pgx.CopyFromRows(rows))
	return mapError(err, "")
}

// ListAudit returns a page of a workspace's audit log, newest first, and the
// cursor of the next page ("" on the last).
func (db *DB) ListAudit(ctx context.Context, workspaceID string, f mcpgate.AuditFilter) ([]mcpgate.AuditEvent, string, error) {
	if f.Limit <= 0 || f.Limit > 200 {
		f.Limit = 50
	}
	before := int64(1<<63 - 1)
	if f.Cursor != "" {
		v, err := strconv.ParseInt(f.Cursor, 10, 64)
		if err != nil || v <= 0 {
			return nil, "", mcpgate.Errorf(mcpgate.EInvalid, "invalid cursor")
		}
		before = v
	}
	var since, until *time.Time
	if !f.Since.IsZero() {
		since = &f.Since
	}
	if !f.Until.IsZero() {
		until = &f.Until
	}
	rows, err := db.Pool.Query(ctx, `
		SELECT a.id, a.workspace_id, coalesce(a.actor_id::text, ''), coalesce(u.email, ''), coalesce(a.key_id, ''),
			a.kind, a.action, a.arguments, a.outcome, a.message, coalesce(a.upstream_status, 0), a.duration_ms, a.source, a.created_at,
			coalesce(a.grant_id::text, ''), a.client_name
		FROM audit_log a LEFT JOIN users u ON u.id = a.actor_id
		WHERE a.workspace_id = $1 AND a.id < $2
			AND ($3 = '' OR a.actor_id::text = $3) AND ($4 = '' OR a.action = $4)
			AND ($5 = '' OR a.kind = $5) AND ($6 = '' OR a.outcome = $6)
			AND ($7::timestamptz IS NULL OR a.created_at >= $7) AND ($8::timestamptz IS NULL OR a.created_at < $8)
		ORDER BY a.id DESC LIMIT $9`,
		workspaceID, before, f.ActorID, f.Action, f.Kind, f.Outcome, since, until, f.Limit+1)
	if err != nil {
		return nil, "", mapError(err, "")
	}
	events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (mcpgate.AuditEvent, error) {
		var e mcpgate.AuditEvent
		var args []byte
		err := r.Scan(&e.ID, &e.WorkspaceID, &e.ActorID, &e.ActorEmail, &e.KeyID, &e.Kind, &e.Action, &args,
			&e.Outcome, &e.Message, &e.UpstreamStatus, &e.DurationMS, &e.Source, &e.CreatedAt, &e.GrantID, &e.ClientName)
		if err == nil && len(args) > 0 {
			err = json.Unmarshal(args, &e.Arguments)
		}
		return e, err
	})
	if err != nil {
		return nil, "", mapError(err, "")
	}
	next := ""
	if len(events) > f.Limit {
		events = events[:f.Limit]
		next = strconv.FormatInt(events[len(events)-1].ID, 10)
	}
	return events, next, nil
}

// AuditBucket is the number of calls and errors in one hour.
type AuditBucket struct {
	Hour   time.Time `json:"hour"`
	Calls  int       `json:"calls"`
	Errors int       `json:"errors"`
}

// AuditHourly counts a workspace's tool calls and failed ones per hour since
// the given time; with actorID set, only that user's.
func (db *DB) AuditHourly(ctx context.Context, workspaceID, actorID string, since time.Time) ([]AuditBucket, error) {
	rows, err := db.Pool.Query(ctx, `
		SELECT date_trunc('hour', created_at) h, count(*), count(*) FILTER (WHERE outcome <> 'ok')
		FROM audit_log WHERE workspace_id = $1 AND kind = 'tool_call' AND created_at >= $2
			AND ($3 = '' OR actor_id::text = $3)
		GROUP BY h ORDER BY h`, workspaceID, since, actorID)
	if err != nil {
		return nil, mapError(err, "")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditBucket, error) {
		var b AuditBucket
		return b, r.Scan(&b.Hour, &b.Calls, &b.Errors)
	})
	return out, mapError(err, "")
}
