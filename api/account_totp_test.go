package api_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/service"
)

// totpStep is how far the tests move the clock to reach the next TOTP code:
// codes are per 30-second step, and a step is accepted once.
const totpStep = 30 * time.Second

func newTOTPServer(t *testing.T) (*testServer, *e2bsim.ManualClock) {
	t.Helper()
	clk := e2bsim.NewManualClock(time.Unix(time.Now().Unix()/30*30+15, 0))
	return newTestServer(t, api.Options{}, func(o *service.Options) { o.Now = clk.Now }), clk
}

type enrolmentBody struct {
	Secret     string `json:"secret"`
	OTPAuthURL string `json:"otpauth_url"`
	QRPNG      string `json:"qr_png"`
	Issuer     string `json:"issuer"`
	Account    string `json:"account"`
}

type meTOTP struct {
	User struct {
		TOTPEnabled bool `json:"totp_enabled"`
	} `json:"user"`
}

func (c *client) totpEnabled() bool {
	c.t.Helper()
	var me meTOTP
	c.do("GET", "/api/v1/me", nil).wantStatus(c.t, http.StatusOK).decode(c.t, &me)
	return me.User.TOTPEnabled
}

func currentCode(t *testing.T, secret string, clk *e2bsim.ManualClock) string {
	t.Helper()
	c, err := totp.GenerateCode(secret, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mustEnrol turns two-factor sign-in on for c's person and returns the
// secret and the recovery codes.
func (c *client) mustEnrol(clk *e2bsim.ManualClock) (string, []string) {
	c.t.Helper()
	var en enrolmentBody
	c.do("POST", "/api/v1/me/totp", map[string]string{"current_password": testPassword}).wantStatus(c.t, http.StatusCreated).decode(c.t, &en)
	var rc struct {
		RecoveryCodes []string `json:"recovery_codes"`
	}
	c.do("POST", "/api/v1/me/totp/confirm", map[string]string{"code": currentCode(c.t, en.Secret, clk)}).
		wantStatus(c.t, http.StatusOK).decode(c.t, &rc)
	return en.Secret, rc.RecoveryCodes
}

func TestTOTP_API(t *testing.T) {
	ts, clk := newTOTPServer(t)
	c := ts.newClient(t)
	c.mustSignup("ada@example.com")
	var bodies []*response // every answer but enrolment's and confirmation's
	keep := func(r *response) *response { bodies = append(bodies, r); return r }

	if c.totpEnabled() {
		t.Fatal("totp_enabled before enrolment = true")
	}
	// CSRF, bounded and strict bodies, the password.
	c.send(c.newRequest("POST", "/api/v1/me/totp", map[string]string{"current_password": testPassword})).wantStatus(t, http.StatusForbidden)
	keep(c.do("POST", "/api/v1/me/totp", `{"current_password":"`+strings.Repeat("p", 70<<10)+`"}`)).wantStatus(t, http.StatusBadRequest)
	keep(c.do("POST", "/api/v1/me/totp", map[string]string{"current_password": testPassword, "secret": "mine"})).wantStatus(t, http.StatusBadRequest)
	keep(c.do("POST", "/api/v1/me/totp", map[string]string{"current_password": "not my password"})).wantStatus(t, http.StatusBadRequest)
	keep(c.do("POST", "/api/v1/me/totp/confirm", map[string]string{"code": "123456"})).wantStatus(t, http.StatusNotFound)

	var en enrolmentBody
	c.do("POST", "/api/v1/me/totp", map[string]string{"current_password": testPassword}).wantStatus(t, http.StatusCreated).decode(t, &en)
	png, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(en.QRPNG, "data:image/png;base64,"))
	if len(en.Secret) != 32 || !strings.HasPrefix(en.OTPAuthURL, "otpauth://totp/") || !strings.HasPrefix(en.QRPNG, "data:image/png;base64,") ||
		err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) || en.Account != "ada@example.com" || en.Issuer != "mcpgate (localhost)" {
		t.Fatalf("POST /me/totp = %+v (png decode err %v)", en, err)
	}
	if c.totpEnabled() {
		t.Fatal("totp_enabled while pending = true")
	}
	keep(c.do("POST", "/api/v1/me/totp/confirm", map[string]string{"code": "000000"})).wantStatus(t, http.StatusBadRequest)
	var rc struct {
		RecoveryCodes []string `json:"recovery_codes"`
	}
	c.do("POST", "/api/v1/me/totp/confirm", map[string]string{"code": currentCode(t, en.Secret, clk)}).wantStatus(t, http.StatusOK).decode(t, &rc)
	if len(rc.RecoveryCodes) != 10 {
		t.Fatalf("recovery codes = %v, want 10", rc.RecoveryCodes)
	}
	if !c.totpEnabled() {
		t.Fatal("totp_enabled after confirm = false")
	}
	r := keep(c.do("POST", "/api/v1/me/totp", map[string]string{"current_password": testPassword})).wantStatus(t, http.StatusConflict)
	if !strings.Contains(r.message(t), "already on") {
		t.Errorf("second enrolment message = %q", r.message(t))
	}

	// Login: the password alone is 401 totp_required, in the one error
	// shape, and signs nobody in.
	b := ts.newClient(t)
	r = keep(b.do("POST", "/api/v1/auth/login", map[string]string{"email": "ada@example.com", "password": testPassword})).
		wantStatus(t, http.StatusUnauthorized)
	if got := r.errorCode(t); got != mcpgate.ETOTPRequired {
		t.Fatalf("login without a code: error code = %q, want totp_required", got)
	}
	if r.cookie(api.SessionCookie) != nil || b.cookieValue(api.SessionCookie) != "" {
		t.Fatal("login without a code set a session cookie")
	}
	keep(b.do("GET", "/api/v1/me", nil)).wantStatus(t, http.StatusUnauthorized)
	// The confirmed step's code is spent; a wrong one is 401 unauthorized.
	login := func(extra map[string]string) *response {
		body := map[string]string{"email": "ada@example.com", "password": testPassword}
		for k, v := range extra {
			body[k] = v
		}
		return keep(b.do("POST", "/api/v1/auth/login", body))
	}
	if got := login(map[string]string{"totp_code": currentCode(t, en.Secret, clk)}).wantStatus(t, http.StatusUnauthorized).errorCode(t); got != mcpgate.EUnauthorized {
		t.Fatalf("replayed code: error code = %q, want unauthorized", got)
	}
	clk.Advance(totpStep)
	login(map[string]string{"totp_code": currentCode(t, en.Secret, clk)}).wantStatus(t, http.StatusOK)
	if !b.totpEnabled() {
		t.Fatal("signed in with a code, /me says totp_enabled false")
	}
	b2 := ts.newClient(t)
	keep(b2.do("POST", "/api/v1/auth/login", map[string]string{"email": "ada@example.com", "password": testPassword,
		"recovery_code": rc.RecoveryCodes[0]})).wantStatus(t, http.StatusOK)
	keep(ts.newClient(t).do("POST", "/api/v1/auth/login", map[string]string{"email": "ada@example.com", "password": testPassword,
		"recovery_code": rc.RecoveryCodes[0]})).wantStatus(t, http.StatusUnauthorized)

	// Tenancy: another person sees nothing of this, and has nothing to
	// turn off.
	other := ts.newClient(t)
	other.mustSignup("eve@example.com")
	if other.totpEnabled() {
		t.Fatal("another person's totp_enabled = true")
	}
	clk.Advance(totpStep)
	keep(other.do("DELETE", "/api/v1/me/totp", map[string]string{"code": currentCode(t, en.Secret, clk), "current_password": testPassword})).
		wantStatus(t, http.StatusNotFound)
	if !c.totpEnabled() {
		t.Fatal("another person's DELETE turned two-factor sign-in off")
	}

	// New recovery codes: password and a code; another person's session
	// gets none of this person's; the old codes stop working.
	keep(other.do("POST", "/api/v1/me/totp/recovery-codes", map[string]string{"code": rc.RecoveryCodes[5], "current_password": testPassword})).
		wantStatus(t, http.StatusNotFound)
	keep(c.do("POST", "/api/v1/me/totp/recovery-codes", map[string]string{"code": rc.RecoveryCodes[5], "current_password": "wrong"})).
		wantStatus(t, http.StatusBadRequest)
	var renewed struct {
		RecoveryCodes []string `json:"recovery_codes"`
	}
	c.do("POST", "/api/v1/me/totp/recovery-codes", map[string]string{"code": rc.RecoveryCodes[5], "current_password": testPassword}).
		wantStatus(t, http.StatusOK).decode(t, &renewed)
	if len(renewed.RecoveryCodes) != len(rc.RecoveryCodes) || renewed.RecoveryCodes[0] == rc.RecoveryCodes[0] {
		t.Fatalf("new recovery codes = %v", renewed.RecoveryCodes)
	}
	keep(c.do("DELETE", "/api/v1/me/totp", map[string]string{"code": rc.RecoveryCodes[1], "current_password": testPassword})).
		wantStatus(t, http.StatusBadRequest) // an old code
	rc.RecoveryCodes = append(renewed.RecoveryCodes, rc.RecoveryCodes...)

	// Disable: password and a code.
	keep(c.do("DELETE", "/api/v1/me/totp", map[string]string{"code": rc.RecoveryCodes[1], "current_password": "wrong"})).wantStatus(t, http.StatusBadRequest)
	keep(c.do("DELETE", "/api/v1/me/totp", map[string]string{"code": "999999", "current_password": testPassword})).wantStatus(t, http.StatusBadRequest)
	keep(c.do("DELETE", "/api/v1/me/totp", map[string]string{"code": rc.RecoveryCodes[1], "current_password": testPassword})).wantStatus(t, http.StatusNoContent)
	if c.totpEnabled() {
		t.Fatal("totp_enabled after DELETE = true")
	}
	ts.newClient(t).mustLogin("ada@example.com")

	// No answer but enrolment's and confirmation's carries the secret or a
	// recovery code.
	for _, r := range bodies {
		for _, s := range append([]string{en.Secret}, rc.RecoveryCodes...) {
			if bytes.Contains(r.Body, []byte(s)) {
				t.Fatalf("%s answered %s, which holds a secret", r.req, r.Body)
			}
		}
	}
}

