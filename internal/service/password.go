package service

import (
	"context"

	"github.com/mcpgate/mcpgate"
)

// A wrong current password is EInvalid, not EUnauthorized or EForbidden:
// the session is fine, and the dashboard sends a 401 back to the login page.
var errWrongCurrentPassword = mcpgate.Errorf(mcpgate.EInvalid, "the current password is not correct")

// ChangePassword implements mcpgate.AccountService. Wrong current passwords
// count against the same throttle as logins (see loginThrottle), since
// they guess the same secret. The audit event names no password.
func (s *Accounts) ChangePassword(ctx context.Context, u *mcpgate.User, current, newPassword, addr string) error {
	if err := s.checkCurrentPassword(ctx, u, current, addr); err != nil {
		return err
	}
	if err := mcpgate.ValidatePassword(newPassword); err != nil {
		return err
	}
	if newPassword == current {
		return mcpgate.Errorf(mcpgate.EInvalid, "the new password is the same as the current one")
	}
	newHash, err := s.hashPassword(ctx, newPassword)
	if err != nil {
		return err
	}
	// SetPassword also revokes every session of the user.
	if err := s.db.SetPassword(ctx, u.ID, newHash); err != nil {
		return err
	}
	s.recordAccount(ctx, u, mcpgate.ActionPasswordChanged)
	return nil
}

// recordAccount writes an account event, which belongs to no one workspace,
// to the audit log of the person's personal workspace (else their first).
func (c *core) recordAccount(ctx context.Context, u *mcpgate.User, action mcpgate.AdminAction) {
	if ev := c.accountEvent(ctx, u, action, nil); ev != nil {
		c.record(ctx, *ev)
	}
}

// recordAccountFrom is recordAccount with arguments, for a change that came
// through source rather than the dashboard (the operator's command).
func (c *core) recordAccountFrom(ctx context.Context, u *mcpgate.User, source mcpgate.Source, action mcpgate.AdminAction, args map[string]any) {
	if ev := c.accountEvent(ctx, u, action, args); ev != nil {
		ev.Source = source
		c.record(ctx, *ev)
	}
}

// accountEvent is an account event in the person's personal workspace
// (else their first), or nil when they have none.
func (c *core) accountEvent(ctx context.Context, u *mcpgate.User, action mcpgate.AdminAction, args map[string]any) *mcpgate.AuditEvent {
	wss, err := c.db.WorkspacesOfUser(ctx, u.ID)
	if err != nil || len(wss) == 0 {
		c.log.WarnContext(ctx, "account event not audited: no workspace", "action", action, "err", err)
		return nil
	}
	ws := wss[0]
	for _, w := range wss {
		if w.Personal {
			ws = w
			break
		}
	}
	ev := mcpgate.NewAdminEvent(&mcpgate.Actor{UserID: u.ID, Email: u.Email, WorkspaceID: ws.ID, Source: mcpgate.SourceDashboard},
		action, args)
	return &ev
}
