package api_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/internal/service"
)

func TestSignup_Cookies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		publicURL  string
		wantSecure bool
		prefix     string // of both cookies' names
	}{
		{name: "http", publicURL: "http://localhost:8080", wantSecure: false},
		{name: "https", publicURL: "https://gw.example.com", wantSecure: true, prefix: "__Host-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, api.Options{PublicURL: tt.publicURL})
			c := ts.newClient(t)
			r := c.do("POST", "/api/v1/auth/signup", map[string]string{"email": "a@example.com", "password": testPassword}).
				wantStatus(t, http.StatusCreated)
			sess := r.cookie(tt.prefix + api.SessionCookie)
			if sess == nil || sess.Value == "" {
				t.Fatalf("signup set no %s cookie; Set-Cookie = %q", api.SessionCookie, r.Header.Values("Set-Cookie"))
			}
			if !sess.HttpOnly || sess.SameSite != http.SameSiteLaxMode || sess.Secure != tt.wantSecure || sess.Path != "/" {
				t.Errorf("session cookie HttpOnly=%v SameSite=%v Secure=%v Path=%q, want true, Lax, %v, /",
					sess.HttpOnly, sess.SameSite, sess.Secure, sess.Path, tt.wantSecure)
			}
			csrf := r.cookie(tt.prefix + api.CSRFCookie)
			if csrf == nil || len(csrf.Value) < 32 {
				t.Fatalf("signup set no usable %s cookie: %+v", api.CSRFCookie, csrf)
			}
			// The page's script must read the CSRF cookie to echo it.
			if csrf.HttpOnly || csrf.SameSite != http.SameSiteLaxMode || csrf.Secure != tt.wantSecure {
				t.Errorf("CSRF cookie HttpOnly=%v SameSite=%v Secure=%v, want false, Lax, %v",
					csrf.HttpOnly, csrf.SameSite, csrf.Secure, tt.wantSecure)
			}
		})
	}
}

func TestSignup_Accounts(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	first := ts.newClient(t).mustSignup("first@example.com")
	second := ts.newClient(t).mustSignup("Second@Example.com")

	if !first.User.InstanceAdmin {
		t.Errorf("first user instance_admin = false, want true")
	}
	if second.User.InstanceAdmin {
		t.Errorf("second user instance_admin = true, want false")
	}
	if second.User.Email != "second@example.com" {
		t.Errorf("email = %q, want it normalized to second@example.com", second.User.Email)
	}
	for _, me := range []*meBody{first, second} {
		if len(me.Workspaces) != 1 || !me.Workspaces[0].Personal || me.Workspaces[0].Role != mcpgate.RoleOwner {
			t.Errorf("%s workspaces = %+v, want one personal workspace with role owner", me.User.Email, me.Workspaces)
		}
	}
	if first.Workspaces[0].ID == second.Workspaces[0].ID {
		t.Errorf("both users got workspace %s", first.Workspaces[0].ID)
	}
}

