package service

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/mcpgate/mcpgate"
)

// Enter implements mcpgate.WorkspaceService: the role comes from the
// database here and nowhere else.
func (s *Workspaces) Enter(ctx context.Context, u *mcpgate.User, workspaceID string, source mcpgate.Source) (*mcpgate.Actor, *mcpgate.Workspace, error) {
	ws, err := s.db.FindMembership(ctx, workspaceID, u.ID)
	if err != nil {
		return nil, nil, err
	}
	return &mcpgate.Actor{UserID: u.ID, Email: u.Email, WorkspaceID: ws.ID, Role: ws.Role, Scope: mcpgate.ScopeFull,
		Source: source}, ws, nil
}

// EnterToGrant implements mcpgate.WorkspaceService: the OAuth consent page
// calls it before it issues a code, so that an owner or admin whom the
// two-factor policy stops cannot hand an app the workspace either.
func (s *Workspaces) EnterToGrant(ctx context.Context, u *mcpgate.User, workspaceID string) (*mcpgate.Actor, *mcpgate.Workspace, error) {
	a, ws, err := s.Enter(ctx, u, workspaceID, mcpgate.SourceDashboard)
	if err != nil {
		return nil, nil, err
	}
	if err := s.requireTwoFactor(ctx, a); err != nil {
		return nil, nil, err
	}
	return a, ws, nil
}

// Workspaces implements mcpgate.WorkspaceService.
func (s *Workspaces) Workspaces(ctx context.Context, u *mcpgate.User) ([]mcpgate.Workspace, error) {
	return s.db.WorkspacesOfUser(ctx, u.ID)
}

// CreateWorkspace implements mcpgate.WorkspaceService.
func (s *Workspaces) CreateWorkspace(ctx context.Context, u *mcpgate.User, name string) (*mcpgate.Workspace, error) {
	name, err := mcpgate.ValidateName("the workspace name", name)
	if err != nil {
		return nil, err
	}
	ws, n, err := s.db.CreateWorkspaceWithin(ctx, u.ID, name, s.opts.MaxWorkspacesPerUser)
	if err := capRefusal(err, "you own %d workspaces, the most allowed; delete or hand over one first", n); err != nil {
		return nil, err
	}
	return ws, nil
}

// Members implements mcpgate.WorkspaceService.
func (s *Workspaces) Members(ctx context.Context, a *mcpgate.Actor) ([]mcpgate.Member, error) {
	return s.db.ListMembers(ctx, a.WorkspaceID)
}

// SetMemberRole implements mcpgate.WorkspaceService.
// A role change is an admin change under the two-factor policy, one's own
// included: an admin without two-factor sign-in cannot step down to member
// to slip out of it (nor would it help: see requireDecider).
func (s *Workspaces) SetMemberRole(ctx context.Context, a *mcpgate.Actor, userID string, role mcpgate.Role) (*mcpgate.Member, error) {
	if err := s.requireAdminChange(ctx, a); err != nil {
		return nil, err
	}
	if !role.Valid() {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "role must be owner, admin or member")
	}
	target, err := s.db.FindMember(ctx, a.WorkspaceID, userID)
	if err != nil {
		return nil, err
	}
	// Only an owner may make or unmake owners.
	if (role == mcpgate.RoleOwner || target.Role == mcpgate.RoleOwner) && a.Role != mcpgate.RoleOwner {
		return nil, mcpgate.Errorf(mcpgate.EForbidden, "only an owner can grant or change the owner role")
	}
	m, err := s.db.UpdateMemberRole(ctx, a.WorkspaceID, target.UserID, role)
	if err != nil {
		return nil, err
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionMemberRoleChanged, map[string]any{"user_id": m.UserID, "role": m.Role}))
	return m, nil
}

