package service_test

import (
	"context"
	"encoding/json"
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

// mailEnv is the services with a real mailer sending to a real SMTP server.
func mailEnv(t *testing.T) (*servicetest.Env, *mailtest.Server) {
	t.Helper()
	srv := mailtest.New(t, mailtest.Options{})
	smtpSrv, err := mail.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	var env *servicetest.Env
	m, err := mail.New(mail.Options{Server: smtpSrv, From: "noreply@example.com", Backoff: 10 * time.Millisecond,
		Done: func(r mail.Result) { env.Service.MailDone(r) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	env = servicetest.New(t, service.Options{Mailer: m, PublicURL: "https://gw.example", PasswordParams: &password.Params{Time: 1, Memory: 8 * 1024, Threads: 1}})
	return env, srv
}

func resetToken(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil || u.Path != "/reset-password" {
		t.Fatalf("reset link = %q", link)
	}
	return u.Query().Get("token")
}

func TestPasswordReset(t *testing.T) {
	env, srv := mailEnv(t)
	ctx := context.Background()
	svc := env.Service
	if _, err := svc.Signup(ctx, "ada@example.com", "old password 123", "", "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	u, _, _ := env.DB.FindUserByEmail(ctx, "ada@example.com")
	sess, err := env.DB.CreateSession(ctx, u.ID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.RequestPasswordReset(ctx, "Ada@Example.com", "198.51.100.1"); err != nil {
		t.Fatalf("RequestPasswordReset() err = %v", err)
	}
	// An unknown address gets the same answer and no mail.
	if err := svc.RequestPasswordReset(ctx, "nobody@example.com", "198.51.100.1"); err != nil {
		t.Fatalf("RequestPasswordReset(unknown) err = %v", err)
	}
	msg := srv.Wait(t, "ada@example.com", "Reset your password")
	tok := resetToken(t, msg.Link(t, "/reset-password"))

	if err := svc.ResetPassword(ctx, tok, "short", false); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ResetPassword(short) err = %v, want invalid", err)
	}
	if err := svc.ResetPassword(ctx, tok+"x", "new password 456", false); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ResetPassword(wrong token) err = %v, want invalid", err)
	}
	// The refused password did not spend the link.
	if err := svc.ResetPassword(ctx, tok, "new password 456", false); err != nil {
		t.Fatalf("ResetPassword() err = %v", err)
	}
	if err := svc.ResetPassword(ctx, tok, "another password 789", false); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ResetPassword(reused) err = %v, want invalid", err)
	}
	if _, err := svc.Login(ctx, "ada@example.com", "new password 456", "198.51.100.1"); err != nil {
		t.Fatalf("Login(new password) err = %v", err)
	}
	if _, err := svc.Login(ctx, "ada@example.com", "old password 123", "198.51.100.1"); err == nil {
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
	env, srv := mailEnv(t)
	ctx := context.Background()
	u, a := env.NewUser(t, "bob@example.com")
	_, key, err := env.Service.CreateKey(ctx, a, mcpgate.NewKey{Name: "laptop"})
	if err != nil || key == "" {
		t.Fatal(err)
	}
	_, other := env.NewUser(t, "eve@example.com")
	if _, _, err := env.Service.CreateKey(ctx, other, mcpgate.NewKey{Name: "eve"}); err != nil {
		t.Fatal(err)
	}
	if err := env.Service.RequestPasswordReset(ctx, u.Email, "198.51.100.2"); err != nil {
		t.Fatal(err)
	}
	tok := resetToken(t, srv.Wait(t, u.Email, "Reset").Link(t, "/reset-password"))
	if err := env.Service.ResetPassword(ctx, tok, "brand new password", true); err != nil {
		t.Fatal(err)
	}
	keys, _ := env.Service.Keys(ctx, a)
	for _, k := range keys {
		if k.RevokedAt == nil {
			t.Fatalf("key %s still live after reset with revoke", k.Name)
		}
	}
	keys, _ = env.Service.Keys(ctx, other)
	if len(keys) != 1 || keys[0].RevokedAt != nil {
		t.Fatalf("another person's keys changed: %+v", keys)
	}
}

func TestPasswordReset_Throttled(t *testing.T) {
	env, _ := mailEnv(t)
	ctx := context.Background()
	env.NewUser(t, "cy@example.com")
	var err error
	for i := 0; i < 4 && err == nil; i++ {
		err = env.Service.RequestPasswordReset(ctx, "cy@example.com", "198.51.100.3")
	}
	if mcpgate.ErrorCode(err) != mcpgate.ETooMany {
		t.Fatalf("4th request err = %v, want too many", err)
	}
	// Another address for the same email is throttled per email too, but a
	// different email from the same client is not yet.
	if err := env.Service.RequestPasswordReset(ctx, "dee@example.com", "198.51.100.3"); err != nil {
		t.Fatalf("other email err = %v", err)
	}
}

func TestPasswordReset_NoMail(t *testing.T) {
	env := servicetest.New(t, service.Options{})
	if env.Service.MailEnabled() {
		t.Fatal("MailEnabled() without a mailer")
	}
	err := env.Service.RequestPasswordReset(context.Background(), "a@example.com", "x")
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
