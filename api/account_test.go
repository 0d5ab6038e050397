package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/internal/mail/mailtest"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
)

const newPassword = "a brand new passphrase 42"

// newMailServer is a test server whose services send mail through a real
// mailer to a test SMTP server, which it returns too.
func newMailServer(t *testing.T, edit ...func(*service.Options)) (*testServer, *mailtest.Server) {
	t.Helper()
	m, smtp := servicetest.NewMailer(t, nil)
	edit = append([]func(*service.Options){func(o *service.Options) { o.Mailer = m }}, edit...)
	return newTestServer(t, api.Options{}, edit...), smtp
}

func TestPasswordChange(t *testing.T) {
	rec := &servicetest.Recorder{}
	ts := newTestServer(t, api.Options{}, func(o *service.Options) { o.Audit = rec })
	c := ts.newClient(t)
	me := c.mustSignup("pat@example.com")
	other := ts.loggedIn(t, "pat@example.com") // another browser of the same person
	oldSession := c.cookieValue(api.SessionCookie)

	// Without the CSRF header: refused.
	req := c.newRequest("PUT", "/api/v1/me/password", map[string]string{"current_password": testPassword, "new_password": newPassword})
	c.send(req).wantStatus(t, http.StatusForbidden)

	// Wrong current password: refused, and nothing changes.
	r := c.do("PUT", "/api/v1/me/password", map[string]string{"current_password": "not my password", "new_password": newPassword}).
		wantStatus(t, http.StatusBadRequest)
	if msg := r.message(t); !strings.Contains(msg, "current password") {
		t.Errorf("wrong current password message = %q", msg)
	}
	// A new password that breaks the rule.
	c.do("PUT", "/api/v1/me/password", map[string]string{"current_password": testPassword, "new_password": "short"}).
		wantStatus(t, http.StatusBadRequest)
	other.mustMe()

	c.do("PUT", "/api/v1/me/password", map[string]string{"current_password": testPassword, "new_password": newPassword}).
		wantStatus(t, http.StatusNoContent)

	// This browser stays signed in with a new session; the other one and
	// the old session token are logged out.
	if got := c.cookieValue(api.SessionCookie); got == "" || got == oldSession {
		t.Errorf("session cookie after the change = %q, want a new one", got)
	}
	c.mustMe()
	other.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusUnauthorized)
	stale := ts.newClient(t)
	stale.setCookie(api.SessionCookie, oldSession)
	stale.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusUnauthorized)

	// Only the new password logs in.
	fresh := ts.newClient(t)
	fresh.do("POST", "/api/v1/auth/login", map[string]string{"email": "pat@example.com", "password": testPassword}).
		wantStatus(t, http.StatusUnauthorized)
	fresh.do("POST", "/api/v1/auth/login", map[string]string{"email": "pat@example.com", "password": newPassword}).
		wantStatus(t, http.StatusOK)

	// Audited once, in the personal workspace, without any password.
	var found int
	for _, ev := range rec.Events() {
		b, _ := json.Marshal(ev)
		if strings.Contains(string(b), testPassword) || strings.Contains(string(b), newPassword) {
			t.Errorf("audit event %s contains a password", b)
		}
		if ev.Action == string(mcpgate.ActionPasswordChanged) {
			found++
			if ev.ActorID != me.User.ID || ev.WorkspaceID != me.Workspaces[0].ID {
				t.Errorf("audit event = %+v, want actor %s in workspace %s", ev, me.User.ID, me.Workspaces[0].ID)
			}
		}
	}
	if found != 1 {
		t.Errorf("%d account.password_changed events, want 1", found)
	}
}

// Wrong current passwords count like failed logins: after a few, even the
// right one is refused for a while.
func TestPasswordChange_Throttled(t *testing.T) {
	ts := newTestServer(t, api.Options{})
	c := ts.signedUp(t, "guess@example.com")
	var last *response
	for range 8 {
		last = c.do("PUT", "/api/v1/me/password", map[string]string{"current_password": "wrong guess", "new_password": newPassword})
		if last.Status == http.StatusTooManyRequests {
			break
		}
		last.wantStatus(t, http.StatusBadRequest)
	}
	last.wantStatus(t, http.StatusTooManyRequests)
	if last.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	c.do("PUT", "/api/v1/me/password", map[string]string{"current_password": testPassword, "new_password": newPassword}).
		wantStatus(t, http.StatusTooManyRequests)
	c.mustMe() // still signed in: a throttled change does not log the person out
}

