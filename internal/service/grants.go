package service

import (
	"context"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/trustcache"
)

// Grants implements mcpgate.GrantService: all of the workspace's live
// grants for an admin, a member's own otherwise.
func (s *Service) Grants(ctx context.Context, a *mcpgate.Actor) ([]mcpgate.Grant, error) {
	return s.db.ListGrants(ctx, a.WorkspaceID, visibleOwner(a))
}

// RevokeGrant implements mcpgate.GrantService: its owner or a workspace
// admin may. Another member's grant reads as not found to a member, and a
// grant of another workspace to everyone.
func (s *Service) RevokeGrant(ctx context.Context, a *mcpgate.Actor, id string) error {
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

// CacheTrust returns the services' rule for how long a cached entry may be
// used (see cacheTrust): fresh for the TTL only while the invalidation
// listener is connected, and standing in through a database outage for the
// grace. Caches outside the package that must honour revocations the same
// way (the OAuth access-token authenticator) follow it too.
func (s *Service) CacheTrust() trustcache.Trust { return s.trust }
