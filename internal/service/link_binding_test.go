package service_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/servicetest"
)

// A mailed link stands on the address and the password it
// was issued for, and dies when either changes (a password change, an email
// change, a reset).

func TestResetLink_DiesOnPasswordChange(t *testing.T) {
	env, srv := mailEnv(t, false)
	ctx := context.Background()
	svc := env.Service
	u, verifyTok := mustSignup(t, env, srv, "pat@example.com")
	if err := svc.Accounts.RequestPasswordReset(ctx, u.Email, "198.51.100.1"); err != nil {
		t.Fatal(err)
	}
	resetTok := servicetest.LinkToken(t, srv.Wait(t, u.Email, "Reset your password"), "/reset-password")
	if err := svc.Accounts.ChangeEmail(ctx, u, "pat2@example.com", linkPassword, "198.51.100.1"); err != nil {
		t.Fatal(err)
	}
	changeTok := servicetest.LinkToken(t, srv.Wait(t, "pat2@example.com", "Confirm your email"), "/verify-email")

	if err := svc.Accounts.ChangePassword(ctx, u, linkPassword, "the changed password 2", "198.51.100.1"); err != nil {
		t.Fatalf("ChangePassword() err = %v", err)
	}
	if err := svc.Accounts.ResetPassword(ctx, resetTok, "the attacker's password", false); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ResetPassword(link from before the password change) err = %v, want invalid", err)
	}
	// The email change asked for with the old password dies too: whoever
	// asked for it may be who the password change locked out.
	if _, err := svc.Accounts.VerifyEmail(ctx, changeTok); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("VerifyEmail(email change from before the password change) err = %v, want invalid", err)
	}
	if _, err := svc.Accounts.VerifyEmail(ctx, verifyTok); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("VerifyEmail(link from before the password change) err = %v, want invalid", err)
	}
	if _, err := svc.Accounts.Login(ctx, mcpgate.Credentials{Email: u.Email, Password: "the changed password 2"}, "198.51.100.2"); err != nil {
		t.Fatalf("Login(changed password) err = %v", err)
	}
}

func TestResetLink_DiesOnEmailChange(t *testing.T) {
	env, srv := mailEnv(t, false)
	ctx := context.Background()
	svc := env.Service
	u, _ := mustSignup(t, env, srv, "eve@example.com")
	if err := svc.Accounts.RequestPasswordReset(ctx, u.Email, "198.51.100.1"); err != nil {
		t.Fatal(err)
	}
	resetTok := servicetest.LinkToken(t, srv.Wait(t, u.Email, "Reset your password"), "/reset-password")
	if err := svc.Accounts.ChangeEmail(ctx, u, "eve2@example.com", linkPassword, "198.51.100.1"); err != nil {
		t.Fatal(err)
	}
	changeTok := servicetest.LinkToken(t, srv.Wait(t, "eve2@example.com", "Confirm your email"), "/verify-email")
	if _, err := svc.Accounts.VerifyEmail(ctx, changeTok); err != nil {
		t.Fatalf("VerifyEmail(change) err = %v", err)
	}
	// The reset link went to the old address, which is no longer the
	// account's: whoever reads that mailbox now must not get in.
	if err := svc.Accounts.ResetPassword(ctx, resetTok, "the attacker's password", false); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ResetPassword(link to the old address) err = %v, want invalid", err)
	}
	if _, err := svc.Accounts.Login(ctx, mcpgate.Credentials{Email: "eve2@example.com", Password: linkPassword}, "198.51.100.2"); err != nil {
		t.Fatalf("Login(unchanged password) err = %v", err)
	}
}