func TestSignup_Refused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	ts.newClient(t).mustSignup("taken@example.com")
	creds := func(email, pw string) string {
		return `{"email":` + strconv.Quote(email) + `,"password":` + strconv.Quote(pw) + `}`
	}
	tests := []struct {
		name        string
		contentType string
		body        string
		wantStatus  int
		wantCode    mcpgate.Code
	}{
		{name: "duplicate email", body: creds("taken@example.com", testPassword), wantStatus: 409, wantCode: mcpgate.EConflict},
		{name: "duplicate email other case", body: creds("Taken@EXAMPLE.com", testPassword), wantStatus: 409, wantCode: mcpgate.EConflict},
		{name: "duplicate email with spaces", body: creds("  taken@example.com ", testPassword), wantStatus: 409, wantCode: mcpgate.EConflict},
		{name: "weak password", body: creds("new@example.com", "short"), wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "nine characters", body: creds("new@example.com", "123456789"), wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "empty password", body: creds("new@example.com", ""), wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "bad email", body: creds("not-an-email", testPassword), wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "email without domain", body: creds("a@localhost", testPassword), wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "email with display name", body: creds("A <a@example.com>", testPassword), wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "empty email", body: creds("", testPassword), wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "unknown field", body: `{"email":"new@example.com","password":"` + testPassword + `","instance_admin":true}`, wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "wrong field type", body: `{"email":1,"password":"` + testPassword + `"}`, wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "text content type", contentType: "text/plain", body: creds("new@example.com", testPassword), wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "form content type", contentType: "application/x-www-form-urlencoded", body: "email=new@example.com&password=" + testPassword, wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "no content type", contentType: "-", body: creds("new@example.com", testPassword), wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "oversized body", body: creds("new@example.com", strings.Repeat("p", 70<<10)), wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "two objects", body: creds("new@example.com", testPassword) + creds("new2@example.com", testPassword), wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "empty body", body: "", wantStatus: 400, wantCode: mcpgate.EInvalid},
		{name: "not json", body: "{email", wantStatus: 400, wantCode: mcpgate.EInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ts.newClient(t)
			req := c.newRequest("POST", "/api/v1/auth/signup", tt.body)
			switch tt.contentType {
			case "":
				req.Header.Set("Content-Type", "application/json")
			case "-":
				req.Header.Del("Content-Type")
			default:
				req.Header.Set("Content-Type", tt.contentType)
			}
			r := c.send(req).wantStatus(t, tt.wantStatus)
			if got := r.errorCode(t); got != tt.wantCode {
				t.Errorf("error code = %q, want %q", got, tt.wantCode)
			}
			if r.cookie(api.SessionCookie) != nil {
				t.Errorf("a refused signup set a session cookie")
			}
		})
	}
	if n, err := ts.db.CountUsers(context.Background()); err != nil || n != 1 {
		t.Fatalf("CountUsers() = %d, %v; want 1 (refused signups create nothing)", n, err)
	}
}

func TestSignup_InviteMode(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{}, func(o *service.Options) { o.Signup = service.SignupInvite })
	mustStoreUser(t, ts.db, "owner@example.com")
	owner := ts.newClient(t)
	ws := owner.mustLogin("owner@example.com").Workspaces[0].ID
	inv := owner.mustInvite(ws, "New@Example.com", mcpgate.RoleAdmin)

	signup := func(email, token string) *response {
		return ts.newClient(t).do("POST", "/api/v1/auth/signup",
			map[string]string{"email": email, "password": testPassword, "invitation": token})
	}
	signup("new@example.com", "").wantStatus(t, http.StatusForbidden)
	signup("other@example.com", "").wantStatus(t, http.StatusForbidden)
	signup("other@example.com", inv.Token).wantStatus(t, http.StatusForbidden)
	signup("new@example.com", "inv_bogus").wantStatus(t, http.StatusNotFound)

	var me meBody
	signup("NEW@example.com", inv.Token).wantStatus(t, http.StatusCreated).decode(t, &me)
	if got := roleIn(&me, ws); got != mcpgate.RoleAdmin {
		t.Errorf("invited user's role in %s = %q, want admin; workspaces %+v", ws, got, me.Workspaces)
	}
	if len(me.Workspaces) != 2 {
		t.Errorf("invited user has %d workspaces, want 2 (personal and the inviting one)", len(me.Workspaces))
	}
	if me.User.InstanceAdmin {
		t.Errorf("invited user is instance admin")
	}
	// Spent: a second signup with the same token is refused.
	if r := signup("new@example.com", inv.Token); r.Status < 400 {
		t.Fatalf("reused invitation signup status = %d, want a refusal", r.Status)
	}
	if n, err := ts.db.CountUsers(context.Background()); err != nil || n != 2 {
		t.Fatalf("CountUsers() = %d, %v; want 2", n, err)
	}
}

