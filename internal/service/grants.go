package service

import (
	"context"

	"github.com/mcpgate/mcpgate"
)

// Grants implements mcpgate.GrantService: all of the workspace's live
// grants for an admin, a member's own otherwise.
func (s *Grants) Grants(ctx context.Context, a *mcpgate.Actor) ([]mcpgate.Grant, error) {
	return s.db.ListGrants(ctx, a.WorkspaceID, visibleOwner(a))
}

// RevokeGrant implements mcpgate.GrantService: its owner or a workspace
// admin may. Another member's grant reads as not found to a member, and a
// grant of another workspace to everyone.
func (s *Grants) RevokeGrant(ctx context.Context, a *mcpgate.Actor, id string) error {
	g, err := s.db.FindGrant(ctx, a.WorkspaceID, id)
	if err == nil && (g.RevokedAt != nil || !mayManage(a, g.UserID)) {
		err = mcpgate.Errorf(mcpgate.ENotFound, "grant not found")
	}
	if err == nil {
		err = s.db.RevokeGrant(ctx, a.WorkspaceID, g.ID)
	}
	if err != nil {
		return err
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionGrantRevoked,
		map[string]any{"grant_id": g.ID, "client": g.ClientName, "user_id": g.UserID}))
	return nil
}
