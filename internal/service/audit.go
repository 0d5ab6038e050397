package service

import (
	"context"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
)

// visible applies the audit log's one visibility rule: admins see every
// event, members only their own.
func visible(a *mcpgate.Actor, f mcpgate.AuditFilter) mcpgate.AuditFilter {
	if !a.CanAdmin() {
		f.ActorID = a.UserID
	}
	return f
}

// Audit implements mcpgate.AuditService.
func (s *Audit) Audit(ctx context.Context, a *mcpgate.Actor, f mcpgate.AuditFilter) ([]mcpgate.AuditEvent, string, error) {
	return s.db.ListAudit(ctx, a.WorkspaceID, visible(a, f))
}

// Export implements mcpgate.AuditService: the rows stream from the
// database to fn, and the export itself is audited with its filters and how
// many rows it gave.
//
// An export holds a pool connection for as long as its reader takes, so it
// runs only in one of the pool's long-read slots (a quarter of the pool):
// when they are all taken it is refused with ETooMany and a Retry-After
// rather than queued, and the rest of the pool stays with every tenant's
// calls and logins. It is bounded by ctx (the caller cancels it when the
// client goes or stalls), not by the statements' query timeout.
func (s *Audit) Export(ctx context.Context, a *mcpgate.Actor, f mcpgate.AuditFilter, fn func(*mcpgate.AuditEvent) error) (int, error) {
	f = visible(a, f)
	release, err := s.db.AcquireLongRead()
	if err != nil {
		return 0, err
	}
	defer release()
	rows := 0
	err = s.db.StreamAudit(store.WithoutQueryTimeout(ctx), a.WorkspaceID, f, func(e *mcpgate.AuditEvent) error {
		rows++
		return fn(e)
	})
	if err != nil {
		return rows, err
	}
	args := map[string]any{"rows": rows}
	for k, v := range map[string]string{"tool": f.Action, "outcome": string(f.Outcome), "kind": string(f.Kind), "source": string(f.Source)} {
		if v != "" {
			args[k] = v
		}
	}
	if !f.Since.IsZero() {
		args["since"] = f.Since.UTC().Format(time.RFC3339)
	}
	if !f.Until.IsZero() {
		args["until"] = f.Until.UTC().Format(time.RFC3339)
	}
	if a.CanAdmin() && f.ActorID != "" {
		args["actor"] = f.ActorID
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionAuditExported, args))
	return rows, nil
}

// CallsPerHour implements mcpgate.AuditService with Audit's visibility: a
// member counts only their own calls. It reads the writer's hourly rollup.
func (s *Audit) CallsPerHour(ctx context.Context, a *mcpgate.Actor, userID string, source mcpgate.Source, since time.Time) ([]mcpgate.HourCount, error) {
	if !a.CanAdmin() {
		userID = a.UserID
	}
	buckets, err := s.db.AuditHourlyFrom(ctx, a.WorkspaceID, userID, string(source), since)
	if err != nil {
		return nil, err
	}
	out := make([]mcpgate.HourCount, len(buckets))
	for i, b := range buckets {
		out[i] = mcpgate.HourCount{Hour: b.Hour, Calls: b.Calls, Errors: b.Errors}
	}
	return out, nil
}
