package api_test

import (
	"net/http"
	"testing"

	"github.com/mcpgate/mcpgate/api"
)

func TestAccountDelete_API(t *testing.T) {
	ts := newTestServer(t, api.Options{})
	c := ts.newClient(t)
	c.mustSignup("del@example.com")
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
