package main

import (
	"net/http"
	"net/http/cookiejar"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp/totp"

	"github.com/mcpgate/mcpgate/internal/mail/mailtest"
)

// TestWebAccountVerifyAndReset drives email verification and a forgotten
// password end to end in Chromium, with a real SMTP server receiving the
// mail: sign up (keys are refused until the address is confirmed), confirm
// the address from the emailed link, log out,
// "Forgot password?", the link from the email, a new password (revoking the
// MCP keys too), and a sign-in with it; then sessions, a new email, two-factor
// sign-in (enrol, sign in with a code and with a recovery code), and the
// account's deletion. Each new page is checked like the journey's (axe,
// 390 px, console errors).
func TestWebAccountVerifyAndReset(t *testing.T) {
	smtp := mailtest.New(t, mailtest.Options{Auth: true})
	base, ctx, problems := webStartJourney(t, map[string]string{"SMTP_URL": smtp.URL(), "MAIL_FROM": "mcpgate <noreply@example.com>"})

	const email, oldPassword, newPassword = "forgetful@example.com", "the first password here", "a brand new passphrase"
	// SIGNUP_VERIFY=required (the default with SMTP_URL): the sign-up makes
	// no account until its link is opened, and says so; nobody is signed in.
	webSubmitSignIn(t, ctx, "sign up", base+"/signup", email, oldPassword,
		chromedp.WaitVisible(chromedp.ID("#flash")))
	if s := webText(t, ctx, "#flash"); !strings.Contains(s, "Check your inbox") {
		t.Errorf("flash after signing up = %q", s)
	}
	if loc := webLocation(t, ctx); !strings.HasPrefix(loc, base+"/login") {
		t.Errorf("after signing up at %q, want the login page", loc)
	}
	webCheckPage(t, ctx, "signup-check-inbox")

	verify := smtp.Wait(t, email, "Confirm your email").Link(t, "/verify-email?token=")
	webRun(t, ctx, "verify page", chromedp.Navigate(verify), chromedp.WaitVisible(chromedp.ID("#verify-form")))
	webCheckPage(t, ctx, "verify-email")
	webRun(t, ctx, "confirm",
		chromedp.Click(chromedp.CSS(`#verify-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#flash")))
	if s := webText(t, ctx, "#flash"); !strings.Contains(s, "Email address confirmed") {
		t.Errorf("flash after confirming = %q", s)
	}
	// The link made the account; its person signs in with their password.
	webSubmitSignIn(t, ctx, "sign in after confirming", base+"/login", email, oldPassword,
		chromedp.WaitVisible(chromedp.ID("#next-steps")))
	wsBase := webLocation(t, ctx)
	webRun(t, ctx, "account confirmed", chromedp.Navigate(base+"/app/account"), chromedp.WaitVisible(chromedp.ID("#email-status")))
	if s := webText(t, ctx, "#email-status"); !strings.Contains(s, "is confirmed") {
		t.Errorf("email status after confirming = %q", s)
	}
	webCheckPage(t, ctx, "account-confirmed")
	webCreateKey(t, ctx, wsBase, "laptop")

	webRun(t, ctx, "logout",
		chromedp.Click(chromedp.CSS(".user-menu summary")),
		chromedp.Click(chromedp.CSS(`.user-menu button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(".hero")))

	webRun(t, ctx, "forgot password",
		chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.ID("#forgot-link")),
		chromedp.Click(chromedp.ID("#forgot-link")), chromedp.WaitVisible(chromedp.ID("#forgot-form")))
	webCheckPage(t, ctx, "forgot-password")
	webRun(t, ctx, "ask for a link",
		chromedp.SendKeys(chromedp.ID("#email"), strings.ToUpper(email)),
		chromedp.Click(chromedp.CSS(`#forgot-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#reset-sent")))
	webShot(t, ctx, "40-forgot-sent")
	webCheckPage(t, ctx, "forgot-password-sent")

	msg := smtp.Wait(t, email, "Reset your password")
	link := msg.Link(t, "/reset-password?token=")
	if !strings.HasPrefix(link, base+"/reset-password?token=") {
		t.Fatalf("reset link = %q, want it under PUBLIC_URL %s", link, base)
	}
	webRun(t, ctx, "reset page", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("#reset-form")))
	webCheckPage(t, ctx, "reset-password")
	webRun(t, ctx, "set the new password",
		chromedp.SendKeys(chromedp.ID("#password"), newPassword),
		chromedp.SendKeys(chromedp.ID("#password-again"), newPassword),
		chromedp.Click(chromedp.ID("#revoke-keys")),
		chromedp.Click(chromedp.CSS(`#reset-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#flash")))
	if loc := webLocation(t, ctx); !strings.HasPrefix(loc, base+"/login") {
		t.Errorf("after the reset at %q, want the login page", loc)
	}
	if s := webText(t, ctx, "#flash"); !strings.Contains(s, "Password changed") {
		t.Errorf("flash = %q", s)
	}
	webShot(t, ctx, "41-reset-done")

	// The link works once.
	webRun(t, ctx, "reuse the link",
		chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("#reset-form")),
		chromedp.SendKeys(chromedp.ID("#password"), "yet another passphrase"),
		chromedp.SendKeys(chromedp.ID("#password-again"), "yet another passphrase"),
		chromedp.Click(chromedp.CSS(`#reset-form button[type=submit]`)),
		webUntil(`document.querySelector('#reset-form [data-form-error]').textContent.includes('already used')`))

	webSubmitSignIn(t, ctx, "log in with the new password", base+"/login", email, newPassword,
		chromedp.WaitVisible(chromedp.ID("#next-steps")))

	// Another sign-in elsewhere (a second client), then sign it out from the
	// account page.
	jar, _ := cookiejar.New(nil)
	elsewhere := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	res, err := elsewhere.Post(base+"/api/v1/auth/login", "application/json",
		strings.NewReader(`{"email":"`+email+`","password":"`+newPassword+`"}`))
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("login elsewhere: %v %v", res, err)
	}
	res.Body.Close()
	webRun(t, ctx, "sessions", chromedp.Navigate(base+"/app/account#sessions"), chromedp.WaitVisible(chromedp.ID("#sessions-end-others")))
	if n := webCount(t, ctx, "#session-list li"); n != 2 {
		t.Errorf("session list has %d entries, want 2", n)
	}
	if s := strings.ToLower(webText(t, ctx, "#session-list")); !strings.Contains(s, "this browser") || !strings.Contains(s, "headless chrome") || !strings.Contains(s, "a go program") {
		t.Errorf("session list = %q, want this browser marked and named", s)
	}
	webShot(t, ctx, "42-account-sessions")
	webCheckPage(t, ctx, "account-sessions")
	webRun(t, ctx, "sign out others",
		chromedp.Click(chromedp.CSS(`#sessions-end-others button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#flash")))
	if n := webCount(t, ctx, "#session-list li"); n != 1 {
		t.Errorf("session list after signing out the others has %d entries, want 1", n)
	}
	res, err = elsewhere.Get(base + "/api/v1/me")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the other session answers %d after being signed out, want 401", res.StatusCode)
	}

	// Change the email: it takes effect when the new address's link is
	// opened, and the old address is told.
	const newEmail = "moved@example.com"
	webRun(t, ctx, "change email",
		chromedp.Navigate(base+"/app/account#change-email"), chromedp.WaitVisible(chromedp.ID("#email-form")),
		chromedp.SendKeys(chromedp.ID("#new-email"), newEmail),
		chromedp.SendKeys(chromedp.ID("#email-current-password"), newPassword),
		chromedp.Click(chromedp.CSS(`#email-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#email-sent")))
	webCheckPage(t, ctx, "account-email-sent")
	change := smtp.Wait(t, newEmail, "Confirm your email").Link(t, "/verify-email?token=")
	webRun(t, ctx, "confirm the new address",
		chromedp.Navigate(change), chromedp.WaitVisible(chromedp.ID("#verify-form")),
		chromedp.Click(chromedp.CSS(`#verify-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#flash")))
	webRun(t, ctx, "account moved", chromedp.Navigate(base+"/app/account"), chromedp.WaitVisible(chromedp.ID("#email-status")))
	if s := webText(t, ctx, "#email-status"); !strings.Contains(s, newEmail) || !strings.Contains(s, "is confirmed") {
		t.Errorf("email status after the change = %q", s)
	}
	if n := smtp.Wait(t, email, "email address was changed"); !strings.Contains(n.Text, newEmail) {
		t.Errorf("notice to the old address = %q", n.Text)
	}

	// Two-factor sign-in: enrol from the account page (the QR code and the
	// key it shows; the test is the authenticator app), keep the recovery
	// codes, sign out, sign in with a code, then with a recovery code.
	webRun(t, ctx, "two-factor: start",
		chromedp.Navigate(base+"/app/account#two-factor"), chromedp.WaitVisible(chromedp.ID("#totp-begin-form")),
		chromedp.SendKeys(chromedp.ID("#totp-password"), newPassword),
		chromedp.Click(chromedp.CSS(`#totp-begin-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#totp-enrol")),
		webUntil(`document.querySelector('#totp-qr').src.startsWith('data:image/png;base64,') && document.querySelector('#totp-qr').complete && document.querySelector('#totp-qr').naturalWidth > 0`))
	secret := webText(t, ctx, "#totp-secret")
	if len(secret) != 32 {
		t.Fatalf("the page shows the key %q, want 32 base32 characters", secret)
	}
	webShot(t, ctx, "43-two-factor-enrol")
	webCheckPage(t, ctx, "account-two-factor-enrol")
	code := func(at time.Time) string {
		t.Helper()
		c, err := totp.GenerateCode(secret, at)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	webRun(t, ctx, "two-factor: a wrong first code",
		chromedp.SendKeys(chromedp.ID("#totp-confirm-code"), "000000"),
		chromedp.Click(chromedp.CSS(`#totp-confirm-form button[type=submit]`)),
		webUntil(`document.querySelector('#totp-confirm-form [data-form-error]').textContent.includes('not right')`))
	first := code(time.Now())
	webRun(t, ctx, "two-factor: confirm",
		webClear("#totp-confirm-code"), chromedp.SendKeys(chromedp.ID("#totp-confirm-code"), first),
		chromedp.Click(chromedp.CSS(`#totp-confirm-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#totp-codes")))
	codes := strings.Fields(webText(t, ctx, "#recovery-codes"))
	if len(codes) != 10 {
		t.Fatalf("the page shows %d recovery codes (%q), want 10", len(codes), codes)
	}
	if n := webCount(t, ctx, "#totp-enrol:not([hidden])"); n != 0 {
		t.Error("the QR code and key stay on the page next to the recovery codes")
	}
	webShot(t, ctx, "44-two-factor-recovery-codes")
	webCheckPage(t, ctx, "account-two-factor-codes")
	webRun(t, ctx, "two-factor: codes saved",
		webUntil(`document.querySelector('#codes-done').disabled`),
		chromedp.Click(chromedp.ID("#codes-saved")),
		webUntil(`!document.querySelector('#codes-done').disabled`),
		chromedp.Click(chromedp.ID("#codes-done")),
		chromedp.WaitVisible(chromedp.ID("#totp-disable-form")))
	if s := webText(t, ctx, "#two-factor-status"); !strings.Contains(s, "on") {
		t.Errorf("two-factor status = %q", s)
	}
	webCheckPage(t, ctx, "account-two-factor-on")

	logout := func(step string) {
		t.Helper()
		webRun(t, ctx, step,
			chromedp.Click(chromedp.CSS(".user-menu summary")),
			chromedp.Click(chromedp.CSS(`.user-menu button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(".hero")))
	}
	passwordStep := func(step string) {
		t.Helper()
		webRun(t, ctx, step,
			chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.ID("#email")),
			chromedp.SendKeys(chromedp.ID("#email"), newEmail),
			chromedp.SendKeys(chromedp.ID("#password"), newPassword),
			chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)),
			chromedp.WaitVisible(chromedp.ID("#totp-code")))
	}
	logout("two-factor: log out")
	passwordStep("two-factor: password")
	if webCount(t, ctx, "[data-first-step][hidden]") != 1 || webCount(t, ctx, "[data-second-step]:not([hidden])") != 1 {
		t.Error("the second step does not replace the password step")
	}
	webShot(t, ctx, "45-login-two-factor")
	webCheckPage(t, ctx, "login-two-factor")
	// The first code was spent at confirmation; the code of the step after
	// now is later than it and within the allowed skew.
	webRun(t, ctx, "two-factor: the spent code",
		chromedp.SendKeys(chromedp.ID("#totp-code"), first),
		chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)),
		webUntil(`document.querySelector('#login-form [data-form-error]').textContent.includes('already used')`))
	webRun(t, ctx, "two-factor: sign in with a code",
		webClear("#totp-code"), chromedp.SendKeys(chromedp.ID("#totp-code"), code(time.Now().Add(30*time.Second))),
		chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#next-steps")))
	logout("two-factor: log out again")
	passwordStep("two-factor: password again")
	webRun(t, ctx, "two-factor: sign in with a recovery code",
		chromedp.Click(chromedp.ID("#use-recovery-code")),
		chromedp.WaitVisible(chromedp.ID("#recovery-code")),
		chromedp.SendKeys(chromedp.ID("#recovery-code"), codes[0]))
	webShot(t, ctx, "46-login-recovery-code")
	webCheckPage(t, ctx, "login-recovery-code")
	webRun(t, ctx, "two-factor: recovery code accepted",
		chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#next-steps")))
	// New recovery codes, with the password and one of the old codes: the
	// page shows ten others, once.
	webRun(t, ctx, "two-factor: new recovery codes",
		chromedp.Navigate(base+"/app/account#two-factor"), chromedp.WaitVisible(chromedp.ID("#codes-renew-form")),
		chromedp.SendKeys(chromedp.ID("#codes-renew-password"), newPassword),
		chromedp.SendKeys(chromedp.ID("#codes-renew-code"), codes[1]),
		chromedp.Click(chromedp.CSS(`#codes-renew-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#totp-codes")))
	renewed := strings.Fields(webText(t, ctx, "#recovery-codes"))
	if len(renewed) != 10 || slices.ContainsFunc(renewed, func(c string) bool { return slices.Contains(codes, c) }) {
		t.Errorf("new recovery codes = %q, want ten others than before", renewed)
	}
	webShot(t, ctx, "48-two-factor-new-recovery-codes")
	webCheckPage(t, ctx, "account-two-factor-new-codes")
	// With it on, the owner may require it of the workspace's owners and
	// admins.
	webRun(t, ctx, "two-factor: require it in the workspace",
		chromedp.Navigate(wsBase+"/settings#security"), chromedp.WaitVisible(chromedp.ID("#require-2fa-form")),
		chromedp.Click(chromedp.ID("#require-2fa")), chromedp.WaitVisible(chromedp.ID("#confirm-ok")),
		chromedp.Click(chromedp.ID("#confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS("#require-2fa-form .pill-ok")))
	webShot(t, ctx, "47-settings-require-two-factor")
	webCheckPage(t, ctx, "settings-security")
	// And four eyes: nobody decides their own request.
	webRun(t, ctx, "four eyes: turn it on",
		chromedp.Click(chromedp.ID("#four-eyes")),
		chromedp.WaitVisible(chromedp.CSS("#four-eyes-form .pill-ok")))

	// Delete the account: a wrong password first, then the right one.
	webRun(t, ctx, "delete: wrong password",
		chromedp.Navigate(base+"/app/account#delete-account"), chromedp.WaitVisible(chromedp.ID("#delete-form")),
		chromedp.SendKeys(chromedp.ID("#delete-password"), "not my password"),
		chromedp.Click(chromedp.CSS(`#delete-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#confirm-ok")), chromedp.Click(chromedp.ID("#confirm-ok")),
		webUntil(`document.querySelector('#delete-form [data-form-error]').textContent.includes('current password')`))
	webCheckPage(t, ctx, "account-delete-error")
	webRun(t, ctx, "delete the account",
		webClear("#delete-password"), chromedp.SendKeys(chromedp.ID("#delete-password"), newPassword),
		chromedp.Click(chromedp.CSS(`#delete-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#confirm-ok")), chromedp.Click(chromedp.ID("#confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(".hero")))
	webSubmitSignIn(t, ctx, "cannot log in", base+"/login", newEmail, newPassword,
		webUntil(`document.querySelector('[data-form-error]').textContent.includes('wrong email or password')`))
	problems.check(t)
}
