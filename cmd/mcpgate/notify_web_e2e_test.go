package main

import (
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestApprovalNotifyWebSettings: in a real Chromium, an owner sets the
// approval webhook in Settings (the secret shown back only as a hint); a
// kill an AI client asks for reaches it; the delivery is listed in
// Settings, whose page passes the strict page check at every width.
func TestApprovalNotifyWebSettings(t *testing.T) {
	base, ctx, problems := webStartJourney(t, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8"})
	rv := &e2eHookReceiver{secret: "whsec-web-0123456789abcdef"}
	hook := httptest.NewServer(rv)
	defer hook.Close()

	webSubmitSignIn(t, ctx, "sign up", base+"/signup", "notified@example.com", "correct horse battery staple",
		chromedp.WaitVisible(chromedp.ID("#next-steps")))
	m := regexp.MustCompile(`/app/w/[0-9a-f-]+$`).FindString(webLocation(t, ctx))
	if m == "" {
		t.Fatal("no workspace after signup")
	}
	wsBase := base + m
	webRun(t, ctx, "connect E2B",
		chromedp.Navigate(wsBase+"/connections"), chromedp.WaitVisible(chromedp.ID("#api_key")),
		chromedp.SendKeys(chromedp.ID("#api_key"), "e2b_0123abcd"),
		chromedp.Click(chromedp.CSS(`form[data-api-path$="/connections/e2b"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=key-hint]`)))
	webRun(t, ctx, "enable kill",
		chromedp.Navigate(wsBase+"/settings"), chromedp.WaitVisible(chromedp.ID("#kill-switch")),
		chromedp.Click(chromedp.ID("#kill-switch")), chromedp.WaitVisible(chromedp.ID("#confirm-ok")),
		chromedp.Click(chromedp.ID("#confirm-ok")), chromedp.WaitVisible(chromedp.CSS(".kill-card.kill-on")))
	webRun(t, ctx, "set the webhook",
		chromedp.SendKeys(chromedp.ID("#n-url"), hook.URL+"/mcpgate"),
		chromedp.SendKeys(chromedp.ID("#n-secret"), rv.secret),
		chromedp.Click(chromedp.CSS(`#notifications-form button[type=submit]`)))
	webWaitFor(t, ctx, wsBase+"/settings", `#n-secret[placeholder="kept: …cdef"]`)
	if webCount(t, ctx, `#n-url[value$="/mcpgate"]`) != 1 {
		t.Error("the saved webhook URL is not shown")
	}
	key := webCreateKey(t, ctx, wsBase, "nightly")
	sandbox := webMCPCreateSandbox(t, base+"/mcp", key)
	s := webMCPSession(t, base+"/mcp", key)
	res, err := s.CallTool(t.Context(), &sdk.CallToolParams{Name: "e2b_kill_sandbox", Arguments: map[string]any{"sandbox_id": sandbox}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := res.StructuredContent.(map[string]any)
	id, _ := out["approval_id"].(string)
	rv.wait(t, "approval.requested", id)
	webWaitFor(t, ctx, wsBase+"/settings", "#deliveries-table")
	if s := webText(t, ctx, "#deliveries-table"); !strings.Contains(s, "approval.requested") || !strings.Contains(s, "delivered") {
		t.Errorf("deliveries in Settings = %q", s)
	}
	webShot(t, ctx, "40-settings-notifications")
	webCheckPage(t, ctx, "settings-notifications")
	problems.check(t)
}
