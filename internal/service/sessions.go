package service

import (
	"context"

	"github.com/mcpgate/mcpgate"
)

// Sessions implements mcpgate.AccountService. The store query is by the
// person's own id: there is no way to name another person's sessions.
func (s *Accounts) Sessions(ctx context.Context, u *mcpgate.User, currentID string) ([]mcpgate.Session, error) {
	list, err := s.db.SessionsOfUser(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	for i := range list {
		list[i].Current = list[i].ID == currentID
	}
	return list, nil
}

// EndSession implements mcpgate.AccountService.
func (s *Accounts) EndSession(ctx context.Context, u *mcpgate.User, id string) error {
	if err := s.db.RevokeUserSession(ctx, u.ID, id); err != nil {
		return err
	}
	if ev := s.accountEvent(ctx, u, mcpgate.ActionSessionsEnded, map[string]any{"sessions": 1}); ev != nil {
		s.record(ctx, *ev)
	}
	return nil
}

// EndOtherSessions implements mcpgate.AccountService.
func (s *Accounts) EndOtherSessions(ctx context.Context, u *mcpgate.User, currentID string) (int, error) {
	n, err := s.db.RevokeOtherSessions(ctx, u.ID, currentID)
	if err != nil {
		return 0, err
	}
	if ev := s.accountEvent(ctx, u, mcpgate.ActionSessionsEnded, map[string]any{"sessions": n}); ev != nil {
		s.record(ctx, *ev)
	}
	return n, nil
}
