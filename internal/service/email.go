package service

import (
	"context"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/store"
)

// ChangeEmail implements mcpgate.AccountService. Nothing changes until the
// link sent to the new address is opened (VerifyEmail); then the old
// address is told. Where SIGNUP_VERIFY=required, an address that has an
// account answers like any other (its owner gets a note), as sign-up does. The current password is checked under the login
// throttle, as in ChangePassword.
func (s *Accounts) ChangeEmail(ctx context.Context, u *mcpgate.User, newEmail, current, addr string) error {
	if s.opts.Mailer == nil {
		return mcpgate.Errorf(mcpgate.EUnavailable,
			"this gateway cannot send email, so a new address cannot be confirmed: its operator has not configured SMTP_URL")
	}
	newEmail, err := mcpgate.NormalizeEmail(newEmail)
	if err != nil {
		return err
	}
	if err := s.checkCurrentPassword(ctx, u, current, addr); err != nil {
		return err
	}
	if newEmail == u.Email {
		return mcpgate.Errorf(mcpgate.EInvalid, "this is already your email address")
	}
	if err := s.throttleMail(ctx, mailSend{kind: "email_change", to: newEmail, userID: u.ID,
		refusal: "a few confirmation links were sent already; check that inbox (and its spam folder), or wait a few minutes"}); err != nil {
		return err
	}
	if owner, _, err := s.db.FindUserByEmail(ctx, newEmail); err == nil {
		if s.opts.RequireVerifiedEmail {
			// As at sign-up (signupByLink): the answer does not say the
			// address has an account; its owner is told instead.
			return s.sendMail(ctx, owner, mail.KindAccountExists, "/login")
		}
		return mcpgate.Errorf(mcpgate.EConflict, "an account with this email already exists")
	} else if mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		return err
	}
	tok, tokHash := newAccountToken()
	if err := s.db.CreateAccountToken(ctx, u.ID, store.TokenEmailChange, tokHash, newEmail, s.now().Add(verifyTTL)); err != nil {
		return err
	}
	to := *u
	to.Email = newEmail
	return s.sendMail(ctx, &to, mail.KindVerify, "/verify-email?token="+tok)
}
