package service

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/password"
	"github.com/mcpgate/mcpgate/internal/store"
)

// Signup implements mcpgate.AccountService.
func (s *Service) Signup(ctx context.Context, email, pw, invitation string) (*mcpgate.User, error) {
	email, err := mcpgate.NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	if err := mcpgate.ValidatePassword(pw); err != nil {
		return nil, err
	}
	var invHash []byte
	if invitation != "" {
		invHash = mcpgate.HashToken(invitation)
		inv, err := s.db.FindOpenInvitation(ctx, invHash)
		if err != nil {
			return nil, err
		}
		if inv.Email != email {
			return nil, mcpgate.Errorf(mcpgate.EForbidden, "this invitation was sent to another email address")
		}
	} else if s.opts.Signup == SignupInvite {
		return nil, mcpgate.Errorf(mcpgate.EForbidden, "sign-up on this instance needs an invitation; ask a workspace admin for one")
	}
	hash, err := password.Hash(pw, s.pwParams)
	if err != nil {
		return nil, err
	}
	if s.opts.RequireVerifiedEmail {
		// Joining waits for the address to be confirmed: the person opens
		// the invitation again afterwards (see verify.go).
		invHash = nil
	}
	u, err := s.db.CreateUser(ctx, email, hash, invHash)
	if err != nil {
		return nil, err
	}
	if s.opts.Mailer != nil {
		if err := s.sendVerification(ctx, u); err != nil {
			s.log.WarnContext(ctx, "verification mail not sent at signup", "err", err)
		}
	}
	return u, nil
}

var errBadLogin = mcpgate.Errorf(mcpgate.EUnauthorized, "wrong email or password")

// dummyHash is verified when the email is unknown, so that a wrong email
// costs the same time as a wrong password and does not reveal accounts.
// It is computed on first use so that programs importing the package do not
// pay for an argon2 hash at start-up.
var dummyHash = sync.OnceValue(func() string {
	h, _ := password.Hash("dummy password for timing", password.Default)
	return h
})

// Login implements mcpgate.AccountService.
func (s *Service) Login(ctx context.Context, email, pw, addr string) (*mcpgate.User, error) {
	email, err := mcpgate.NormalizeEmail(email)
	if err != nil {
		return nil, errBadLogin
	}
	subjects := []string{"email:" + email, "addr:" + addr}
	if err := s.throttle.check(ctx, subjects); err != nil {
		return nil, err
	}
	u, hash, err := s.db.FindUserByEmail(ctx, email)
	if err != nil && mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		return nil, err
	}
	if u == nil {
		hash = dummyHash()
	}
	if password.Verify(pw, hash) != nil || u == nil {
		if err := s.db.RecordLoginFailure(ctx, s.throttle.period, subjects...); err != nil {
			return nil, err
		}
		return nil, errBadLogin
	}
	_ = s.db.ClearLoginFailures(ctx, subjects[0])
	return u, nil
}

// loginThrottle refuses logins for a subject (an email or an address) after
// too many failures in a window. The counts live in Postgres so that every
// replica enforces the same limit.
type loginThrottle struct {
	db         *store.DB
	period     time.Duration
	perEmail   int
	perAddress int
}

func (t loginThrottle) check(ctx context.Context, subjects []string) error {
	for i, sub := range subjects {
		limit := t.perEmail
		if i > 0 {
			limit = t.perAddress
		}
		n, start, err := t.db.LoginFailures(ctx, sub, t.period)
		if err != nil {
			return err
		}
		if n >= limit {
			wait := int(math.Ceil(time.Until(start.Add(t.period)).Seconds()))
			return &mcpgate.Error{Code: mcpgate.ETooMany, RetryAfter: max(wait, 1),
				Message: "too many failed logins; wait a few minutes and try again"}
		}
	}
	return nil
}
