package service

import (
	"context"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/password"
)

// DeleteAccount implements mcpgate.AccountService. The current password is
// checked under the login throttle. Each shared workspace the person leaves
// records the deletion with no actor (the user row is gone by the time the
// audit writer inserts it, and the event must not point at it).
func (s *Service) DeleteAccount(ctx context.Context, u *mcpgate.User, current, addr string) error {
	subjects := []string{"email:" + u.Email, "addr:" + addr}
	if err := s.throttle.check(ctx, subjects); err != nil {
		return err
	}
	_, hash, err := s.db.FindUserByEmail(ctx, u.Email)
	if err != nil {
		return err
	}
	if current == "" || password.Verify(current, hash) != nil {
		if err := s.db.RecordLoginFailure(ctx, s.throttle.period, subjects...); err != nil {
			return err
		}
		return errWrongCurrentPassword
	}
	left, err := s.db.DeleteUser(ctx, u.ID)
	if err != nil {
		return err
	}
	_ = s.db.ClearLoginFailures(ctx, subjects[0])
	for _, ws := range left {
		s.record(ctx, mcpgate.AuditEvent{WorkspaceID: ws, Kind: mcpgate.KindAdmin, Action: string(mcpgate.ActionAccountDeleted),
			Arguments: map[string]any{"user_id": u.ID}, Outcome: mcpgate.OutcomeOK, Source: mcpgate.SourceAPI})
	}
	return nil
}
