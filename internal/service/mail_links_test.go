package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/mail/mailtest"
	"github.com/mcpgate/mcpgate/internal/password"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
)

// The tests of the links the services mail to a person: password reset,
// email verification and email change.

// linkPassword is the password of the people these tests sign up.
const linkPassword = "a long password 1"

// mailEnv is the services with a real mailer sending to a real SMTP server;
// required is RequireVerifiedEmail.
func mailEnv(t *testing.T, required bool) (*servicetest.Env, *mailtest.Server) {
	t.Helper()
	var env *servicetest.Env
	m, srv := servicetest.NewMailer(t, func(r mail.Result) { env.Service.Deliveries.MailDone(r) })
	env = servicetest.New(t, service.Options{Mailer: m, RequireVerifiedEmail: required, PublicURL: "https://gw.example",
		PasswordParams: &password.Params{Time: 1, Memory: 8 * 1024, Threads: 1}})
	return env, srv
}

// mustSignup signs email up with linkPassword and returns the person and
// the token of the confirmation link mailed to them. Where addresses are
// confirmed first (RequireVerifiedEmail) the link is what makes the
// account: it is opened, and so spent.
func mustSignup(t *testing.T, env *servicetest.Env, srv *mailtest.Server, email string) (*mcpgate.User, string) {
	t.Helper()
	ctx := context.Background()
	u, err := env.Service.Accounts.Signup(ctx, email, linkPassword, "", "192.0.2.1")
	if err != nil {
		t.Fatalf("Signup(%s) err = %v", email, err)
	}
	tok := servicetest.LinkToken(t, srv.Wait(t, email, "Confirm your email"), "/verify-email")
	if u == nil {
		if u, err = env.Service.Accounts.VerifyEmail(ctx, tok); err != nil {
			t.Fatalf("VerifyEmail(sign-up link of %s) err = %v", email, err)
		}
	}
	return u, tok
}

