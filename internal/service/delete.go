package service

import (
	"context"

	"github.com/mcpgate/mcpgate"
)

// DeleteAccount implements mcpgate.AccountService. The current password is
// checked under the login throttle. Each shared workspace the person leaves
// records the deletion with no actor (the user row is gone by the time the
// audit writer inserts it, and the event must not point at it).
func (s *Accounts) DeleteAccount(ctx context.Context, u *mcpgate.User, current, addr string) error {
	if err := s.checkCurrentPassword(ctx, u, current, addr); err != nil {
		return err
	}
	left, err := s.db.DeleteUser(ctx, u.ID)
	if err != nil {
		return err
	}
	for _, ws := range left {
		s.record(ctx, mcpgate.AuditEvent{WorkspaceID: ws, Kind: mcpgate.KindAdmin, Action: string(mcpgate.ActionAccountDeleted),
			Arguments: map[string]any{"user_id": u.ID}, Outcome: mcpgate.OutcomeOK, Source: mcpgate.SourceAPI})
	}
	return nil
}
