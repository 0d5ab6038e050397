package service

import (
	"context"
	"errors"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/password"
	"github.com/mcpgate/mcpgate/internal/store"
)

// errHashingBusy is the answer when password hashing is at its memory
// budget (see password.Limiter): a clear 503 with Retry-After, rather than
// a server that swaps or is killed for running out of memory.
var errHashingBusy = &mcpgate.Error{Code: mcpgate.EUnavailable, RetryAfter: password.RetryAfter,
	Message: "the gateway is busy checking passwords; try again in a few seconds"}

// hashPassword hashes a new password within the process's hashing budget.
func (c *core) hashPassword(ctx context.Context, pw string) (string, error) {
	h, err := password.HashContext(ctx, pw, c.pwParams)
	if errors.Is(err, password.ErrBusy) {
		return "", errHashingBusy
	}
	return h, err
}

// verifyPassword checks a password against its stored hash within the
// process's hashing budget: password.ErrMismatch for a wrong one.
func (s *Service) verifyPassword(ctx context.Context, pw, hash string) error {
	err := password.VerifyContext(ctx, pw, hash)
	if errors.Is(err, password.ErrBusy) {
		return errHashingBusy
	}
	return err
}

// defaultSignupsPerAddress is how many sign-up attempts one client address
// may make per throttle window (15 minutes): enough for a team signing up
// together behind one NAT, too few to fill the database with accounts.
const defaultSignupsPerAddress = 10

// checkSignupRate counts a sign-up attempt of the address and refuses it
// past Options.SignupsPerAddress. The attempt is counted and read in one statement,
// so that a burst of parallel attempts cannot all pass.
func (s *Service) checkSignupRate(ctx context.Context, addr string) error {
	n, start, err := s.db.CountAttempt(ctx, s.throttle.period, "signup:"+addressSubject(addr))
	if err != nil {
		return err
	}
	if n > s.opts.SignupsPerAddress {
		return s.throttle.refusal(start, "too many sign-ups from your address; wait a few minutes and try again")
	}
	return nil
}

// capRefusal words a capped creation's refusal (store.ErrCapReached) with
// msg, which takes the count found; any other error is returned as it is.
// The store counts and creates in one step under a lock, so that creations
// racing at the cap, on any replicas, cannot all pass.
func capRefusal(err error, msg string, n int) error {
	if errors.Is(err, store.ErrCapReached) {
		return mcpgate.Errorf(mcpgate.EConflict, msg, n)
	}
	return err
}
