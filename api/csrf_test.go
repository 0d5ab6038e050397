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
			// The token of another session (the attacker's own, say),
			// planted as the victim's cookie and echoed: a double-submit
			// check let it through, a token bound to the session does not.
			other := ts.newClient(t)
			other.mustSignup(strings.ToLower(rand.Text()) + "@example.com")
			planted := other.csrfToken()
			tests := []struct {
				name   string
				header string
				cookie string // "" keeps the jar's CSRF cookie
			}{
				{name: "no header"},
				{name: "mismatched header", header: strings.Repeat("x", len(token))},
				{name: "no header, no cookie", cookie: "-"},
				{name: "short cookie echoed", header: "abc", cookie: "abc"},
				{name: "another session's token planted", header: planted, cookie: planted},
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

// TestSessionCookies_HostPrefix: where PUBLIC_URL is https the session and
// CSRF cookies are __Host- cookies (Secure, Path=/, no Domain), which no
// http page or sibling subdomain can set; a session under the name without
// the prefix, which could have been planted, is not taken.
func TestSessionCookies_HostPrefix(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{PublicURL: "https://gw.example"})
	c := ts.newClient(t) // its jar sends no Secure cookie over http: cookies by hand
	r := c.send(c.newRequest("POST", "/api/v1/auth/signup", map[string]string{"email": "host@example.com", "password": testPassword}))
	r.wantStatus(t, http.StatusCreated)
	sess, csrf := r.cookie("__Host-"+api.SessionCookie), r.cookie("__Host-"+api.CSRFCookie)
	for _, ck := range []*http.Cookie{sess, csrf} {
		if ck == nil {
			t.Fatalf("signup set no __Host- cookies: %q", r.Header.Values("Set-Cookie"))
		}
		if !ck.Secure || ck.Path != "/" || ck.Domain != "" || ck.Value == "" {
			t.Fatalf("cookie %+v, want Secure, Path=/, no Domain", ck)
		}
	}
	if !sess.HttpOnly || csrf.HttpOnly {
		t.Fatalf("HttpOnly: session %v, csrf %v; want true, false", sess.HttpOnly, csrf.HttpOnly)
	}
	if r.cookie(api.SessionCookie) != nil || r.cookie(api.CSRFCookie) != nil {
		t.Fatalf("cookies without the prefix were set too: %q", r.Header.Values("Set-Cookie"))
	}
	send := func(method, path, cookie string, csrfHeader string) *response {
		req := c.newRequest(method, path, map[string]string{"name": "Team"})
		req.AddCookie(&http.Cookie{Name: cookie, Value: sess.Value})
		if csrfHeader != "" {
			req.Header.Set(api.CSRFHeader, csrfHeader)
		}
		return ts.newClient(t).send(req)
	}
	send("GET", "/api/v1/me", "__Host-"+api.SessionCookie, "").wantStatus(t, http.StatusOK)
	send("GET", "/api/v1/me", api.SessionCookie, "").wantStatus(t, http.StatusUnauthorized)
	send("POST", "/api/v1/workspaces", "__Host-"+api.SessionCookie, "").wantStatus(t, http.StatusForbidden)
	send("POST", "/api/v1/workspaces", "__Host-"+api.SessionCookie, csrf.Value).wantStatus(t, http.StatusCreated)
	out := send("POST", "/api/v1/auth/logout", "__Host-"+api.SessionCookie, csrf.Value).wantStatus(t, http.StatusNoContent)
	if ck := out.cookie("__Host-" + api.SessionCookie); ck == nil || ck.MaxAge >= 0 || !ck.Secure {
		t.Fatalf("logout did not expire the __Host- session cookie: %q", out.Header.Values("Set-Cookie"))
	}
}

// TestCSRF_PagesGetTheSessionToken: the session layer in front of the
// dashboard's pages (and the OAuth consent page) hands them the session's
// token, and mends a browser's CSRF cookie that is not it (planted, or from
// before tokens were bound to sessions).
func TestCSRF_PagesGetTheSessionToken(t *testing.T) {
	t.Parallel()
	var seen string
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = mcpgate.CSRFTokenFromContext(r.Context()) })
	ts := newTestServer(t, api.Options{Web: page})
	c := ts.signedUp(t, "pages@example.com")
	token := c.csrfToken()
	c.send(c.newRequest("GET", "/app", nil)).wantStatus(t, http.StatusOK)
	if seen != token {
		t.Fatalf("page saw CSRF token %q, want the session's %q", seen, token)
	}
	c.setCookie(api.CSRFCookie, strings.Repeat("p", 43))
	r := c.send(c.newRequest("GET", "/app", nil)).wantStatus(t, http.StatusOK)
	if ck := r.cookie(api.CSRFCookie); ck == nil || ck.Value != token {
		t.Fatalf("a planted CSRF cookie was not replaced by the session's: %q", r.Header.Values("Set-Cookie"))
	}
	// Signed out, a page gets no token.
	anon := ts.newClient(t)
	anon.send(anon.newRequest("GET", "/app", nil)).wantStatus(t, http.StatusOK)
	if seen != "" {
		t.Fatalf("a signed-out page saw CSRF token %q", seen)
	}
}