func TestLogin(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	ts.newClient(t).mustSignup("user@example.com")
	tests := []struct {
		name, email, password string
		wantStatus            int
	}{
		{name: "ok", email: "user@example.com", password: testPassword, wantStatus: 200},
		{name: "email other case", email: " USER@example.com", password: testPassword, wantStatus: 200},
		{name: "wrong password", email: "user@example.com", password: testPassword + "x", wantStatus: 401},
		{name: "empty password", email: "user@example.com", password: "", wantStatus: 401},
		{name: "unknown email", email: "nobody@example.com", password: testPassword, wantStatus: 401},
		{name: "malformed email", email: "nobody", password: testPassword, wantStatus: 401},
	}
	var messages []string
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ts.newClient(t)
			r := c.do("POST", "/api/v1/auth/login", map[string]string{"email": tt.email, "password": tt.password}).
				wantStatus(t, tt.wantStatus)
			if tt.wantStatus != 200 {
				if code := r.errorCode(t); code != mcpgate.EUnauthorized {
					t.Errorf("error code = %q, want %q", code, mcpgate.EUnauthorized)
				}
				messages = append(messages, r.message(t))
				if r.cookie(api.SessionCookie) != nil {
					t.Errorf("a failed login set a session cookie")
				}
				return
			}
			if c.cookieValue(api.SessionCookie) == "" {
				t.Fatalf("login set no session cookie")
			}
			if me := c.mustMe(); me.User.Email != "user@example.com" {
				t.Errorf("/me email = %q after login", me.User.Email)
			}
		})
	}
	// Every failure says the same thing, so the answer does not tell which
	// accounts exist.
	if msgs := slices.Compact(slices.Sorted(slices.Values(messages))); len(msgs) != 1 {
		t.Errorf("failed login messages = %q, want one message for all", messages)
	}
}

func TestLogin_ThrottledPerEmail(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	ts.newClient(t).mustSignup("user@example.com")
	ts.newClient(t).mustSignup("bystander@example.com")
	login := func(email, pw string) *response {
		return ts.newClient(t).do("POST", "/api/v1/auth/login", map[string]string{"email": email, "password": pw})
	}
	for i := range 5 {
		if r := login("user@example.com", "wrong password "+strconv.Itoa(i)); r.Status != http.StatusUnauthorized {
			t.Fatalf("failure %d: status = %d, want 401", i+1, r.Status)
		}
	}
	r := login("user@example.com", testPassword).wantStatus(t, http.StatusTooManyRequests)
	if code := r.errorCode(t); code != mcpgate.ETooMany {
		t.Errorf("error code = %q, want %q", code, mcpgate.ETooMany)
	}
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 || s > 15*60 {
		t.Errorf("Retry-After = %q, want seconds in [1, 900]", r.Header.Get("Retry-After"))
	}
	if r.cookie(api.SessionCookie) != nil {
		t.Errorf("a throttled login set a session cookie")
	}
	// The other case of the same address is the same account.
	login("USER@example.com", testPassword).wantStatus(t, http.StatusTooManyRequests)
	// Another account from the same address is not locked out.
	login("bystander@example.com", testPassword).wantStatus(t, http.StatusOK)
}

func TestLogin_SuccessClearsFailures(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	ts.newClient(t).mustSignup("user@example.com")
	for round := range 2 {
		for range 4 {
			ts.newClient(t).do("POST", "/api/v1/auth/login", map[string]string{"email": "user@example.com", "password": "wrong password"}).
				wantStatus(t, http.StatusUnauthorized)
		}
		if r := ts.newClient(t).do("POST", "/api/v1/auth/login", map[string]string{"email": "user@example.com", "password": testPassword}); r.Status != 200 {
			t.Fatalf("round %d: login after 4 failures status = %d, want 200", round, r.Status)
		}
	}
}

func TestLogin_ThrottledPerAddress(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	// 30 failures from one address, spread over 6 accounts (5 each, so that
	// the per-email limit alone would not refuse the 7th account).
	for i := range 7 {
		mustStoreUser(t, ts.db, "user"+strconv.Itoa(i)+"@example.com")
	}
	for i := range 6 {
		for range 5 {
			ts.newClient(t).do("POST", "/api/v1/auth/login", map[string]string{"email": "user" + strconv.Itoa(i) + "@example.com", "password": "wrong password"}).
				wantStatus(t, http.StatusUnauthorized)
		}
	}
	r := ts.newClient(t).do("POST", "/api/v1/auth/login", map[string]string{"email": "user6@example.com", "password": testPassword}).
		wantStatus(t, http.StatusTooManyRequests)
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
}

