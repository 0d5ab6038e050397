package service_test

import (
	"context"
	"net/url"
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

func verifyEnv(t *testing.T, required bool) (*servicetest.Env, *mailtest.Server) {
	t.Helper()
	srv := mailtest.New(t, mailtest.Options{})
	smtpSrv, _ := mail.ParseURL(srv.URL())
	m, err := mail.New(mail.Options{Server: smtpSrv, From: "noreply@example.com", Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return servicetest.New(t, service.Options{Mailer: m, RequireVerifiedEmail: required, PublicURL: "https://gw.example",
		PasswordParams: &password.Params{Time: 1, Memory: 8 * 1024, Threads: 1}}), srv
}

func verifyToken(t *testing.T, m mailtest.Message) string {
	t.Helper()
	u, err := url.Parse(m.Link(t, "/verify-email"))
	if err != nil || u.Path != "/verify-email" {
		t.Fatalf("verify link in %q", m.Text)
	}
	return u.Query().Get("token")
}

func TestVerifyEmail_Required(t *testing.T) {
	env, srv := verifyEnv(t, true)
	ctx := context.Background()
	svc := env.Service
	owner, ownerActor := env.NewUser(t, "owner@example.com")
	u, err := svc.Signup(ctx, "new@example.com", "a long password 1", "", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	wss, _ := svc.Workspaces(ctx, u)
	a, _, err := svc.Enter(ctx, u, wss[0].ID, mcpgate.SourceAPI)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateKey(ctx, a, mcpgate.NewKey{Name: "k"}); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Fatalf("CreateKey(unverified) err = %v, want forbidden", err)
	}
	if ok, _ := svc.EmailVerified(ctx, u); ok {
		t.Fatal("EmailVerified() = true before the link")
	}
	// An invitation cannot be accepted yet either.
	if _, err := env.DB.Pool.Exec(ctx, `UPDATE users SET email_verified_at = now() WHERE id = $1`, owner.ID); err != nil {
		t.Fatal(err)
	}
	_, inv, err := svc.Invite(ctx, ownerActor, "new@example.com", mcpgate.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AcceptInvitation(ctx, u, inv); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Fatalf("AcceptInvitation(unverified) err = %v, want forbidden", err)
	}

	tok := verifyToken(t, srv.Wait(t, "new@example.com", "Confirm your email"))
	if _, err := svc.VerifyEmail(ctx, tok+"x"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("VerifyEmail(wrong) err = %v", err)
	}
	if _, err := svc.VerifyEmail(ctx, tok); err != nil {
		t.Fatalf("VerifyEmail() err = %v", err)
	}
	if _, err := svc.VerifyEmail(ctx, tok); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("VerifyEmail(reused) err = %v, want invalid", err)
	}
	if ok, _ := svc.EmailVerified(ctx, u); !ok {
		t.Fatal("EmailVerified() = false after the link")
	}
	if _, _, err := svc.CreateKey(ctx, a, mcpgate.NewKey{Name: "k"}); err != nil {
		t.Fatalf("CreateKey(verified) err = %v", err)
	}
	if _, err := svc.AcceptInvitation(ctx, u, inv); err != nil {
		t.Fatalf("AcceptInvitation(verified) err = %v", err)
	}
	if err := svc.ResendVerification(ctx, u); mcpgate.ErrorCode(err) != mcpgate.EConflict {
		t.Fatalf("ResendVerification(verified) err = %v, want conflict", err)
	}
}

func TestVerifyEmail_ResendThrottled(t *testing.T) {
	env, srv := verifyEnv(t, true)
	ctx := context.Background()
	u, err := env.Service.Signup(ctx, "re@example.com", "a long password 1", "", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	srv.Wait(t, "re@example.com", "Confirm")
	for i := 0; i < 3; i++ {
		if err := env.Service.ResendVerification(ctx, u); err != nil {
			t.Fatalf("resend %d err = %v", i, err)
		}
	}
	if err := env.Service.ResendVerification(ctx, u); mcpgate.ErrorCode(err) != mcpgate.ETooMany {
		t.Fatalf("4th resend err = %v, want too many", err)
	}
}

func TestVerifyEmail_Off(t *testing.T) {
	env, srv := verifyEnv(t, false)
	ctx := context.Background()
	u, err := env.Service.Signup(ctx, "off@example.com", "a long password 1", "", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	// The link is still sent (the address can be confirmed), but nothing
	// waits for it.
	srv.Wait(t, "off@example.com", "Confirm")
	wss, _ := env.Service.Workspaces(ctx, u)
	a, _, _ := env.Service.Enter(ctx, u, wss[0].ID, mcpgate.SourceAPI)
	if _, _, err := env.Service.CreateKey(ctx, a, mcpgate.NewKey{Name: "k"}); err != nil {
		t.Fatalf("CreateKey() with SIGNUP_VERIFY=off err = %v", err)
	}
}

func TestChangeEmail(t *testing.T) {
	env, srv := verifyEnv(t, true)
	ctx := context.Background()
	svc := env.Service
	const pw = "a long password 1"
	u, err := svc.Signup(ctx, "old@example.com", pw, "", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	env.NewUser(t, "taken@example.com")
	if err := svc.ChangeEmail(ctx, u, "new@example.com", "wrong password", "x"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ChangeEmail(wrong password) err = %v, want invalid", err)
	}
	if err := svc.ChangeEmail(ctx, u, "taken@example.com", pw, "x"); mcpgate.ErrorCode(err) != mcpgate.EConflict {
		t.Fatalf("ChangeEmail(taken) err = %v, want conflict", err)
	}
	if err := svc.ChangeEmail(ctx, u, "New@Example.com", pw, "x"); err != nil {
		t.Fatalf("ChangeEmail() err = %v", err)
	}
	tok := verifyToken(t, srv.Wait(t, "new@example.com", "Confirm your email"))
	// Nothing changed yet.
	if _, err := svc.Login(ctx, "old@example.com", pw, "x"); err != nil {
		t.Fatalf("Login(old address before confirming) err = %v", err)
	}
	got, err := svc.VerifyEmail(ctx, tok)
	if err != nil || got.Email != "new@example.com" {
		t.Fatalf("VerifyEmail() = %v, %v", got, err)
	}
	notice := srv.Wait(t, "old@example.com", "email address was changed")
	if !strings.Contains(notice.Text, "new@example.com") {
		t.Fatalf("notice to the old address = %q", notice.Text)
	}
	if _, err := svc.Login(ctx, "new@example.com", pw, "x"); err != nil {
		t.Fatalf("Login(new address) err = %v", err)
	}
	if _, err := svc.Login(ctx, "old@example.com", pw, "y"); err == nil {
		t.Fatal("Login(old address) still works")
	}
	if _, err := svc.VerifyEmail(ctx, tok); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("VerifyEmail(reused) err = %v", err)
	}
	// The signup link to the old address cannot bring it back or verify it.
	old := verifyToken(t, srv.Wait(t, "old@example.com", "Confirm your email"))
	if _, err := svc.VerifyEmail(ctx, old); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("VerifyEmail(old signup link) err = %v, want invalid", err)
	}
}
