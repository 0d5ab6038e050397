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
	sub, err := s.verifyCurrentPassword(ctx, u, current, addr)
	if err != nil {
		return err
	}
	_ = s.db.ClearLoginFailures(ctx, sub.pair)
	return nil
}

// verifyCurrentPassword is checkCurrentPassword but leaves the pair's failures
// as they are when the password is right: for a change that asks a second
// secret too (turning two-factor sign-in off), only both right may clear
// them, or the right password would wipe the count of wrong codes before each
// new guess.
func (s *Service) verifyCurrentPassword(ctx context.Context, u *mcpgate.User, current, addr string) (loginSubjects, error) {
	sub := s.throttle.subjects(u.Email, addr)
	if err := s.throttle.check(ctx, sub); err != nil {
		return sub, err
	}
	_, hash, err := s.db.FindUserByEmail(ctx, u.Email)
	if err != nil {
		return sub, err
	}
	if current == "" {
		err = password.ErrMismatch
	} else {
		err = s.verifyPassword(ctx, current, hash)
	}
	if err != nil && !errors.Is(err, password.ErrMismatch) {
		return sub, err // the hashing budget is taken: 503, not a failure
	} else if err != nil {
		if err := s.throttle.fail(ctx, sub); err != nil {
			return sub, err
		}
		return sub, errWrongCurrentPassword
	}
	return sub, nil
}