func TestSessions_API(t *testing.T) {
	ts := newTestServer(t, api.Options{})
	c := ts.signedUp(t, "sam@example.com")
	other := ts.loggedIn(t, "sam@example.com")
	eve := ts.signedUp(t, "eve@example.com")

	var got struct {
		Sessions []mcpgate.Session `json:"sessions"`
	}
	c.do("GET", "/api/v1/me/sessions", nil).wantStatus(t, http.StatusOK).decode(t, &got)
	if len(got.Sessions) != 2 {
		t.Fatalf("sessions = %+v, want 2", got.Sessions)
	}
	var current, otherID string
	for _, s := range got.Sessions {
		if s.Current {
			current = s.ID
		} else {
			otherID = s.ID
		}
		if s.Address == "" || s.UserAgent == "" {
			t.Errorf("session %+v lacks where it was made", s)
		}
	}
	if current == "" || otherID == "" {
		t.Fatalf("sessions = %+v, want one current", got.Sessions)
	}
	// Eve cannot end Sam's session: it does not exist for her.
	eve.do("DELETE", "/api/v1/me/sessions/"+otherID, nil).wantStatus(t, http.StatusNotFound)
	other.mustMe()
	// Without the CSRF header: refused.
	c.send(c.newRequest("DELETE", "/api/v1/me/sessions/"+otherID, nil)).wantStatus(t, http.StatusForbidden)
	c.do("DELETE", "/api/v1/me/sessions/"+otherID, nil).wantStatus(t, http.StatusNoContent)
	other.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusUnauthorized)
	c.mustMe()

	other.mustLogin("sam@example.com")
	var ended map[string]int
	c.do("DELETE", "/api/v1/me/sessions", nil).wantStatus(t, http.StatusOK).decode(t, &ended)
	if ended["ended"] != 1 {
		t.Fatalf("ended = %v, want 1", ended)
	}
	other.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusUnauthorized)
	c.mustMe()
	eve.mustMe()
}

func TestAccountDelete_API(t *testing.T) {
	ts := newTestServer(t, api.Options{})
	c := ts.signedUp(t, "del@example.com")
	c.send(c.newRequest("DELETE", "/api/v1/me", map[string]string{"current_password": testPassword})).wantStatus(t, http.StatusForbidden)
	c.do("DELETE", "/api/v1/me", map[string]string{"current_password": "wrong"}).wantStatus(t, http.StatusBadRequest)
	c.do("DELETE", "/api/v1/me", map[string]any{"current_password": testPassword, "x": 1}).wantStatus(t, http.StatusBadRequest)
	c.mustMe()
	r := c.do("DELETE", "/api/v1/me", map[string]string{"current_password": testPassword}).wantStatus(t, http.StatusNoContent)
	if ck := r.cookie(api.SessionCookie); ck == nil || ck.MaxAge >= 0 {
		t.Errorf("session cookie not cleared: %v", ck)
	}
	c.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusUnauthorized)
	ts.newClient(t).do("POST", "/api/v1/auth/login", map[string]string{"email": "del@example.com", "password": testPassword}).
		wantStatus(t, http.StatusUnauthorized)
}

func TestPasswordReset_API(t *testing.T) {
	ts, smtp := newMailServer(t, func(o *service.Options) { o.PublicURL = "https://gw.example" })
	c := ts.signedUp(t, "rae@example.com")
	other := ts.loggedIn(t, "rae@example.com")

	anon := ts.newClient(t)
	for _, email := range []string{"rae@example.com", "nobody@example.com"} {
		r := anon.do("POST", "/api/v1/auth/password-reset", map[string]string{"email": email}).wantStatus(t, http.StatusAccepted)
		var body map[string]string
		r.decode(t, &body)
		if !strings.Contains(body["status"], "If an account uses this address") {
			t.Fatalf("202 body = %v", body)
		}
	}
	anon.do("POST", "/api/v1/auth/password-reset", map[string]any{"email": "x@example.com", "extra": 1}).wantStatus(t, http.StatusBadRequest)

	tok := servicetest.LinkToken(t, smtp.Wait(t, "rae@example.com", "Reset"), "/reset-password")
	anon.do("POST", "/api/v1/auth/password-reset/confirm", map[string]string{"token": tok, "password": "short"}).wantStatus(t, http.StatusBadRequest)
	anon.do("POST", "/api/v1/auth/password-reset/confirm", map[string]any{"token": tok, "password": newPassword, "revoke_keys": true}).
		wantStatus(t, http.StatusNoContent)
	r := anon.do("POST", "/api/v1/auth/password-reset/confirm", map[string]string{"token": tok, "password": newPassword}).
		wantStatus(t, http.StatusBadRequest)
	if msg := r.message(t); !strings.Contains(msg, "already used") {
		t.Fatalf("reused link message = %q", msg)
	}
	// Every session of the person ended.
	c.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusUnauthorized)
	other.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusUnauthorized)
}

