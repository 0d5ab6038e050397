package main

import (
	"net/http/httptest"
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

	wsBase := webKillWorkspace(t, ctx, base, "notified@example.com")
	webRun(t, ctx, "set the webhook",
		chromedp.SendKeys(chromedp.ID("#n-url"), hook.URL+"/mcpgate"),
		chromedp.SendKeys(chromedp.ID("#n-secret"), rv.secret),
		chromedp.Click(chromedp.CSS(`#notifications-form button[type=submit]`)),
		// Saving reloads the page, which then shows the secret's hint.
		chromedp.WaitVisible(chromedp.CSS(`#n-secret[placeholder="kept: …cdef"]`)))
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
	// The sender records the attempt once the receiver has answered.
	webWaitText(t, ctx, wsBase+"/settings", "#deliveries-table", "delivered")
	if s := webText(t, ctx, "#deliveries-table"); !strings.Contains(s, "approval.requested") {
		t.Errorf("deliveries in Settings = %q", s)
	}
	webShot(t, ctx, "40-settings-notifications")
	webCheckPage(t, ctx, "settings-notifications")
	problems.check(t)
}
