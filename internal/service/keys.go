package service

import (
	"context"

	"github.com/mcpgate/mcpgate"
)

// CreateKey implements mcpgate.KeyService.
func (s *Keys) CreateKey(ctx context.Context, a *mcpgate.Actor, nk mcpgate.NewKey) (*mcpgate.APIKey, string, error) {
	name, err := mcpgate.ValidateName("the key name", nk.Name)
	if err != nil {
		return nil, "", err
	}
	if nk.Scope == "" {
		nk.Scope = mcpgate.ScopeFull
	}
	if !nk.Scope.Valid() {
		return nil, "", mcpgate.Errorf(mcpgate.EInvalid, "scope must be full or read_only")
	}
	if nk.ExpiresAt != nil {
		if !nk.ExpiresAt.After(s.now()) {
			return nil, "", mcpgate.Errorf(mcpgate.EInvalid, "expires_at must be in the future")
		}
		t := nk.ExpiresAt.UTC()
		nk.ExpiresAt = &t
	}
	if err := s.requireVerified(ctx, a.UserID); err != nil {
		return nil, "", err
	}
	key, id, hash := mcpgate.NewMCPKey()
	k := &mcpgate.APIKey{ID: id, WorkspaceID: a.WorkspaceID, UserID: a.UserID, OwnerEmail: a.Email, Name: name,
		Scope: nk.Scope, ExpiresAt: nk.ExpiresAt}
	n, err := s.db.CreateKeyWithin(ctx, k, hash, s.opts.MaxKeysPerUser)
	if err := capRefusal(err, "you hold %d working MCP keys, the most allowed; revoke one you no longer use first", n); err != nil {
		return nil, "", err
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionKeyCreated, map[string]any{"key_id": k.ID, "name": k.Name, "scope": k.Scope}))
	return k, key, nil
}

// Keys implements mcpgate.KeyService: all of the workspace's for an admin, a
// member's own otherwise.
func (s *Keys) Keys(ctx context.Context, a *mcpgate.Actor) ([]mcpgate.APIKey, error) {
	return s.db.ListKeys(ctx, a.WorkspaceID, visibleOwner(a))
}

// visibleOwner is the owner filter of the visibility rule keys, grants and
// approval requests share: "" (every owner) for a workspace admin, the
// member's own id otherwise.
func visibleOwner(a *mcpgate.Actor) string {
	if a.CanAdmin() {
		return ""
	}
	return a.UserID
}

// mayManage reports whether the actor may act on what ownerID owns (revoke
// a key or a grant, see or decide an approval request): its owner or a
// workspace admin.
func mayManage(a *mcpgate.Actor, ownerID string) bool { return a.CanAdmin() || ownerID == a.UserID }

// RevokeKey implements mcpgate.KeyService: its owner or a workspace admin
// may. Another member's key reads as not found to a member.
func (s *Keys) RevokeKey(ctx context.Context, a *mcpgate.Actor, id string) error {
	k, err := s.db.FindKey(ctx, a.WorkspaceID, id)
	if err == nil && !mayManage(a, k.UserID) {
		err = mcpgate.Errorf(mcpgate.ENotFound, "key not found")
	}
	if err == nil {
		err = s.db.RevokeKey(ctx, a.WorkspaceID, k.ID)
	}
	if err != nil {
		return err
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionKeyRevoked, map[string]any{"key_id": k.ID, "name": k.Name}))
	return nil
}
