package web

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
)

func TestAccount_Page(t *testing.T) {
	f := newFake(mcpgate.RoleOwner)
	f.wsName = evil
	h := mustHandler(t, f)
	res, body := get(t, h, "/app/account", testUser)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /app/account = %d; body:\n%s", res.StatusCode, body)
	}
	for _, want := range []string{
		`data-api-method="PUT" data-api-path="/api/v1/me/password"`, `name="current_password"`, `name="new_password"`,
		`data-api-method="POST" data-api-path="/api/v1/workspaces"`, `href="/app/w/ws1"`,
		`class="sidenav"`, // framed in the personal workspace
	} {
		if !strings.Contains(body, want) {
			t.Errorf("account page lacks %s", want)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Errorf("account page renders a workspace name as markup")
	}
	// The confirmation field has no name: it is checked in the page, never sent.
	if strings.Contains(body, `id="new-password-again" name=`) {
		t.Errorf("the repeated password is sent to the API")
	}
	if res, _ := get(t, h, "/app/account", nil); res.StatusCode != http.StatusSeeOther {
		t.Errorf("logged-out GET /app/account = %d, want a redirect to login", res.StatusCode)
	}
}

// The email section says what an unconfirmed address holds back on this
// install: keys and invitations only where verification is required, and
// a new link only where mail can be sent.
func TestAccount_EmailStatus(t *testing.T) {
	for _, tt := range []struct {
		name                             string
		unverified, mail, verifyRequired bool
		want, wantNot                    []string
	}{
		{name: "confirmed", mail: true, verifyRequired: true, want: []string{"is confirmed"}, wantNot: []string{"cannot", `id="verify-resend-form"`}},
		{name: "no SMTP_URL", unverified: true, want: []string{"sends no email", "SMTP_URL", "you can create MCP keys"},
			wantNot: []string{"cannot accept", "cannot create", `id="verify-resend-form"`}},
		{name: "mail, verification off", unverified: true, mail: true, want: []string{"not confirmed yet", "Nothing on this gateway waits", `id="verify-resend-form"`},
			wantNot: []string{"cannot"}},
		{name: "verification required", unverified: true, mail: true, verifyRequired: true,
			want: []string{"not confirmed yet", "requires it", "you cannot accept invitations or create MCP keys", `id="verify-resend-form"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(mcpgate.RoleOwner)
			f.unverified, f.mail, f.verifyRequired = tt.unverified, tt.mail, tt.verifyRequired
			_, body := get(t, mustHandler(t, f), "/app/account", testUser)
			i := strings.Index(body, `id="email"`)
			j := strings.Index(body, `id="password"`)
			if i < 0 || j < i {
				t.Fatalf("no email section before the password section")
			}
			section := body[i:j]
			for _, w := range tt.want {
				if !strings.Contains(section, w) {
					t.Errorf("email section lacks %q:\n%s", w, section)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(section, w) {
					t.Errorf("email section says %q:\n%s", w, section)
				}
			}
		})
	}
}

// The user menu leads to account settings; the workspace menu to creating a
// workspace.
func TestMenus_AccountAndNewWorkspace(t *testing.T) {
	h := mustHandler(t, newFake(mcpgate.RoleMember))
	for _, p := range appPages {
		_, body := get(t, h, p, testUser)
		if !strings.Contains(body, `href="/app/account"`) || !strings.Contains(body, `href="/app/account#new-workspace"`) {
			t.Errorf("%s: menus lack account settings or create a workspace", p)
		}
	}
}

// The two-factor section offers enrolment (password first, then the QR code
// and the first code, then the recovery codes) while it is off, and turning
// it off (a code and the password) while it is on.
func TestAccount_TwoFactor(t *testing.T) {
	f := newFake(mcpgate.RoleOwner)
	h := mustHandler(t, f)
	_, body := get(t, h, "/app/account", testUser)
	for _, want := range []string{
		`id="two-factor"`, `data-api-method="POST" data-api-path="/api/v1/me/totp" data-done="reveal:#totp-enrol"`,
		`data-fill-src="qr_png"`, `data-fill="secret"`, `data-api-path="/api/v1/me/totp/confirm" data-done="reveal:#totp-codes"`,
		`data-fill="recovery_codes"`, `data-enables="#codes-done"`, `id="codes-done" class="btn btn-primary" data-reload disabled`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("account page (two-factor off) lacks %s", want)
		}
	}
	if strings.Contains(body, `data-api-method="DELETE" data-api-path="/api/v1/me/totp"`) {
		t.Error("account page offers to turn off two-factor sign-in that is off")
	}
	f.totp = true
	_, body = get(t, h, "/app/account", testUser)
	for _, want := range []string{`data-api-method="DELETE" data-api-path="/api/v1/me/totp"`, `name="code"`, `id="totp-disable-password" name="current_password"`} {
		if !strings.Contains(body, want) {
			t.Errorf("account page (two-factor on) lacks %s", want)
		}
	}
	if strings.Contains(body, `data-api-path="/api/v1/me/totp/confirm"`) {
		t.Error("account page offers enrolment while two-factor sign-in is on")
	}
}

// The login page holds the second step, hidden and disabled until the API
// answers totp_required, with a way to a recovery code.
func TestLogin_SecondFactorStep(t *testing.T) {
	_, body := get(t, mustHandler(t, newFake(mcpgate.RoleOwner)), "/login", nil)
	for _, want := range []string{`data-second-factor`, `data-first-step`, `data-second-step hidden`,
		`name="totp_code" type="text" inputmode="numeric" autocomplete="one-time-code" maxlength="9" spellcheck="false" disabled`,
		`name="recovery_code" type="text" autocomplete="off" spellcheck="false" disabled`, `data-factor-switch="recovery"`} {
		if !strings.Contains(body, want) {
			t.Errorf("login page lacks %s", want)
		}
	}
}

// Only an owner gets the switch for the two-factor policy; an admin and a
// member see its state.
func TestSettings_TwoFactorPolicy(t *testing.T) {
	for _, tt := range []struct {
		role       mcpgate.Role
		wantSwitch bool
	}{{mcpgate.RoleOwner, true}, {mcpgate.RoleAdmin, false}, {mcpgate.RoleMember, false}} {
		_, body := get(t, mustHandler(t, newFake(tt.role)), "/app/w/ws1/settings", testUser)
		if got := strings.Contains(body, `name="require_two_factor"`); got != tt.wantSwitch {
			t.Errorf("%s: settings page has the two-factor switch = %v, want %v", tt.role, got, tt.wantSwitch)
		}
		if got := strings.Contains(body, `name="approval_four_eyes"`); got != tt.wantSwitch {
			t.Errorf("%s: settings page has the four-eyes switch = %v, want %v", tt.role, got, tt.wantSwitch)
		}
		if !tt.wantSwitch && !strings.Contains(body, `id="four-eyes-status"`) {
			t.Errorf("%s: settings page does not show the four-eyes rule", tt.role)
		}
		if !strings.Contains(body, `id="security"`) {
			t.Errorf("%s: settings page lacks the security section", tt.role)
		}
	}
	// An owner without two-factor sign-in is told to turn it on first.
	_, body := get(t, mustHandler(t, newFake(mcpgate.RoleOwner)), "/app/w/ws1/settings", testUser)
	if !strings.Contains(body, `href="/app/account#two-factor"`) {
		t.Error("owner without two-factor sign-in is not sent to set it up")
	}
}
