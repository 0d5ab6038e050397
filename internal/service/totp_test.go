package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
)

// totpEnv is the services with a clock the test moves, and one person
// signed up with goodPassword.
type totpEnv struct {
	*servicetest.Env
	clock *e2bsim.ManualClock
	u     *mcpgate.User
}

func newTOTPEnv(t *testing.T) *totpEnv {
	t.Helper()
	// The middle of a 30-second step, so that stepping by 30 s never lands
	// on a boundary.
	clk := e2bsim.NewManualClock(time.Unix(time.Now().Unix()/30*30+15, 0))
	env := servicetest.New(t, service.Options{PasswordParams: fastParams, Now: clk.Now, PublicURL: "https://gw.example:8443"})
	u, err := env.Service.Accounts.Signup(context.Background(), "ada@example.com", goodPassword, "", "192.0.2.1")
	if err != nil {
		t.Fatalf("Signup() err = %v", err)
	}
	return &totpEnv{Env: env, clock: clk, u: u}
}

func (e *totpEnv) code(t *testing.T, secret mcpgate.Secret) string {
	t.Helper()
	c, err := totp.GenerateCode(secret.Reveal(), e.clock.Now())
	if err != nil {
		t.Fatalf("GenerateCode() err = %v", err)
	}
	return c
}

func (e *totpEnv) login(c mcpgate.Credentials, addr string) error {
	c.Email, c.Password = e.u.Email, goodPassword
	_, err := e.Service.Accounts.Login(context.Background(), c, addr)
	return err
}

// enrol turns TOTP on for the person and returns the secret and the
// recovery codes.
func (e *totpEnv) enrol(t *testing.T) (mcpgate.Secret, []string) {
	t.Helper()
	ctx := context.Background()
	en, err := e.Service.TwoFactor.BeginTOTP(ctx, e.u, goodPassword, "192.0.2.1")
	if err != nil {
		t.Fatalf("BeginTOTP() err = %v", err)
	}
	codes, err := e.Service.TwoFactor.ConfirmTOTP(ctx, e.u, e.code(t, en.Secret))
	if err != nil {
		t.Fatalf("ConfirmTOTP() err = %v", err)
	}
	return en.Secret, codes
}

