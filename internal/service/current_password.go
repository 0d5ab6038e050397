package service

import (
	"context"
	"errors"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/password"
)

// checkCurrentPassword checks the password a signed-in person gives to
// confirm a sensitive change (email, deletion) exactly as ChangePassword
// does: under the login throttle, wrong ones counted as failed logins.
func (s *Service) checkCurrentPassword(ctx context.Context, u *mcpgate.User, current, addr string) error {
	sub := s.throttle.subjects(u.Email, addr)
	if err := s.throttle.check(ctx, sub); err != nil {
		return err
	}
	_, hash, err := s.db.FindUserByEmail(ctx, u.Email)
	if err != nil {
		return err
	}
	if current == "" {
		err = password.ErrMismatch
	} else {
		err = s.verifyPassword(ctx, current, hash)
	}
	if err != nil && !errors.Is(err, password.ErrMismatch) {
		return err // the hashing budget is taken: 503, not a failure
	} else if err != nil {
		if err := s.throttle.fail(ctx, sub); err != nil {
			return err
		}
		return errWrongCurrentPassword
	}
	_ = s.db.ClearLoginFailures(ctx, sub.pair)
	return nil
}