// A login always makes a new session: a cookie the browser had before (for
// example one planted by an attacker) never becomes the logged-in one.
func TestLogin_NewSessionEveryTime(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	c := ts.signedUp(t, "user@example.com")
	before := c.cookieValue(api.SessionCookie)
	csrfBefore := c.csrfToken()

	c.mustLogin("user@example.com")
	after := c.cookieValue(api.SessionCookie)
	if after == "" || after == before {
		t.Fatalf("session cookie after login = %q, want a new one", after)
	}
	if claimsOf(t, after).ID == claimsOf(t, before).ID {
		t.Fatalf("login reused session id %s", claimsOf(t, after).ID)
	}
	if c.csrfToken() == csrfBefore {
		t.Errorf("login kept the CSRF token")
	}
	c.mustMe()

	old := ts.newClient(t)
	old.setCookie(api.SessionCookie, before)
	old.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusUnauthorized)
}

func TestLogout_RevokesSession(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	c := ts.signedUp(t, "user@example.com")
	sess := c.cookieValue(api.SessionCookie)

	r := c.do("POST", "/api/v1/auth/logout", nil).wantStatus(t, http.StatusNoContent)
	if ck := r.cookie(api.SessionCookie); ck == nil || ck.MaxAge >= 0 || ck.Value != "" {
		t.Errorf("logout session cookie = %+v, want it cleared", ck)
	}
	if c.cookieValue(api.SessionCookie) != "" {
		t.Errorf("the browser still holds the session cookie after logout")
	}
	c.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusUnauthorized)

	// Replaying the old cookie: the server revoked the session itself.
	replay := ts.newClient(t)
	replay.setCookie(api.SessionCookie, sess)
	r = replay.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusUnauthorized)
	if code := r.errorCode(t); code != mcpgate.EUnauthorized {
		t.Errorf("error code = %q, want %q", code, mcpgate.EUnauthorized)
	}

	// Logging out without a session is harmless.
	ts.newClient(t).do("POST", "/api/v1/auth/logout", nil).wantStatus(t, http.StatusNoContent)
}

func TestMe_Shape(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	c := ts.signedUp(t, "user@example.com")
	var got map[string]any
	c.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusOK).decode(t, &got)

	keys := func(v any) []string {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%v is a %T, want an object", v, v)
		}
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	if diff := cmp.Diff([]string{"user", "workspaces"}, keys(got)); diff != "" {
		t.Errorf("/me keys (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"email", "email_verified", "id", "instance_admin", "totp_enabled"}, keys(got["user"])); diff != "" {
		t.Errorf("/me user keys (-want +got):\n%s", diff)
	}
	ws, ok := got["workspaces"].([]any)
	if !ok || len(ws) != 1 {
		t.Fatalf("/me workspaces = %v, want a list of one", got["workspaces"])
	}
	if diff := cmp.Diff([]string{"approval_four_eyes", "approval_wait_seconds", "created_at", "id", "name", "personal", "require_two_factor", "role"}, keys(ws[0])); diff != "" {
		t.Errorf("/me workspace keys (-want +got):\n%s", diff)
	}
	user := got["user"].(map[string]any)
	if user["email"] != "user@example.com" || user["id"] == "" {
		t.Errorf("/me user = %v", user)
	}
	if w := ws[0].(map[string]any); w["role"] != "owner" || w["name"] != "Personal" {
		t.Errorf("/me workspace = %v, want the personal one with role owner", w)
	}

	r := ts.newClient(t).do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusUnauthorized)
	if code := r.errorCode(t); code != mcpgate.EUnauthorized {
		t.Errorf("anonymous /me code = %q, want %q", code, mcpgate.EUnauthorized)
	}
}

func TestHealthAndRouting(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	c := ts.newClient(t)
	c.do("GET", "/healthz", nil).wantStatus(t, http.StatusOK)
	c.do("GET", "/readyz", nil).wantStatus(t, http.StatusOK)
	r := c.do("GET", "/api/v1/nothing-here", nil).wantStatus(t, http.StatusNotFound)
	if code := r.errorCode(t); code != mcpgate.ENotFound {
		t.Errorf("unknown route code = %q, want %q", code, mcpgate.ENotFound)
	}
	if r.Header.Get("X-Request-Id") == "" {
		t.Errorf("response without X-Request-Id")
	}
	if r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("API response without X-Content-Type-Options: nosniff")
	}
}