func TestPasswordReset(t *testing.T) {
	env, srv := mailEnv(t, false)
	ctx := context.Background()
	svc := env.Service
	if _, err := svc.Accounts.Signup(ctx, "ada@example.com", "old password 123", "", "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	u, _, _ := env.DB.FindUserByEmail(ctx, "ada@example.com")
	sess, err := env.DB.CreateSession(ctx, u.ID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Accounts.RequestPasswordReset(ctx, "Ada@Example.com", "198.51.100.1"); err != nil {
		t.Fatalf("RequestPasswordReset() err = %v", err)
	}
	// An unknown address gets the same answer and no mail.
	if err := svc.Accounts.RequestPasswordReset(ctx, "nobody@example.com", "198.51.100.1"); err != nil {
		t.Fatalf("RequestPasswordReset(unknown) err = %v", err)
	}
	msg := srv.Wait(t, "ada@example.com", "Reset your password")
	tok := servicetest.LinkToken(t, msg, "/reset-password")

	if err := svc.Accounts.ResetPassword(ctx, tok, "short", false); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ResetPassword(short) err = %v, want invalid", err)
	}
	if err := svc.Accounts.ResetPassword(ctx, tok+"x", "new password 456", false); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ResetPassword(wrong token) err = %v, want invalid", err)
	}
	// The refused password did not spend the link.
	if err := svc.Accounts.ResetPassword(ctx, tok, "new password 456", false); err != nil {
		t.Fatalf("ResetPassword() err = %v", err)
	}
	if err := svc.Accounts.ResetPassword(ctx, tok, "another password 789", false); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ResetPassword(reused) err = %v, want invalid", err)
	}
	if _, err := svc.Accounts.Login(ctx, mcpgate.Credentials{Email: "ada@example.com", Password: "new password 456"}, "198.51.100.1"); err != nil {
		t.Fatalf("Login(new password) err = %v", err)
	}
	if _, err := svc.Accounts.Login(ctx, mcpgate.Credentials{Email: "ada@example.com", Password: "old password 123"}, "198.51.100.1"); err == nil {
		t.Fatal("Login(old password) succeeded")
	}
	if _, err := env.DB.FindSessionUser(ctx, sess); err == nil {
		t.Fatal("session survived the reset")
	}
	resets := 0
	for _, m := range srv.Messages() {
		if strings.Contains(m.Subject, "Reset") {
			resets++
		}
	}
	if resets != 1 {
		t.Fatalf("server got %d reset messages, want 1 (none for the unknown address)", resets)
	}
	// The send and the reset are audited, without the token.
	deadline := time.Now().Add(5 * time.Second)
	var sent, reset bool
	for time.Now().Before(deadline) && !(sent && reset) {
		sent, reset = false, false
		for _, ev := range env.Audit.Events() {
			if strings.Contains(mustJSON(t, ev), tok) {
				t.Fatalf("audit event carries the token: %+v", ev)
			}
			sent = sent || ev.Action == string(mcpgate.ActionMailSent) && ev.Arguments["kind"] == "reset" && ev.ActorID == u.ID
			reset = reset || ev.Action == string(mcpgate.ActionPasswordReset) && ev.ActorID == u.ID
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !sent || !reset {
		t.Fatalf("audit: mail sent %v, reset %v; events %+v", sent, reset, env.Audit.Events())
	}
}

func TestPasswordReset_RevokesKeys(t *testing.T) {
	env, srv := mailEnv(t, false)
	ctx := context.Background()
	u, a := env.NewUser(t, "bob@example.com")
	_, key, err := env.Service.Keys.CreateKey(ctx, a, mcpgate.NewKey{Name: "laptop"})
	if err != nil || key == "" {
		t.Fatal(err)
	}
	_, other := env.NewUser(t, "eve@example.com")
	if _, _, err := env.Service.Keys.CreateKey(ctx, other, mcpgate.NewKey{Name: "eve"}); err != nil {
		t.Fatal(err)
	}
	grants := &svcFixture{db: env.DB}
	grant, othersGrant := grants.mustGrant(t, a), grants.mustGrant(t, other)
	if err := env.Service.Accounts.RequestPasswordReset(ctx, u.Email, "198.51.100.2"); err != nil {
		t.Fatal(err)
	}
	tok := servicetest.LinkToken(t, srv.Wait(t, u.Email, "Reset"), "/reset-password")
	if err := env.Service.Accounts.ResetPassword(ctx, tok, "brand new password", true); err != nil {
		t.Fatal(err)
	}
	keys, _ := env.Service.Keys.Keys(ctx, a)
	for _, k := range keys {
		if k.RevokedAt == nil {
			t.Fatalf("key %s still live after reset with revoke", k.Name)
		}
	}
	keys, _ = env.Service.Keys.Keys(ctx, other)
	if len(keys) != 1 || keys[0].RevokedAt != nil {
		t.Fatalf("another person's keys changed: %+v", keys)
	}
	// Their OAuth grants are revoked too; another person's are not.
	if g, err := env.DB.FindGrant(ctx, a.WorkspaceID, grant); err != nil || g.RevokedAt == nil {
		t.Fatalf("grant after reset with revoke = %+v, %v; want revoked", g, err)
	}
	if g, err := env.DB.FindGrant(ctx, other.WorkspaceID, othersGrant); err != nil || g.RevokedAt != nil {
		t.Fatalf("another person's grant = %+v, %v; want live", g, err)
	}
	// The count of keys is readable: under "keys" the redaction hid it.
	if ev := env.Audit.Events(); !containsEvent(ev, mcpgate.ActionKeysRevokedAll, "grants", 1) ||
		!containsEvent(ev, mcpgate.ActionKeysRevokedAll, "count", 1) {
		t.Errorf("no %s event counting 1 key and 1 grant: %+v", mcpgate.ActionKeysRevokedAll, ev)
	}
}

func containsEvent(evs []mcpgate.AuditEvent, action mcpgate.AdminAction, arg string, want any) bool {
	for _, ev := range evs {
		if ev.Action == string(action) && ev.Arguments[arg] == want {
			return true
		}
	}
	return false
}

func TestPasswordReset_Throttled(t *testing.T) {
	env, _ := mailEnv(t, false)
	ctx := context.Background()
	env.NewUser(t, "cy@example.com")
	var err error
	for i := 0; i < 4 && err == nil; i++ {
		err = env.Service.Accounts.RequestPasswordReset(ctx, "cy@example.com", "198.51.100.3")
	}
	if mcpgate.ErrorCode(err) != mcpgate.ETooMany {
		t.Fatalf("4th request err = %v, want too many", err)
	}
	// Another address for the same email is throttled per email too, but a
	// different email from the same client is not yet.
	if err := env.Service.Accounts.RequestPasswordReset(ctx, "dee@example.com", "198.51.100.3"); err != nil {
		t.Fatalf("other email err = %v", err)
	}
}

func TestPasswordReset_NoMail(t *testing.T) {
	env := servicetest.New(t, service.Options{})
	if env.Service.Accounts.MailEnabled() {
		t.Fatal("MailEnabled() without a mailer")
	}
	err := env.Service.Accounts.RequestPasswordReset(context.Background(), "a@example.com", "x")
	if mcpgate.ErrorCode(err) != mcpgate.EUnavailable || !strings.Contains(err.Error(), "SMTP_URL") {
		t.Fatalf("err = %v, want unavailable naming SMTP_URL", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestVerifyEmail_Required(t *testing.T) {
	env, srv := mailEnv(t, true)
	ctx := context.Background()
	svc := env.Service
	owner, ownerActor := env.NewUser(t, "owner@example.com")
	// A sign-up makes no account until its link is opened.
	if u, err := svc.Accounts.Signup(ctx, "new@example.com", linkPassword, "", "192.0.2.1"); u != nil || err != nil {
		t.Fatalf("Signup() = %+v, %v; want no user yet, no error", u, err)
	}
	tok := servicetest.LinkToken(t, srv.Wait(t, "new@example.com", "Confirm your email"), "/verify-email")
	if _, err := svc.Accounts.Login(ctx, mcpgate.Credentials{Email: "new@example.com", Password: linkPassword}, "192.0.2.1"); err == nil {
		t.Fatal("Login() before the sign-up link was opened succeeded")
	}

	// A person whose address is not confirmed (an account from before the
	// instance required it) may not create keys or accept invitations.
	u, a := env.NewUser(t, "unconfirmed@example.com")
	if _, _, err := svc.Keys.CreateKey(ctx, a, mcpgate.NewKey{Name: "k"}); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Fatalf("CreateKey(unverified) err = %v, want forbidden", err)
	}
	if ok, _ := svc.Accounts.EmailVerified(ctx, u); ok {
		t.Fatal("EmailVerified() = true before the link")
	}
	if _, err := env.DB.Pool.Exec(ctx, `UPDATE users SET email_verified_at = now() WHERE id = $1`, owner.ID); err != nil {
		t.Fatal(err)
	}
	_, inv, err := svc.Workspaces.Invite(ctx, ownerActor, "unconfirmed@example.com", mcpgate.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Workspaces.AcceptInvitation(ctx, u, inv); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Fatalf("AcceptInvitation(unverified) err = %v, want forbidden", err)
	}
	if err := svc.Accounts.ResendVerification(ctx, u); err != nil {
		t.Fatal(err)
	}
	verifyTok := servicetest.LinkToken(t, srv.Wait(t, "unconfirmed@example.com", "Confirm your email"), "/verify-email")
	if _, err := svc.Accounts.VerifyEmail(ctx, verifyTok); err != nil {
		t.Fatalf("VerifyEmail() err = %v", err)
	}
	if ok, _ := svc.Accounts.EmailVerified(ctx, u); !ok {
		t.Fatal("EmailVerified() = false after the link")
	}
	if _, _, err := svc.Keys.CreateKey(ctx, a, mcpgate.NewKey{Name: "k"}); err != nil {
		t.Fatalf("CreateKey(verified) err = %v", err)
	}
	if _, err := svc.Workspaces.AcceptInvitation(ctx, u, inv); err != nil {
		t.Fatalf("AcceptInvitation(verified) err = %v", err)
	}
	if err := svc.Accounts.ResendVerification(ctx, u); mcpgate.ErrorCode(err) != mcpgate.EConflict {
		t.Fatalf("ResendVerification(verified) err = %v, want conflict", err)
	}

	// The sign-up link makes the account, confirmed, once.
	if _, err := svc.Accounts.VerifyEmail(ctx, tok+"x"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("VerifyEmail(wrong) err = %v", err)
	}
	created, err := svc.Accounts.VerifyEmail(ctx, tok)
	if err != nil || created.Email != "new@example.com" {
		t.Fatalf("VerifyEmail(sign-up link) = %+v, %v", created, err)
	}
	if _, err := svc.Accounts.VerifyEmail(ctx, tok); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("VerifyEmail(reused) err = %v, want invalid", err)
	}
	if ok, _ := svc.Accounts.EmailVerified(ctx, created); !ok {
		t.Fatal("the account a sign-up link made is not confirmed")
	}
	if _, err := svc.Accounts.Login(ctx, mcpgate.Credentials{Email: "new@example.com", Password: linkPassword}, "192.0.2.1"); err != nil {
		t.Fatalf("Login() after the sign-up link err = %v", err)
	}
}

func TestVerifyEmail_ResendThrottled(t *testing.T) {
	env, srv := mailEnv(t, false)
	ctx := context.Background()
	u, _ := mustSignup(t, env, srv, "re@example.com")
	for i := 0; i < 3; i++ {
		if err := env.Service.Accounts.ResendVerification(ctx, u); err != nil {
			t.Fatalf("resend %d err = %v", i, err)
		}
	}
	if err := env.Service.Accounts.ResendVerification(ctx, u); mcpgate.ErrorCode(err) != mcpgate.ETooMany {
		t.Fatalf("4th resend err = %v, want too many", err)
	}
}

func TestVerifyEmail_Off(t *testing.T) {
	env, srv := mailEnv(t, false)
	ctx := context.Background()
	// The link is still sent (the address can be confirmed), but nothing
	// waits for it.
	u, _ := mustSignup(t, env, srv, "off@example.com")
	wss, _ := env.Service.Workspaces.Workspaces(ctx, u)
	a, _, _ := env.Service.Workspaces.Enter(ctx, u, wss[0].ID, mcpgate.SourceAPI)
	if _, _, err := env.Service.Keys.CreateKey(ctx, a, mcpgate.NewKey{Name: "k"}); err != nil {
		t.Fatalf("CreateKey() with SIGNUP_VERIFY=off err = %v", err)
	}
}

func TestChangeEmail(t *testing.T) {
	env, srv := mailEnv(t, true)
	ctx := context.Background()
	svc := env.Service
	u, signupTok := mustSignup(t, env, srv, "old@example.com")
	env.NewUser(t, "taken@example.com")
	if err := svc.Accounts.ChangeEmail(ctx, u, "new@example.com", "wrong password", "x"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ChangeEmail(wrong password) err = %v, want invalid", err)
	}
	// A taken address answers like a free one (SIGNUP_VERIFY=required, as
	// at sign-up): its owner gets a note, not a link.
	if err := svc.Accounts.ChangeEmail(ctx, u, "taken@example.com", linkPassword, "x"); err != nil {
		t.Fatalf("ChangeEmail(taken) err = %v, want the answer of a free address", err)
	}
	srv.Wait(t, "taken@example.com", "You already have an account")
	if err := svc.Accounts.ChangeEmail(ctx, u, "New@Example.com", linkPassword, "x"); err != nil {
		t.Fatalf("ChangeEmail() err = %v", err)
	}
	tok := servicetest.LinkToken(t, srv.Wait(t, "new@example.com", "Confirm your email"), "/verify-email")
	// Nothing changed yet.
	if _, err := svc.Accounts.Login(ctx, mcpgate.Credentials{Email: "old@example.com", Password: linkPassword}, "x"); err != nil {
		t.Fatalf("Login(old address before confirming) err = %v", err)
	}
	got, err := svc.Accounts.VerifyEmail(ctx, tok)
	if err != nil || got.Email != "new@example.com" {
		t.Fatalf("VerifyEmail() = %v, %v", got, err)
	}
	notice := srv.Wait(t, "old@example.com", "email address was changed")
	if !strings.Contains(notice.Text, "new@example.com") {
		t.Fatalf("notice to the old address = %q", notice.Text)
	}
	if _, err := svc.Accounts.Login(ctx, mcpgate.Credentials{Email: "new@example.com", Password: linkPassword}, "x"); err != nil {
		t.Fatalf("Login(new address) err = %v", err)
	}
	if _, err := svc.Accounts.Login(ctx, mcpgate.Credentials{Email: "old@example.com", Password: linkPassword}, "y"); err == nil {
		t.Fatal("Login(old address) still works")
	}
	if _, err := svc.Accounts.VerifyEmail(ctx, tok); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("VerifyEmail(reused) err = %v", err)
	}
	// The signup link to the old address cannot bring it back or verify it.
	if _, err := svc.Accounts.VerifyEmail(ctx, signupTok); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("VerifyEmail(old signup link) err = %v, want invalid", err)
	}
}