// TestTwoFactorPolicy_API: the workspace setting, owners only, needs the
// owner's own second factor, and then holds admins without one back from
// the covered routes with 403 totp_enrolment_required.
func TestTwoFactorPolicy_API(t *testing.T) {
	ts, clk := newTOTPServer(t)
	owner, admin, member, outsider := ts.newClient(t), ts.newClient(t), ts.newClient(t), ts.newClient(t)
	owner.mustSignup("owner@example.com")
	admin.mustSignup("admin@example.com")
	member.mustSignup("member@example.com")
	outsider.mustSignup("outsider@example.com")
	ws := owner.mustWorkspace("Team")
	admin.mustAccept(owner.mustInvite(ws, "admin@example.com", mcpgate.RoleAdmin).Token)
	member.mustAccept(owner.mustInvite(ws, "member@example.com", mcpgate.RoleMember).Token)
	on := map[string]bool{"require_two_factor": true}
	base := "/api/v1/workspaces/" + ws

	r := owner.do("PATCH", base, on).wantStatus(t, http.StatusForbidden)
	if got := r.errorCode(t); got != mcpgate.ETOTPEnrolment || !strings.Contains(r.message(t), "/app/account") {
		t.Fatalf("PATCH by an owner without TOTP: %s", r.Body)
	}
	owner.mustEnrol(clk)
	if got := admin.do("PATCH", base, on).wantStatus(t, http.StatusForbidden).errorCode(t); got != mcpgate.EForbidden {
		t.Fatalf("PATCH by an admin: error code = %q, want forbidden", got)
	}
	member.do("PATCH", base, on).wantStatus(t, http.StatusForbidden)
	outsider.do("PATCH", base, on).wantStatus(t, http.StatusNotFound)
	var got mcpgate.Workspace
	owner.do("PATCH", base, on).wantStatus(t, http.StatusOK).decode(t, &got)
	if !got.RequireTwoFactor || got.ID != ws {
		t.Fatalf("PATCH = %+v, want require_two_factor", got)
	}
	member.do("GET", base, nil).wantStatus(t, http.StatusOK).decode(t, &got)
	if !got.RequireTwoFactor {
		t.Fatal("GET /workspaces/{ws} does not show the policy to a member")
	}

	grails := map[string]any{"max_running": 2}
	r = admin.do("PUT", base+"/guardrails", grails).wantStatus(t, http.StatusForbidden)
	if got := r.errorCode(t); got != mcpgate.ETOTPEnrolment {
		t.Fatalf("admin without TOTP: error code = %q, want totp_enrolment_required", got)
	}
	admin.do("PUT", base+"/tools/x", map[string]any{"enabled": true}).wantStatus(t, http.StatusForbidden)
	owner.do("PUT", base+"/guardrails", grails).wantStatus(t, http.StatusOK)
	// A member is refused as a member always was, not for two factors.
	if got := member.do("PUT", base+"/guardrails", grails).wantStatus(t, http.StatusForbidden).errorCode(t); got != mcpgate.EForbidden {
		t.Fatalf("member: error code = %q, want forbidden", got)
	}
	member.do("GET", base+"/guardrails", nil).wantStatus(t, http.StatusOK)
	// Another workspace is unaffected.
	admin.do("PUT", "/api/v1/workspaces/"+admin.mustMe().Workspaces[0].ID+"/guardrails", grails).wantStatus(t, http.StatusOK)
	clk.Advance(totpStep)
	admin.mustEnrol(clk)
	admin.do("PUT", base+"/guardrails", grails).wantStatus(t, http.StatusOK)
}
