package api_test

import (
	"crypto/rand"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
)

// csrfExempt are the state-changing routes that run before a session exists.
var csrfExempt = map[string]bool{"/api/v1/auth/signup": true, "/api/v1/auth/login": true}

// stateChangingRoutes lists the router's own POST/PUT/PATCH/DELETE routes
// under /api/v1 that need the CSRF header.
func stateChangingRoutes(t *testing.T, h http.Handler) []route {
	t.Helper()
	var out []route
	for _, r := range mustRoutes(t, h) {
		if isStateChanging(r.method) && strings.HasPrefix(r.pattern, "/api/v1/") && !csrfExempt[r.pattern] {
			out = append(out, r)
		}
	}
	// Guard against a walk that finds nothing and so tests nothing.
	want := []route{
		{"POST", "/api/v1/auth/logout"},
		{"POST", "/api/v1/workspaces"},
		{"PATCH", "/api/v1/workspaces/{ws}/members/{user}"},
		{"DELETE", "/api/v1/workspaces/{ws}/members/{user}"},
		{"POST", "/api/v1/workspaces/{ws}/invitations"},
		{"DELETE", "/api/v1/workspaces/{ws}/invitations/{id}"},
		{"POST", "/api/v1/invitations/{token}/accept"},
	}
	for _, w := range want {
		found := false
		for _, r := range out {
			found = found || r == w
		}
		if !found {
			t.Fatalf("chi.Walk found %v, which lacks %s %s", out, w.method, w.pattern)
		}
	}
	return out
}

func TestCSRF_EveryStateChangingRoute(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	for _, rt := range stateChangingRoutes(t, ts.handler) {
		t.Run(rt.method+" "+rt.pattern, func(t *testing.T) {
			c := ts.newClient(t)
			me := c.mustSignup(strings.ToLower(rand.Text()) + "@example.com")
			path := fillPattern(rt.pattern, map[string]string{
				"ws": me.Workspaces[0].ID, "user": me.User.ID, "id": "7f6c2a51-33a4-4c5e-9a53-8d3b8e0c1f00",
				"token": "inv_unknown", "name": "tool", "key": "key"})
			token := c.csrfToken()
			tests := []struct {
				name   string
				header string
				cookie string // "" keeps the jar's CSRF cookie
			}{
				{name: "no header"},
				{name: "mismatched header", header: strings.Repeat("x", len(token))},
				{name: "header without cookie", header: token, cookie: "-"},
				{name: "short cookie echoed", header: "abc", cookie: "abc"},
			}
			for _, tt := range tests {
				// Cookies by hand, from a fresh browser: the session, and the
				// CSRF cookie the case asks for.
				req := c.newRequest(rt.method, path, "{}")
				req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: c.cookieValue(api.SessionCookie)})
				switch tt.cookie {
				case "":
					req.AddCookie(&http.Cookie{Name: api.CSRFCookie, Value: token})
				case "-":
				default:
					req.AddCookie(&http.Cookie{Name: api.CSRFCookie, Value: tt.cookie})
				}
				if tt.header != "" {
					req.Header.Set(api.CSRFHeader, tt.header)
				}
				r := ts.newClient(t).send(req)
				if r.Status != http.StatusForbidden {
					t.Fatalf("%s: status = %d, want 403; body %s", tt.name, r.Status, r.Body)
				}
				if code := r.errorCode(t); code != mcpgate.EForbidden {
					t.Errorf("%s: error code = %q, want %q", tt.name, code, mcpgate.EForbidden)
				}
			}
			// The session survived every refused request, and the right header
			// gets past the CSRF check (whatever the handler then answers).
			c.mustMe()
			if r := c.do(rt.method, path, "{}"); r.Status == http.StatusForbidden {
				t.Fatalf("with the CSRF header: status = 403; body %s", r.Body)
			}
		})
	}
}

// Without a session cookie there is nothing to forge: signup and login need
// no CSRF header, and other routes answer 401.
func TestCSRF_NoSessionCookie(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	c := ts.newClient(t)
	req := c.newRequest("POST", "/api/v1/auth/signup", map[string]string{"email": "a@example.com", "password": testPassword})
	c.send(req).wantStatus(t, http.StatusCreated)
	anon := ts.newClient(t)
	anon.send(anon.newRequest("POST", "/api/v1/workspaces", map[string]string{"name": "x"})).wantStatus(t, http.StatusUnauthorized)
}
