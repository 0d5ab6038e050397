package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/mail/mailtest"
	"github.com/mcpgate/mcpgate/internal/service"
)

func TestPasswordReset_API(t *testing.T) {
	smtp := mailtest.New(t, mailtest.Options{})
	srv, _ := mail.ParseURL(smtp.URL())
	m, err := mail.New(mail.Options{Server: srv, From: "noreply@example.com", Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	ts := newTestServer(t, api.Options{}, func(o *service.Options) { o.Mailer = m; o.PublicURL = "https://gw.example" })
	c := ts.newClient(t)
	c.mustSignup("rae@example.com")
	other := ts.newClient(t)
	other.mustLogin("rae@example.com")

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

	link := smtp.Wait(t, "rae@example.com", "Reset").Link(t, "/reset-password")
	u, _ := url.Parse(link)
	tok := u.Query().Get("token")
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
	smtp := mailtest.New(t, mailtest.Options{})
	srv, _ := mail.ParseURL(smtp.URL())
	m, err := mail.New(mail.Options{Server: srv, From: "noreply@example.com", Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	ts := newTestServer(t, api.Options{}, func(o *service.Options) { o.Mailer = m; o.RequireVerifiedEmail = true })
	c := ts.newClient(t)
	c.mustSignup("val@example.com")
	me := func() map[string]any {
		var body struct {
			User map[string]any `json:"user"`
		}
		c.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusOK).decode(t, &body)
		return body.User
	}
	if u := me(); u["email_verified"] != false || u["totp_enabled"] != false {
		t.Fatalf("me before verifying = %v", u)
	}
	ws := c.mustMe().Workspaces[0].ID
	c.do("POST", "/api/v1/workspaces/"+ws+"/keys", map[string]string{"name": "k"}).wantStatus(t, http.StatusForbidden)
	link := smtp.Wait(t, "val@example.com", "Confirm").Link(t, "/verify-email")
	u, _ := url.Parse(link)
	// Another browser, signed out, can open the link.
	anon := ts.newClient(t)
	anon.do("POST", "/api/v1/auth/verify-email", map[string]string{"token": u.Query().Get("token")}).wantStatus(t, http.StatusOK)
	anon.do("POST", "/api/v1/auth/verify-email", map[string]string{"token": u.Query().Get("token")}).wantStatus(t, http.StatusBadRequest)
	if u := me(); u["email_verified"] != true {
		t.Fatalf("me after verifying = %v", u)
	}
	c.do("POST", "/api/v1/workspaces/"+ws+"/keys", map[string]string{"name": "k"}).wantStatus(t, http.StatusCreated)
	c.do("POST", "/api/v1/me/email-verification", nil).wantStatus(t, http.StatusConflict)
}

func TestEmailChange_API(t *testing.T) {
	ts := newTestServer(t, api.Options{})
	c := ts.newClient(t)
	c.mustSignup("ned@example.com")
	r := c.do("PUT", "/api/v1/me/email", map[string]string{"email": "ned2@example.com", "current_password": testPassword}).
		wantStatus(t, http.StatusServiceUnavailable)
	if msg := r.message(t); !strings.Contains(msg, "SMTP_URL") {
		t.Fatalf("message = %q", msg)
	}

	smtp := mailtest.New(t, mailtest.Options{})
	srv, _ := mail.ParseURL(smtp.URL())
	m, err := mail.New(mail.Options{Server: srv, From: "noreply@example.com", Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	ts = newTestServer(t, api.Options{}, func(o *service.Options) { o.Mailer = m })
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