func TestTOTP_Enrolment(t *testing.T) {
	e := newTOTPEnv(t)
	ctx := context.Background()
	svc := e.Service

	if on, err := svc.TwoFactor.TOTPEnabled(ctx, e.u); err != nil || on {
		t.Fatalf("TOTPEnabled() before = %v, %v; want false", on, err)
	}
	if _, err := svc.TwoFactor.BeginTOTP(ctx, e.u, "wrong password", "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("BeginTOTP(wrong password) err = %v, want invalid", err)
	}
	if _, err := svc.TwoFactor.ConfirmTOTP(ctx, e.u, "123456"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("ConfirmTOTP() before BeginTOTP err = %v, want not_found", err)
	}
	first, err := svc.TwoFactor.BeginTOTP(ctx, e.u, goodPassword, "192.0.2.1")
	if err != nil {
		t.Fatalf("BeginTOTP() err = %v", err)
	}
	if len(first.Secret.Reveal()) != 32 || !strings.HasPrefix(first.URL.Reveal(), "otpauth://totp/") ||
		!strings.Contains(first.URL.Reveal(), "secret="+first.Secret.Reveal()) {
		t.Fatalf("BeginTOTP() = secret %q, url %q", first.Secret.Reveal(), first.URL.Reveal())
	}
	if first.Issuer != "mcpgate (gw.example)" || first.Account != "ada@example.com" {
		t.Errorf("issuer, account = %q, %q", first.Issuer, first.Account)
	}
	if !strings.HasPrefix(string(first.QRCodePNG), "\x89PNG\r\n\x1a\n") {
		t.Errorf("QRCodePNG is not a PNG")
	}
	// A pending enrolment does not ask for a code at login.
	if err := e.login(mcpgate.Credentials{}, "192.0.2.1"); err != nil {
		t.Fatalf("Login() with a pending enrolment err = %v", err)
	}
	// A second start replaces the pending secret: the first one's codes no
	// longer confirm.
	second, err := svc.TwoFactor.BeginTOTP(ctx, e.u, goodPassword, "192.0.2.1")
	if err != nil {
		t.Fatalf("BeginTOTP() again err = %v", err)
	}
	if second.Secret == first.Secret {
		t.Fatal("a second BeginTOTP() kept the secret")
	}
	if _, err := svc.TwoFactor.ConfirmTOTP(ctx, e.u, e.code(t, first.Secret)); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ConfirmTOTP(the replaced secret's code) err = %v, want invalid", err)
	}
	if _, err := svc.TwoFactor.ConfirmTOTP(ctx, e.u, "12345x"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ConfirmTOTP(not digits) err = %v, want invalid", err)
	}
	codes, err := svc.TwoFactor.ConfirmTOTP(ctx, e.u, e.code(t, second.Secret))
	if err != nil {
		t.Fatalf("ConfirmTOTP() err = %v", err)
	}
	if len(codes) != 10 {
		t.Fatalf("recovery codes = %d, want 10", len(codes))
	}
	seen := map[string]bool{}
	for _, c := range codes {
		if len(c) != 19 || seen[c] {
			t.Fatalf("recovery code %q: not of the form xxxx-xxxx-xxxx-xxxx, or repeated", c)
		}
		seen[c] = true
	}
	if on, err := svc.TwoFactor.TOTPEnabled(ctx, e.u); err != nil || !on {
		t.Fatalf("TOTPEnabled() after confirm = %v, %v; want true", on, err)
	}
	if _, err := svc.TwoFactor.BeginTOTP(ctx, e.u, goodPassword, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EConflict {
		t.Fatalf("BeginTOTP() while on err = %v, want conflict", err)
	}
	if _, err := svc.TwoFactor.ConfirmTOTP(ctx, e.u, e.code(t, second.Secret)); mcpgate.ErrorCode(err) != mcpgate.EConflict {
		t.Fatalf("ConfirmTOTP() while on err = %v, want conflict", err)
	}

	// The audit log has each step and never the secret or a code.
	var actions []string
	for _, ev := range e.Audit.Events() {
		actions = append(actions, ev.Action)
		b, _ := json.Marshal(ev)
		for _, secret := range append([]string{first.Secret.Reveal(), second.Secret.Reveal()}, codes...) {
			if strings.Contains(strings.ToLower(string(b)), strings.ToLower(strings.ReplaceAll(secret, "-", ""))) ||
				strings.Contains(string(b), secret) {
				t.Fatalf("audit event %s holds a secret or recovery code: %s", ev.Action, b)
			}
		}
	}
	want := []string{"account.totp_enrolment_started", "account.totp_enrolment_started", "account.totp_enabled"}
	if got := strings.Join(actions, ","); !strings.Contains(got, strings.Join(want, ",")) {
		t.Errorf("audit actions = %v, want %v among them", actions, want)
	}
}

func TestTOTP_Login(t *testing.T) {
	e := newTOTPEnv(t)
	secret, codes := e.enrol(t)

	if err := e.login(mcpgate.Credentials{}, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.ETOTPRequired {
		t.Fatalf("Login() without a code err = %v, want totp_required", err)
	}
	// A wrong password is a wrong password, code or not: the code's answer
	// says nothing to someone without the password.
	_, err := e.Service.Accounts.Login(context.Background(), mcpgate.Credentials{Email: e.u.Email, Password: "wrong", TOTPCode: e.code(t, secret)}, "192.0.2.1")
	if mcpgate.ErrorCode(err) != mcpgate.EUnauthorized {
		t.Fatalf("Login(wrong password, right code) err = %v, want unauthorized", err)
	}
	// The code of the step confirm used cannot be replayed.
	if err := e.login(mcpgate.Credentials{TOTPCode: e.code(t, secret)}, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EUnauthorized {
		t.Fatalf("Login(code of the confirmed step) err = %v, want unauthorized", err)
	}
	e.clock.Advance(30 * time.Second)
	old := e.code(t, secret)
	e.clock.Advance(30 * time.Second)
	fresh := e.code(t, secret)
	if err := e.login(mcpgate.Credentials{TOTPCode: fresh}, "192.0.2.1"); err != nil {
		t.Fatalf("Login(fresh code) err = %v", err)
	}
	if err := e.login(mcpgate.Credentials{TOTPCode: fresh}, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EUnauthorized {
		t.Fatalf("Login(the same code again) err = %v, want unauthorized", err)
	}
	// The previous step's code is within the skew, but earlier than the
	// last one accepted.
	if err := e.login(mcpgate.Credentials{TOTPCode: old}, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EUnauthorized {
		t.Fatalf("Login(an earlier step's code) err = %v, want unauthorized", err)
	}
	// One step of skew: the code of the step after now works (a phone
	// whose clock runs ahead).
	e.clock.Advance(30 * time.Second)
	e.clock.Advance(30 * time.Second)
	ahead := e.code(t, secret)
	e.clock.Advance(-30 * time.Second)
	if err := e.login(mcpgate.Credentials{TOTPCode: ahead}, "192.0.2.1"); err != nil {
		t.Fatalf("Login(next step's code) err = %v", err)
	}
	e.clock.Advance(5 * time.Minute)
	if err := e.login(mcpgate.Credentials{TOTPCode: ahead}, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EUnauthorized {
		t.Fatalf("Login(a code 5 minutes old) err = %v, want unauthorized", err)
	}

	// A recovery code works once, typed as shown or not.
	if err := e.login(mcpgate.Credentials{RecoveryCode: strings.ToUpper(strings.ReplaceAll(codes[0], "-", " "))}, "192.0.2.1"); err != nil {
		t.Fatalf("Login(recovery code) err = %v", err)
	}
	if err := e.login(mcpgate.Credentials{RecoveryCode: codes[0]}, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EUnauthorized {
		t.Fatalf("Login(spent recovery code) err = %v, want unauthorized", err)
	}
	if err := e.login(mcpgate.Credentials{RecoveryCode: codes[1], TOTPCode: "123456"}, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("Login(both) err = %v, want invalid", err)
	}
	var used bool
	for _, ev := range e.Audit.Events() {
		if ev.Action == string(mcpgate.ActionRecoveryCodeUsed) && ev.Arguments["codes_left"] == 9 {
			used = true
		}
	}
	if !used {
		t.Errorf("no %s event with codes_left 9", mcpgate.ActionRecoveryCodeUsed)
	}

	// Wrong codes count like wrong passwords (a success clears the pair's
	// count; the spent recovery code above is one failure since): four more
	// make five, and then the right code is refused too.
	for i := range 4 {
		if err := e.login(mcpgate.Credentials{TOTPCode: "000000"}, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EUnauthorized {
			t.Fatalf("Login(wrong code %d) err = %v, want unauthorized", i, err)
		}
	}
	e.clock.Advance(30 * time.Second)
	if err := e.login(mcpgate.Credentials{TOTPCode: e.code(t, secret)}, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.ETooMany {
		t.Fatalf("Login(right code) after 5 failures err = %v, want rate_limited", err)
	}
	// Another address is unaffected.
	if err := e.login(mcpgate.Credentials{RecoveryCode: codes[1]}, "203.0.113.9"); err != nil {
		t.Fatalf("Login(recovery code) from another address err = %v", err)
	}
}

func TestTOTP_Disable(t *testing.T) {
	e := newTOTPEnv(t)
	ctx := context.Background()
	secret, codes := e.enrol(t)
	e.clock.Advance(30 * time.Second)
	code := e.code(t, secret)

	if err := e.Service.TwoFactor.DisableTOTP(ctx, e.u, code, "wrong password", "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("DisableTOTP(wrong password) err = %v, want invalid", err)
	}
	if err := e.Service.TwoFactor.DisableTOTP(ctx, e.u, "000000", goodPassword, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("DisableTOTP(wrong code) err = %v, want invalid", err)
	}
	if err := e.Service.TwoFactor.DisableTOTP(ctx, e.u, "aaaa-bbbb-cccc-dddd", goodPassword, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("DisableTOTP(wrong recovery code) err = %v, want invalid", err)
	}
	if err := e.Service.TwoFactor.DisableTOTP(ctx, e.u, codes[3], goodPassword, "192.0.2.1"); err != nil {
		t.Fatalf("DisableTOTP(recovery code) err = %v", err)
	}
	if on, _ := e.Service.TwoFactor.TOTPEnabled(ctx, e.u); on {
		t.Fatal("TOTPEnabled() after DisableTOTP = true")
	}
	if err := e.login(mcpgate.Credentials{}, "203.0.113.9"); err != nil {
		t.Fatalf("Login() without a code after disabling err = %v", err)
	}
	if err := e.Service.TwoFactor.DisableTOTP(ctx, e.u, code, goodPassword, "203.0.113.9"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("DisableTOTP() when off err = %v, want not_found", err)
	}
	// Enrolling again gives new recovery codes; the old ones are gone.
	secret, _ = e.enrol(t)
	if err := e.login(mcpgate.Credentials{RecoveryCode: codes[4]}, "203.0.113.9"); mcpgate.ErrorCode(err) != mcpgate.EUnauthorized {
		t.Fatalf("Login(a recovery code of the earlier enrolment) err = %v, want unauthorized", err)
	}
	e.clock.Advance(30 * time.Second)
	if err := e.Service.TwoFactor.DisableTOTP(ctx, e.u, e.code(t, secret), goodPassword, "203.0.113.9"); err != nil {
		t.Fatalf("DisableTOTP(TOTP code) err = %v", err)
	}
	var disabled int
	for _, ev := range e.Audit.Events() {
		if ev.Action == string(mcpgate.ActionTOTPDisabled) {
			disabled++
		}
	}
	if disabled != 2 {
		t.Errorf("%s events = %d, want 2", mcpgate.ActionTOTPDisabled, disabled)
	}
}

// TestTOTP_NewRecoveryCodes: new codes need the password and a second
// factor; once given, the old codes stop working and each new one works once.
func TestTOTP_NewRecoveryCodes(t *testing.T) {
	e := newTOTPEnv(t)
	ctx := context.Background()
	secret, old := e.enrol(t)
	if _, err := e.Service.TwoFactor.NewRecoveryCodes(ctx, e.u, "000000", goodPassword, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("NewRecoveryCodes(wrong code) err = %v, want invalid", err)
	}
	e.clock.Advance(30 * time.Second)
	if _, err := e.Service.TwoFactor.NewRecoveryCodes(ctx, e.u, e.code(t, secret), "wrong password", "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("NewRecoveryCodes(wrong password) err = %v, want invalid", err)
	}
	fresh, err := e.Service.TwoFactor.NewRecoveryCodes(ctx, e.u, old[0], goodPassword, "192.0.2.1")
	if err != nil || len(fresh) != len(old) {
		t.Fatalf("NewRecoveryCodes(recovery code) = %d codes, %v; want %d", len(fresh), err, len(old))
	}
	if err := e.login(mcpgate.Credentials{RecoveryCode: old[1]}, "203.0.113.9"); mcpgate.ErrorCode(err) != mcpgate.EUnauthorized {
		t.Fatalf("Login(an old recovery code) err = %v, want unauthorized", err)
	}
	if err := e.login(mcpgate.Credentials{RecoveryCode: fresh[0]}, "203.0.113.9"); err != nil {
		t.Fatalf("Login(a new recovery code) err = %v", err)
	}
	if err := e.login(mcpgate.Credentials{RecoveryCode: fresh[0]}, "203.0.113.9"); mcpgate.ErrorCode(err) != mcpgate.EUnauthorized {
		t.Fatalf("Login(the same new code again) err = %v, want unauthorized", err)
	}
	renewed := 0
	for _, ev := range e.Audit.Events() {
		raw, _ := json.Marshal(ev)
		for _, c := range append(fresh, old...) {
			if strings.Contains(string(raw), c) || strings.Contains(string(raw), strings.ReplaceAll(c, "-", "")) {
				t.Fatalf("audit event %s holds a recovery code", ev.Action)
			}
		}
		if ev.Action == string(mcpgate.ActionRecoveryCodesRenewed) {
			renewed++
		}
	}
	if renewed != 1 {
		t.Errorf("%s events = %d, want 1", mcpgate.ActionRecoveryCodesRenewed, renewed)
	}
	if err := e.Service.TwoFactor.DisableTOTP(ctx, e.u, fresh[1], goodPassword, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Service.TwoFactor.NewRecoveryCodes(ctx, e.u, fresh[2], goodPassword, "192.0.2.1"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("NewRecoveryCodes() with two-factor off err = %v, want not_found", err)
	}
}

// TestTOTP_DisableThrottled: wrong codes to turn two-factor sign-in off
// count as failed logins, and the right password given with each does not
// wipe the count, so the codes cannot be guessed through this route either.
func TestTOTP_DisableThrottled(t *testing.T) {
	e := newTOTPEnv(t)
	ctx := context.Background()
	secret, _ := e.enrol(t)
	for i := range 5 {
		if err := e.Service.TwoFactor.DisableTOTP(ctx, e.u, "000000", goodPassword, "192.0.2.7"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
			t.Fatalf("DisableTOTP(wrong code %d) err = %v, want invalid", i, err)
		}
	}
	e.clock.Advance(30 * time.Second)
	if err := e.Service.TwoFactor.DisableTOTP(ctx, e.u, e.code(t, secret), goodPassword, "192.0.2.7"); mcpgate.ErrorCode(err) != mcpgate.ETooMany {
		t.Fatalf("DisableTOTP(right code) after 5 wrong ones err = %v, want rate_limited", err)
	}
	if on, _ := e.Service.TwoFactor.TOTPEnabled(ctx, e.u); !on {
		t.Fatal("two-factor sign-in was turned off past the throttle")
	}
}

// TestTOTP_ResetKeepsSecondFactor: a password reset link proves the mailbox,
// not the second factor, so two-factor sign-in stays on.
func TestTOTP_ResetKeepsSecondFactor(t *testing.T) {
	env, srv := mailEnv(t, false)
	ctx := context.Background()
	u, err := env.Service.Accounts.Signup(ctx, "ada@example.com", "old password 123", "", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	en, err := env.Service.TwoFactor.BeginTOTP(ctx, u, "old password 123", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := totp.GenerateCode(en.Secret.Reveal(), time.Now())
	if _, err := env.Service.TwoFactor.ConfirmTOTP(ctx, u, c); err != nil {
		t.Fatal(err)
	}
	if err := env.Service.Accounts.RequestPasswordReset(ctx, u.Email, "198.51.100.1"); err != nil {
		t.Fatal(err)
	}
	tok := servicetest.LinkToken(t, srv.Wait(t, u.Email, "Reset your password"), "/reset-password")
	if err := env.Service.Accounts.ResetPassword(ctx, tok, "new password 456", false); err != nil {
		t.Fatal(err)
	}
	_, err = env.Service.Accounts.Login(ctx, mcpgate.Credentials{Email: u.Email, Password: "new password 456"}, "198.51.100.1")
	if mcpgate.ErrorCode(err) != mcpgate.ETOTPRequired {
		t.Fatalf("Login() after reset err = %v, want totp_required", err)
	}
}

// TestTwoFactorPolicy: with "require two-factor" on, an owner or admin
// without TOTP is refused every change the policy covers, with a message
// that says where to enrol; with TOTP they may; members and other
// workspaces are unaffected.
func TestTwoFactorPolicy(t *testing.T) {
	f := newPadFixture(t)
	ctx := context.Background()
	on, off := true, false
	enrol := func(a *mcpgate.Actor) { t.Helper(); f.enrolTOTP(t, a) }
	memberKey := f.keyActor(t, f.member)
	f.enableEnd(t, mcpgate.ApprovalHuman)

	// Only an owner may change the policy, and only with TOTP on.
	if _, err := f.svc.Workspaces.UpdateWorkspace(ctx, f.admin, mcpgate.WorkspaceUpdate{RequireTwoFactor: &on}); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Fatalf("UpdateWorkspace() by an admin err = %v, want forbidden", err)
	}
	if _, err := f.svc.Workspaces.UpdateWorkspace(ctx, f.member, mcpgate.WorkspaceUpdate{RequireTwoFactor: &on}); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Fatalf("UpdateWorkspace() by a member err = %v, want forbidden", err)
	}
	_, err := f.svc.Workspaces.UpdateWorkspace(ctx, f.owner, mcpgate.WorkspaceUpdate{RequireTwoFactor: &on})
	if mcpgate.ErrorCode(err) != mcpgate.ETOTPEnrolment || !strings.Contains(err.Error(), "/app/account") {
		t.Fatalf("UpdateWorkspace(on) by an owner without TOTP err = %v, want totp_enrolment_required naming /app/account", err)
	}
	enrol(f.owner)
	ws, err := f.svc.Workspaces.UpdateWorkspace(ctx, f.owner, mcpgate.WorkspaceUpdate{RequireTwoFactor: &on})
	if err != nil || !ws.RequireTwoFactor {
		t.Fatalf("UpdateWorkspace(on) = %+v, %v", ws, err)
	}
	if ev := f.audit.Last(); ev.Action != string(mcpgate.ActionWorkspaceUpdated) || ev.Arguments["require_two_factor"] != true {
		t.Errorf("last audit event = %+v", ev)
	}
	if _, got, _ := f.svc.Workspaces.Enter(ctx, &mcpgate.User{ID: f.member.UserID}, f.ws, mcpgate.SourceDashboard); !got.RequireTwoFactor {
		t.Error("Enter() does not show the policy")
	}

	grails := mcpgate.Guardrails{MaxRunning: 3}
	changes := map[string]func(a *mcpgate.Actor) error{
		"UpdateTool": func(a *mcpgate.Actor) error {
			_, err := f.svc.Tools.UpdateTool(ctx, a, "notes_burn", mcpgate.ToolUpdate{Enabled: &on})
			return err
		},
		"SetGuardrails": func(a *mcpgate.Actor) error { _, err := f.svc.Tools.SetGuardrails(ctx, a, grails); return err },
		"PutConnection": func(a *mcpgate.Actor) error {
			_, err := f.svc.Connections.PutConnection(ctx, a, "notes", "notes-credential")
			return err
		},
		"DeleteConnection": func(a *mcpgate.Actor) error {
			if err := f.svc.Connections.DeleteConnection(ctx, a, "notes"); err != nil {
				return err
			}
			_, err := f.svc.Connections.PutConnection(ctx, f.owner, "notes", "notes-credential")
			return err
		},
		"Approve": func(a *mcpgate.Actor) error {
			_, err := f.svc.Approvals.Approve(ctx, a, f.request(t, memberKey, "p1").ID)
			return err
		},
		"Deny": func(a *mcpgate.Actor) error {
			_, err := f.svc.Approvals.Deny(ctx, a, f.request(t, memberKey, "p2").ID)
			return err
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			before := len(f.audit.Events())
			err := change(f.admin)
			if mcpgate.ErrorCode(err) != mcpgate.ETOTPEnrolment || !strings.Contains(mcpgate.ErrorMessage(err), "/app/account") {
				t.Fatalf("admin without TOTP: err = %v, want totp_enrolment_required naming /app/account", err)
			}
			for _, ev := range f.audit.Events()[before:] {
				if ev.ActorID == f.admin.UserID {
					t.Fatalf("a refused change was audited: %+v", ev)
				}
			}
			if err := change(f.owner); err != nil {
				t.Fatalf("owner with TOTP: err = %v", err)
			}
			// The other workspace's owner has no TOTP and is unaffected.
			if name == "UpdateTool" || name == "SetGuardrails" || name == "PutConnection" {
				if err := change(f.outside); err != nil {
					t.Fatalf("owner of another workspace (no policy, no TOTP): err = %v", err)
				}
			}
		})
	}
	// A member deciding their own key's request is held to the policy too
	// (it is about the decision, not the role; see
	// TestTwoFactorPolicy_RoleChanges), and may once enrolled.
	p3 := f.request(t, memberKey, "p3").ID
	if _, err := f.svc.Approvals.Approve(ctx, f.member, p3); mcpgate.ErrorCode(err) != mcpgate.ETOTPEnrolment {
		t.Fatalf("member without TOTP approving their own request: err = %v, want totp_enrolment_required", err)
	}
	enrol(f.member)
	if _, err := f.svc.Approvals.Approve(ctx, f.member, p3); err != nil {
		t.Fatalf("enrolled member approving their own request: err = %v", err)
	}
	// Members' own work goes on: keys, tool calls.
	if _, _, err := f.svc.Keys.CreateKey(ctx, f.member, mcpgate.NewKey{Name: "mine"}); err != nil {
		t.Fatalf("member CreateKey() err = %v", err)
	}
	if _, err := f.svc.Tools.CallTool(ctx, f.member, mcpgate.ToolCall{Tool: "notes_list"}); err != nil {
		t.Fatalf("member CallTool() err = %v", err)
	}
	// The admin enrols and may change things.
	enrol(f.admin)
	if err := changes["UpdateTool"](f.admin); err != nil {
		t.Fatalf("admin with TOTP: err = %v", err)
	}
	// Turning the policy off is a change under the policy too.
	if err := f.db.DisableTOTP(ctx, f.owner.UserID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Workspaces.UpdateWorkspace(ctx, f.owner, mcpgate.WorkspaceUpdate{RequireTwoFactor: &off}); mcpgate.ErrorCode(err) != mcpgate.ETOTPEnrolment {
		t.Fatalf("UpdateWorkspace(off) by an owner without TOTP err = %v, want totp_enrolment_required", err)
	}
	enrol(f.owner)
	if ws, err := f.svc.Workspaces.UpdateWorkspace(ctx, f.owner, mcpgate.WorkspaceUpdate{RequireTwoFactor: &off}); err != nil || ws.RequireTwoFactor {
		t.Fatalf("UpdateWorkspace(off) = %+v, %v", ws, err)
	}
}
