package service

import (
	"context"
	"time"

	"github.com/mcpgate/mcpgate"
)

// Audit implements mcpgate.AuditService: admins see every event, members
// only their own.
func (s *Service) Audit(ctx context.Context, a *mcpgate.Actor, f mcpgate.AuditFilter) ([]mcpgate.AuditEvent, string, error) {
	if !a.CanAdmin() {
		f.ActorID = a.UserID
	}
	return s.db.ListAudit(ctx, a.WorkspaceID, f)
}

// CallsPerHour implements mcpgate.AuditService with Audit's visibility: a
// member counts only their own calls.
func (s *Service) CallsPerHour(ctx context.Context, a *mcpgate.Actor, userID string, since time.Time) ([]mcpgate.HourCount, error) {
	if !a.CanAdmin() {
		userID = a.UserID
	}
	buckets, err := s.db.AuditHourly(ctx, a.WorkspaceID, userID, since)
	if err != nil {
		return nil, err
	}
	out := make([]mcpgate.HourCount, len(buckets))
	for i, b := range buckets {
		out[i] = mcpgate.HourCount{Hour: b.Hour, Calls: b.Calls, Errors: b.Errors}
	}
	return out, nil
}