func TestResetLink_ResetSpendsEveryLink(t *testing.T) {
	env, srv := mailEnv(t, false)
	ctx := context.Background()
	svc := env.Service
	u, _ := mustSignup(t, env, srv, "rex@example.com")
	if err := svc.Accounts.ChangeEmail(ctx, u, "rex2@example.com", linkPassword, "198.51.100.1"); err != nil {
		t.Fatal(err)
	}
	changeTok := servicetest.LinkToken(t, srv.Wait(t, "rex2@example.com", "Confirm your email"), "/verify-email")
	if err := svc.Accounts.RequestPasswordReset(ctx, u.Email, "198.51.100.1"); err != nil {
		t.Fatal(err)
	}
	resetTok := servicetest.LinkToken(t, srv.Wait(t, u.Email, "Reset your password"), "/reset-password")
	if err := svc.Accounts.ResetPassword(ctx, resetTok, "a reset password 3", false); err != nil {
		t.Fatalf("ResetPassword() err = %v", err)
	}
	// Someone who had the session and asked to move the account to their
	// own address is who the reset is for: their link is spent.
	if _, err := svc.Accounts.VerifyEmail(ctx, changeTok); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("VerifyEmail(email change from before the reset) err = %v, want invalid", err)
	}
}

// TestAccountLink_BoundToPassword: the binding holds even where nothing
// deletes the links (a password set by any other path, such as SQL or a
// future route): the link is checked against the password it was issued for.
func TestAccountLink_BoundToPassword(t *testing.T) {
	env, srv := mailEnv(t, false)
	ctx := context.Background()
	svc := env.Service
	u, verifyTok := mustSignup(t, env, srv, "bo@example.com")
	if err := svc.Accounts.RequestPasswordReset(ctx, u.Email, "198.51.100.1"); err != nil {
		t.Fatal(err)
	}
	resetTok := servicetest.LinkToken(t, srv.Wait(t, u.Email, "Reset your password"), "/reset-password")
	if _, err := env.DB.Pool.Exec(ctx, `UPDATE users SET password_hash = 'another hash' WHERE id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	if err := svc.Accounts.ResetPassword(ctx, resetTok, "a reset password 3", false); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ResetPassword(after the password changed) err = %v, want invalid", err)
	}
	if _, err := svc.Accounts.VerifyEmail(ctx, verifyTok); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("VerifyEmail(after the password changed) err = %v, want invalid", err)
	}
}

// Every route that sends mail is throttled per person and
// per target address by one mechanism. Before, ten email changes to one
// address sent it ten mails.
func TestChangeEmail_MailThrottled(t *testing.T) {
	env, srv := mailEnv(t, false)
	ctx := context.Background()
	svc := env.Service
	u, _ := mustSignup(t, env, srv, "flood@example.com")
	var err error
	sent := 0
	for i := 0; i < 10 && err == nil; i++ {
		if err = svc.Accounts.ChangeEmail(ctx, u, "victim@example.com", linkPassword, "198.51.100.1"); err == nil {
			sent++
		}
	}
	if mcpgate.ErrorCode(err) != mcpgate.ETooMany || sent != 3 {
		t.Fatalf("10 email changes to one address: %d sent, then err = %v; want 3 sent, then too many", sent, err)
	}
	if mcpgate.ErrorRetryAfter(err) <= 0 {
		t.Fatalf("refusal %v carries no Retry-After", err)
	}
	// Per person: other addresses do not reset the count.
	if err := svc.Accounts.ChangeEmail(ctx, u, "other@example.com", linkPassword, "198.51.100.1"); mcpgate.ErrorCode(err) != mcpgate.ETooMany {
		t.Fatalf("4th email change to another address err = %v, want too many", err)
	}
	// Per target: another person cannot flood the same inbox either.
	v, _ := mustSignup(t, env, srv, "helper@example.com")
	if err := svc.Accounts.ChangeEmail(ctx, v, "victim@example.com", linkPassword, "198.51.100.9"); mcpgate.ErrorCode(err) != mcpgate.ETooMany {
		t.Fatalf("another person's email change to the flooded address err = %v, want too many", err)
	}
	if err := svc.Accounts.ChangeEmail(ctx, v, "fresh@example.com", linkPassword, "198.51.100.9"); err != nil {
		t.Fatalf("another person's email change elsewhere err = %v", err)
	}
	srv.Wait(t, "fresh@example.com", "Confirm your email")
	n := 0
	for _, m := range srv.Messages() {
		if m.To == "victim@example.com" {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("victim@example.com got %d mails, want 3", n)
	}
}

// Where addresses are confirmed first, a sign-up answers
// the same whether or not the address has an account (before: 409 for a
// known one); the owner of a known address is mailed instead, throttled.
func TestSignup_UniformWhereVerified(t *testing.T) {
	env, srv := mailEnv(t, true)
	ctx := context.Background()
	svc := env.Service
	known, _ := mustSignup(t, env, srv, "known@example.com")
	for _, email := range []string{"known@example.com", "fresh@example.com"} {
		if u, err := svc.Accounts.Signup(ctx, email, "someone else's pw 1", "", "198.51.100.7"); u != nil || err != nil {
			t.Fatalf("Signup(%s) = %+v, %v; want no user, no error", email, u, err)
		}
	}
	note := srv.Wait(t, "known@example.com", "You already have an account")
	if !strings.Contains(note.Text, "https://gw.example/login") {
		t.Errorf("the owner's note = %q, want a sign-in link", note.Text)
	}
	srv.Wait(t, "fresh@example.com", "Confirm your email")
	// Nothing changed for the known account: its password is its own.
	if _, err := svc.Accounts.Login(ctx, mcpgate.Credentials{Email: known.Email, Password: "someone else's pw 1"}, "198.51.100.8"); err == nil {
		t.Fatal("the second sign-up's password signs in to the known account")
	}
	if _, err := svc.Accounts.Login(ctx, mcpgate.Credentials{Email: known.Email, Password: linkPassword}, "198.51.100.8"); err != nil {
		t.Fatalf("Login(own password) err = %v", err)
	}
	// Throttled alike per target address: three sign-up mails per window
	// (known's own sign-up was the first of its three), then refused.
	for _, email := range []string{"known@example.com", "fresh@example.com"} {
		var err error
		for i := 0; i < 3 && err == nil; i++ {
			_, err = svc.Accounts.Signup(ctx, email, "someone else's pw 1", "", "198.51.100.7")
		}
		if mcpgate.ErrorCode(err) != mcpgate.ETooMany {
			t.Fatalf("4th sign-up with %s err = %v, want too many", email, err)
		}
	}
	// The mailer sends in the background: wait for the second note (the
	// refused sign-ups queued none).
	notes := func() int {
		n := 0
		for _, m := range srv.Messages() {
			if m.To == "known@example.com" && strings.Contains(m.Subject, "already have") {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); notes() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := notes(); n != 2 {
		t.Fatalf("known@example.com got %d notes, want 2", n)
	}
}

// TestChangeEmail_MailThrottledInParallel: the count and its check are one
// statement, so ten email changes at once (as from several replicas) still
// send three mails, whatever their order.
func TestChangeEmail_MailThrottledInParallel(t *testing.T) {
	env, srv := mailEnv(t, false)
	ctx := context.Background()
	u, _ := mustSignup(t, env, srv, "burst@example.com")
	var wg sync.WaitGroup
	var sent, refused atomic.Int32
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch err := env.Service.Accounts.ChangeEmail(ctx, u, "target@example.com", linkPassword, "198.51.100.1"); mcpgate.ErrorCode(err) {
			case "":
				sent.Add(1)
			case mcpgate.ETooMany:
				refused.Add(1)
			default:
				t.Errorf("ChangeEmail() err = %v", err)
			}
		}()
	}
	wg.Wait()
	if sent.Load() != 3 || refused.Load() != 7 {
		t.Fatalf("10 parallel email changes: %d sent, %d refused; want 3 and 7", sent.Load(), refused.Load())
	}
}
