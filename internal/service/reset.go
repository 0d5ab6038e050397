package service

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/store"
)

// Mailer queues email; *mail.Mailer is one. Send must not wait for the mail
// server, so that a request's timing says nothing about the address.
type Mailer interface {
	Send(*mail.Message) error
	// SendDurable queues a message that carries no credential where it
	// outlives a stop (the outbox), for mails a person waits on.
	SendDurable(context.Context, *mail.Message) error
}

// resetTTL is how long a password-reset link works.
const resetTTL = 30 * time.Minute

var errNoMail = mcpgate.Errorf(mcpgate.EUnavailable,
	"this gateway cannot send email: its operator has not configured SMTP_URL. Ask them to set it, "+
		"or to reset your password with `mcpgate user reset-password`")

// MailEnabled implements mcpgate.AccountService.
func (s *Accounts) MailEnabled() bool { return s.opts.Mailer != nil }

// EmailVerificationRequired implements mcpgate.AccountService: the setting
// requireVerified enforces.
func (s *Accounts) EmailVerificationRequired() bool { return s.opts.RequireVerifiedEmail }

// newAccountToken returns a random token for an emailed link and the hash
// that is stored. The token is 32 random bytes: unguessable, so it needs no
// signature; the row says whose it is, what for and until when, and spending
// it is one UPDATE.
func newAccountToken() (string, []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	tok := base64.RawURLEncoding.EncodeToString(b)
	return tok, mcpgate.HashToken(tok)
}

// RequestPasswordReset implements mcpgate.AccountService. An unknown address
// gets the same answer as a known one; the mail goes out in the background.
func (s *Accounts) RequestPasswordReset(ctx context.Context, email, addr string) error {
	if s.opts.Mailer == nil {
		return errNoMail
	}
	email, err := mcpgate.NormalizeEmail(email)
	if err != nil {
		return err
	}
	// Counted before the address is looked up: see throttleMail.
	if err := s.throttleMail(ctx, mailSend{kind: "reset", to: email, client: addr,
		refusal: "too many reset requests; wait a few minutes and check your inbox (and spam folder) first"}); err != nil {
		return err
	}
	u, _, err := s.db.FindUserByEmail(ctx, email)
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
		return nil
	}
	if err != nil {
		return err
	}
	tok, hash := newAccountToken()
	if err := s.db.CreateAccountToken(ctx, u.ID, store.TokenReset, hash, u.Email, s.now().Add(resetTTL)); err != nil {
		return err
	}
	return s.sendMail(ctx, u, mail.KindReset, "/reset-password?token="+tok)
}

// sendMail renders a message with a link to the dashboard and queues it.
func (s *Accounts) sendMail(ctx context.Context, u *mcpgate.User, kind mail.Kind, path string) error {
	msg, err := mail.Render(kind, mail.Data{To: u.Email, Link: s.opts.PublicURL + path, PublicURL: s.opts.PublicURL})
	if err != nil {
		return err
	}
	msg.Ref = u.ID
	if err := s.opts.Mailer.Send(msg); err != nil {
		s.log.ErrorContext(ctx, "mail not queued", "kind", kind, "err", err)
		return mcpgate.Errorf(mcpgate.EUnavailable, "the email could not be sent just now; try again in a few minutes")
	}
	return nil
}

// ResetPassword implements mcpgate.AccountService.
func (s *Accounts) ResetPassword(ctx context.Context, token, newPassword string, revokeKeys bool) error {
	if token == "" {
		return mcpgate.Errorf(mcpgate.EInvalid, "the reset link is incomplete; open the link from the email again")
	}
	// The password is checked before the token is spent, so a refused
	// password leaves the link usable.
	if err := mcpgate.ValidatePassword(newPassword); err != nil {
		return err
	}
	hash, err := s.hashPassword(ctx, newPassword)
	if err != nil {
		return err
	}
	u, err := s.db.ResetPassword(ctx, mcpgate.HashToken(token), hash)
	if err != nil {
		return err
	}
	_ = s.db.ClearLoginFailures(ctx, "email:"+u.Email)
	s.recordAccount(ctx, u, mcpgate.ActionPasswordReset)
	// Two-factor sign-in is left as it is: the link proves the mailbox, not
	// the second factor, so a reset alone must not switch it off.
	if revokeKeys {
		_, err = s.revokeCredentials(ctx, u, mcpgate.SourceDashboard)
	}
	return err
}

// revokeCredentials revokes every MCP key and OAuth grant of the person, in
// every workspace, and audits it as coming from source. The store tells
// every replica, whose caches drop them at once.
func (c *core) revokeCredentials(ctx context.Context, u *mcpgate.User, source mcpgate.Source) (RevokedCredentials, error) {
	var r RevokedCredentials
	var err error
	if r.Keys, err = c.db.RevokeKeysOfUser(ctx, u.ID); err != nil {
		return r, err
	}
	if r.Grants, err = c.db.RevokeGrantsOfUser(ctx, u.ID); err != nil {
		return r, err
	}
	c.recordAccountFrom(ctx, u, source, mcpgate.ActionKeysRevokedAll, map[string]any{"count": r.Keys, "grants": r.Grants})
	return r, nil
}