func TestPasswordReset_APIWithoutMail(t *testing.T) {
	ts := newTestServer(t, api.Options{})
	r := ts.newClient(t).do("POST", "/api/v1/auth/password-reset", map[string]string{"email": "a@example.com"}).
		wantStatus(t, http.StatusServiceUnavailable)
	if msg := r.message(t); !strings.Contains(msg, "SMTP_URL") {
		t.Fatalf("message = %q, want it to say the operator must configure SMTP_URL", msg)
	}
}

func TestVerifyEmail_API(t *testing.T) {
	ts, smtp := newMailServer(t, func(o *service.Options) { o.RequireVerifiedEmail = true })
	c := ts.newClient(t)
	// The sign-up answers 202 and signs nobody in: the link makes the account.
	r := c.do("POST", "/api/v1/auth/signup", map[string]string{"email": "val@example.com", "password": testPassword}).
		wantStatus(t, http.StatusAccepted)
	if r.cookie(api.SessionCookie) != nil {
		t.Fatal("a sign-up that waits for its link set a session cookie")
	}
	tok := servicetest.LinkToken(t, smtp.Wait(t, "val@example.com", "Confirm"), "/verify-email")
	c.do("POST", "/api/v1/auth/login", map[string]string{"email": "val@example.com", "password": testPassword}).
		wantStatus(t, http.StatusUnauthorized)
	// Another browser, signed out, can open the link.
	anon := ts.newClient(t)
	anon.do("POST", "/api/v1/auth/verify-email", map[string]string{"token": tok}).wantStatus(t, http.StatusOK)
	anon.do("POST", "/api/v1/auth/verify-email", map[string]string{"token": tok}).wantStatus(t, http.StatusBadRequest)
	c.mustLogin("val@example.com")
	var body struct {
		User map[string]any `json:"user"`
	}
	c.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusOK).decode(t, &body)
	if body.User["email_verified"] != true || body.User["totp_enabled"] != false {
		t.Fatalf("me after the link = %v", body.User)
	}
	ws := c.mustMe().Workspaces[0].ID
	c.do("POST", "/api/v1/workspaces/"+ws+"/keys", map[string]string{"name": "k"}).wantStatus(t, http.StatusCreated)
	c.do("POST", "/api/v1/me/email-verification", nil).wantStatus(t, http.StatusConflict)
}

// TestSignup_Uniform_API: where addresses are confirmed first, a
// sign-up with a known address gets exactly the answer of a new one (before:
// 409 "an account with this email already exists").
func TestSignup_Uniform_API(t *testing.T) {
	ts, smtp := newMailServer(t, func(o *service.Options) { o.RequireVerifiedEmail = true })
	if _, err := ts.db.CreateUser(context.Background(), "known@example.com", "hash", nil); err != nil {
		t.Fatal(err)
	}
	answer := func(email string) *response {
		c := ts.newClient(t)
		return c.do("POST", "/api/v1/auth/signup", map[string]string{"email": email, "password": testPassword})
	}
	known, fresh := answer("known@example.com"), answer("fresh@example.com")
	if known.Status != fresh.Status || !bytes.Equal(known.Body, fresh.Body) || known.Status != http.StatusAccepted {
		t.Fatalf("known address = %d %s, new address = %d %s; want the same 202", known.Status, known.Body, fresh.Status, fresh.Body)
	}
	for _, r := range []*response{known, fresh} {
		if len(r.Header.Values("Set-Cookie")) != 0 {
			t.Fatalf("%s set cookies: %q", r.req, r.Header.Values("Set-Cookie"))
		}
	}
	smtp.Wait(t, "known@example.com", "You already have an account")
	smtp.Wait(t, "fresh@example.com", "Confirm")
}

func TestEmailChange_API(t *testing.T) {
	ts := newTestServer(t, api.Options{})
	c := ts.signedUp(t, "ned@example.com")
	r := c.do("PUT", "/api/v1/me/email", map[string]string{"email": "ned2@example.com", "current_password": testPassword}).
		wantStatus(t, http.StatusServiceUnavailable)
	if msg := r.message(t); !strings.Contains(msg, "SMTP_URL") {
		t.Fatalf("message = %q", msg)
	}

	ts, smtp := newMailServer(t)
	c = ts.newClient(t)
	c.mustSignup("ned@example.com")
	c.do("PUT", "/api/v1/me/email", map[string]string{"email": "ned2@example.com", "current_password": "wrong"}).
		wantStatus(t, http.StatusBadRequest)
	c.do("PUT", "/api/v1/me/email", map[string]string{"email": "ned2@example.com", "current_password": testPassword}).
		wantStatus(t, http.StatusAccepted)
	smtp.Wait(t, "ned2@example.com", "Confirm")
	if got := c.mustMe(); got.User.Email != "ned@example.com" {
		t.Fatalf("email changed before confirming: %v", got.User.Email)
	}
}