// RemoveMember implements mcpgate.WorkspaceService.
func (s *Workspaces) RemoveMember(ctx context.Context, a *mcpgate.Actor, userID string) error {
	if userID != a.UserID {
		if err := s.requireAdminChange(ctx, a); err != nil {
			return err
		}
		target, err := s.db.FindMember(ctx, a.WorkspaceID, userID)
		if err != nil {
			return err
		}
		if target.Role == mcpgate.RoleOwner && a.Role != mcpgate.RoleOwner {
			return mcpgate.Errorf(mcpgate.EForbidden, "only an owner can remove an owner")
		}
	}
	if err := s.db.RemoveMember(ctx, a.WorkspaceID, userID); err != nil {
		return err
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionMemberRemoved, map[string]any{"user_id": userID}))
	return nil
}

// invitationTTL is how long an invitation can be accepted.
const invitationTTL = 7 * 24 * time.Hour

// Invite implements mcpgate.WorkspaceService.
func (s *Workspaces) Invite(ctx context.Context, a *mcpgate.Actor, email string, role mcpgate.Role) (*mcpgate.Invitation, string, error) {
	// An invitation hands out a role: an admin change like a role change.
	if err := s.requireAdminChange(ctx, a); err != nil {
		return nil, "", err
	}
	email, err := mcpgate.NormalizeEmail(email)
	if err != nil {
		return nil, "", err
	}
	if role == "" {
		role = mcpgate.RoleMember
	}
	if role != mcpgate.RoleMember && role != mcpgate.RoleAdmin {
		return nil, "", mcpgate.Errorf(mcpgate.EInvalid, "role must be admin or member")
	}
	if s.opts.Signup == SignupInvite {
		if err := s.mayInviteNewPeople(ctx, a, email); err != nil {
			return nil, "", err
		}
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	token := "inv_" + base64.RawURLEncoding.EncodeToString(b)
	inv := &mcpgate.Invitation{WorkspaceID: a.WorkspaceID, Email: email, Role: role, CreatedBy: a.UserID,
		ExpiresAt: s.now().Add(invitationTTL).UTC().Truncate(time.Second)}
	if err := s.db.CreateInvitation(ctx, inv, mcpgate.HashToken(token)); err != nil {
		return nil, "", err
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionInvitationCreated, map[string]any{"email": email, "role": role}))
	return inv, token, nil
}

// mayInviteNewPeople enforces invite-only sign-up: an invitation to an
// email with no account creates an account, so in invite mode only the
// owners and admins of a shared workspace, or the instance admin, may send
// one. Everyone owns their personal workspace; without this rule any member
// could mint accounts by inviting into it. Inviting someone who already has
// an account creates none, so that stays open to every workspace admin.
func (s *Workspaces) mayInviteNewPeople(ctx context.Context, a *mcpgate.Actor, email string) error {
	if _, _, err := s.db.FindUserByEmail(ctx, email); err == nil {
		return nil
	} else if mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		return err
	}
	ws, err := s.db.FindMembership(ctx, a.WorkspaceID, a.UserID)
	if err != nil {
		return err
	}
	if !ws.Personal {
		return nil
	}
	u, err := s.db.FindUserByID(ctx, a.UserID)
	if err != nil {
		return err
	}
	if u.InstanceAdmin {
		return nil
	}
	return mcpgate.Errorf(mcpgate.EForbidden, "sign-up on this instance is by invitation only: people without an account "+
		"can be invited to a shared workspace, not to a personal one (or by the instance admin)")
}

// Invitations implements mcpgate.WorkspaceService.
func (s *Workspaces) Invitations(ctx context.Context, a *mcpgate.Actor) ([]mcpgate.Invitation, error) {
	if err := requireAdmin(a); err != nil {
		return nil, err
	}
	return s.db.ListInvitations(ctx, a.WorkspaceID)
}

