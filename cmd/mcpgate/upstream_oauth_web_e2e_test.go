package main

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestUpstreamOAuthWebJourney: in a real Chromium, an admin of gateway A
// adds gateway B as a server that signs in with OAuth, clicks Connect on
// its page, signs in and consents at B, and comes back to the server's
// page connected, with B's tools listed; each page passes the strict page
// check, and no token of B is on any of them.
func TestUpstreamOAuthWebJourney(t *testing.T) {
	f := newUpstreamOAuthFixture(t)
	bctx, cancel := webNewBrowser(t)
	t.Cleanup(cancel)
	problems := &webBrowserProblems{}
	problems.listen(bctx)
	ws := f.wsA

	webSubmitSignIn(t, bctx, "sign in at A", f.aFront+"/login", f.alice.email, e2ePassword,
		chromedp.WaitNotPresent(chromedp.ID("#password")))
	webRun(t, bctx, "open the servers page", chromedp.Navigate(f.aFront+"/app/w/"+ws+"/servers"), chromedp.WaitVisible(chromedp.ID("#add-server")))
	webRun(t, bctx, "add B as an OAuth server",
		chromedp.SendKeys(chromedp.ID("#server-name"), "up"),
		chromedp.SendKeys(chromedp.ID("#server-url"), f.b.front+"/mcp"),
		chromedp.SetValue(chromedp.ID("#server-credential"), "oauth"),
		chromedp.Click(chromedp.CSS(`#add-server button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-oauth-state=not_connected]`)))
	webCheckPage(t, bctx, "server-oauth-not-connected")
	webRun(t, bctx, "connect",
		chromedp.Click(chromedp.CSS(`form[data-api-path$="/servers/up/connect"] button`)),
		chromedp.WaitVisible(chromedp.ID("#email")))
	if loc := webLocation(t, bctx); !strings.HasPrefix(loc, f.b.front+"/") {
		t.Fatalf("Connect sent the browser to %s, want B's sign-in", loc)
	}
	webRun(t, bctx, "sign in at B",
		chromedp.SendKeys(chromedp.ID("#email"), f.bob.email),
		chromedp.SendKeys(chromedp.ID("#password"), e2ePassword),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#consent-form")))
	webRun(t, bctx, "allow", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(document.querySelector('input[name=access][value=full]').checked = true, true)`)(ctx, tg)
		return err
	}), chromedp.Click(chromedp.ID("#consent-allow")), chromedp.WaitVisible(chromedp.CSS(`[data-oauth-state=connected]`)))
	if loc := webLocation(t, bctx); !strings.HasPrefix(loc, f.aFront+"/app/w/"+ws+"/servers/up") {
		t.Errorf("after consenting the browser is at %s", loc)
	}
	if s := webText(t, bctx, "#server-tools"); !strings.Contains(s, "up_e2b_list_sandboxes") {
		t.Errorf("tools table = %q, want B's tools", s)
	}
	webCheckPage(t, bctx, "server-oauth-connected")
	html, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		t.Fatal(err)
	}
	if bTokenIn(html) {
		t.Error("the server page holds one of B's tokens")
	}
	webRun(t, bctx, "disconnect",
		chromedp.Click(chromedp.CSS(`form[data-api-path$="/servers/up/connection"] button`)),
		chromedp.WaitVisible(chromedp.ID("#confirm-ok")), chromedp.Click(chromedp.ID("#confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(`[data-oauth-state=not_connected]`)))
	problems.check(t)
}
