package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
)

const newPassword = "a brand new passphrase 42"

func TestPasswordChange(t *testing.T) {
	rec := &servicetest.Recorder{}
	ts := newTestServer(t, api.Options{}, func(o *service.Options) { o.Audit = rec })
	c := ts.newClient(t)
	me := c.mustSignup("pat@example.com")
	other := ts.newClient(t) // another browser of the same person
	other.mustLogin("pat@example.com")
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
	c := ts.newClient(t)
	c.mustSignup("guess@example.com")
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
