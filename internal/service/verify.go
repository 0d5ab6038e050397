package service

import (
	"context"
	"errors"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/store"
)

// verifyTTL is how long an email-verification link works.
const verifyTTL = 24 * time.Hour

var errUnverified = mcpgate.Errorf(mcpgate.EForbidden,
	"confirm your email address first: open the link we emailed you, or send a new one from Account settings")

// sendVerification emails a link that proves the user reads mail at their
// address. A mail that cannot be queued is logged, not fatal: the person
// can ask for another from their account page.
func (s *Accounts) sendVerification(ctx context.Context, u *mcpgate.User) error {
	tok, hash := newAccountToken()
	if err := s.db.CreateAccountToken(ctx, u.ID, store.TokenVerify, hash, u.Email, s.now().Add(verifyTTL)); err != nil {
		return err
	}
	return s.sendMail(ctx, u, mail.KindVerify, "/verify-email?token="+tok)
}

// requireVerified refuses a person who has not proven their address, when
// the instance requires it (SIGNUP_VERIFY=required): they may use the
// dashboard, but not accept invitations or create keys.
func (s *Service) requireVerified(ctx context.Context, userID string) error {
	if !s.opts.RequireVerifiedEmail {
		return nil
	}
	ok, err := s.db.EmailVerified(ctx, userID)
	if err != nil {
		return err
	}
	if !ok {
		return errUnverified
	}
	return nil
}

// EmailVerified implements mcpgate.AccountService.
func (s *Accounts) EmailVerified(ctx context.Context, u *mcpgate.User) (bool, error) {
	return s.db.EmailVerified(ctx, u.ID)
}

// VerifyEmail implements mcpgate.AccountService.
func (s *Accounts) VerifyEmail(ctx context.Context, token string) (*mcpgate.User, error) {
	if token == "" {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "the link is incomplete; open the link from the email again")
	}
	hash := mcpgate.HashToken(token)
	if u, err := s.db.CompleteSignup(ctx, hash); !errors.Is(err, store.ErrNoPendingSignup) {
		if err != nil {
			return nil, err
		}
		s.recordAccount(ctx, u, mcpgate.ActionEmailVerified)
		return u, nil
	}
	u, oldEmail, err := s.db.VerifyEmail(ctx, hash)
	if err != nil {
		return nil, err
	}
	if oldEmail == "" {
		s.recordAccount(ctx, u, mcpgate.ActionEmailVerified)
		return u, nil
	}
	s.recordAccount(ctx, u, mcpgate.ActionEmailChanged)
	// The old address is told, so that a takeover does not go unseen.
	old := &mcpgate.User{ID: u.ID, Email: oldEmail}
	msg, err := mail.Render(mail.KindEmailChanged, mail.Data{To: oldEmail, NewEmail: u.Email, PublicURL: s.opts.PublicURL})
	if err == nil && s.opts.Mailer != nil {
		msg.Ref = old.ID
		if err := s.opts.Mailer.Send(msg); err != nil {
			s.log.ErrorContext(ctx, "mail not queued", "kind", mail.KindEmailChanged, "err", err)
		}
	}
	return u, nil
}

// ResendVerification implements mcpgate.AccountService.
func (s *Accounts) ResendVerification(ctx context.Context, u *mcpgate.User) error {
	if s.opts.Mailer == nil {
		return mcpgate.Errorf(mcpgate.EUnavailable,
			"this gateway cannot send email: its operator has not configured SMTP_URL")
	}
	ok, err := s.db.EmailVerified(ctx, u.ID)
	if err != nil {
		return err
	}
	if ok {
		return mcpgate.Errorf(mcpgate.EConflict, "your email address is already confirmed")
	}
	if err := s.throttleMail(ctx, mailSend{kind: "verify", to: u.Email, userID: u.ID,
		refusal: "a few links were sent already; check your inbox and spam folder, or wait a few minutes"}); err != nil {
		return err
	}
	return s.sendVerification(ctx, u)
}