// DeleteInvitation implements mcpgate.WorkspaceService.
func (s *Workspaces) DeleteInvitation(ctx context.Context, a *mcpgate.Actor, id string) error {
	if err := requireAdmin(a); err != nil {
		return err
	}
	if err := s.db.DeleteInvitation(ctx, a.WorkspaceID, id); err != nil {
		return err
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionInvitationDeleted, map[string]any{"invitation_id": id}))
	return nil
}

// FindInvitation implements mcpgate.WorkspaceService.
func (s *Workspaces) FindInvitation(ctx context.Context, token string) (*mcpgate.Invitation, error) {
	return s.db.FindOpenInvitation(ctx, mcpgate.HashToken(token))
}

// AcceptInvitation implements mcpgate.WorkspaceService.
func (s *Workspaces) AcceptInvitation(ctx context.Context, u *mcpgate.User, token string) (*mcpgate.Workspace, error) {
	if err := s.requireVerified(ctx, u.ID); err != nil {
		return nil, err
	}
	ws, err := s.db.AcceptInvitation(ctx, mcpgate.HashToken(token), u.ID, u.Email)
	if err != nil {
		return nil, err
	}
	s.record(ctx, mcpgate.AuditEvent{WorkspaceID: ws.ID, ActorID: u.ID, Kind: mcpgate.KindAdmin,
		Action: string(mcpgate.ActionInvitationAccepted), Outcome: mcpgate.OutcomeOK, Source: mcpgate.SourceDashboard})
	return ws, nil
}

// UpdateWorkspace implements mcpgate.WorkspaceService. Only an owner may
// change the settings, and while the two-factor policy is on only with
// two-factor sign-in. Requiring it needs the owner to have it on (they would
// be the first it stops); the four-eyes rule may be set by any owner the
// policy lets through.
func (s *Workspaces) UpdateWorkspace(ctx context.Context, a *mcpgate.Actor, u mcpgate.WorkspaceUpdate) (*mcpgate.Workspace, error) {
	if a.Role != mcpgate.RoleOwner {
		return nil, mcpgate.Errorf(mcpgate.EForbidden, "only a workspace owner can change its settings")
	}
	if err := checkApprovalWait(u.ApprovalWaitSeconds); err != nil {
		return nil, err
	}
	if u.RequireTwoFactor != nil || u.ApprovalFourEyes != nil || u.ApprovalWaitSeconds != nil {
		if err := s.requireTwoFactor(ctx, a); err != nil {
			return nil, err
		}
	}
	if u.RequireTwoFactor != nil {
		if err := s.setRequireTwoFactor(ctx, a, *u.RequireTwoFactor); err != nil {
			return nil, err
		}
	}
	if u.ApprovalFourEyes != nil {
		if err := s.db.SetApprovalFourEyes(ctx, a.WorkspaceID, *u.ApprovalFourEyes); err != nil {
			return nil, err
		}
		s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionWorkspaceUpdated, map[string]any{"approval_four_eyes": *u.ApprovalFourEyes}))
	}
	if u.ApprovalWaitSeconds != nil {
		if err := s.setApprovalWait(ctx, a, *u.ApprovalWaitSeconds); err != nil {
			return nil, err
		}
	}
	return s.db.FindMembership(ctx, a.WorkspaceID, a.UserID)
}

// setRequireTwoFactor sets the two-factor policy for UpdateWorkspace.
func (s *Workspaces) setRequireTwoFactor(ctx context.Context, a *mcpgate.Actor, on bool) error {
	if on {
		enrolled, err := s.db.TOTPEnabled(ctx, a.UserID)
		if err != nil {
			return err
		}
		if !enrolled {
			return mcpgate.Errorf(mcpgate.ETOTPEnrolment,
				"turn on two-factor sign-in for yourself first (Account settings, %s/app/account), then require it of owners and admins",
				s.opts.PublicURL)
		}
	}
	if err := s.db.SetRequireTwoFactor(ctx, a.WorkspaceID, on); err != nil {
		return err
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionWorkspaceUpdated, map[string]any{"require_two_factor": on}))
	return nil
}
