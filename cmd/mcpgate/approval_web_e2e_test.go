package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// webKillWorkspace signs up email in the browser, connects E2B (the
// simulator) and turns the kill tool on in Settings; it returns the
// workspace's dashboard URL.
func webKillWorkspace(t *testing.T, ctx context.Context, base, email string) string {
	t.Helper()
	webSubmitSignIn(t, ctx, "sign up", base+"/signup", email, "correct horse battery staple",
		chromedp.WaitVisible(chromedp.ID("#next-steps")))
	m := regexp.MustCompile(`/app/w/[0-9a-f-]+$`).FindString(webLocation(t, ctx))
	if m == "" {
		t.Fatal("no workspace after signup")
	}
	wsBase := base + m
	webRun(t, ctx, "connect E2B",
		chromedp.Navigate(wsBase+"/connections"), chromedp.WaitVisible(chromedp.ID("#key-e2b")),
		chromedp.SendKeys(chromedp.ID("#key-e2b"), "e2b_0123abcd"),
		chromedp.Click(chromedp.CSS(`form[data-api-path$="/connections/e2b"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=key-hint]`)))
	webRun(t, ctx, "enable kill",
		chromedp.Navigate(wsBase+"/settings"), chromedp.WaitVisible(chromedp.ID("#kill-switch")),
		chromedp.Click(chromedp.ID("#kill-switch")), chromedp.WaitVisible(chromedp.ID("#confirm-ok")),
		chromedp.Click(chromedp.ID("#confirm-ok")), chromedp.WaitVisible(chromedp.CSS(".kill-card.kill-on")))
	return wsBase
}

// TestApprovalWebPage: in a real Chromium, a person sees the pending count
// in the navigation, opens the approval URL an AI client was given, reads
// what would happen, approves it through the dialog, and the client's
// repeated call then kills the sandbox; a second request is denied there.
func TestApprovalWebPage(t *testing.T) {
	base, ctx, problems := webStartJourney(t, nil)

	wsBase := webKillWorkspace(t, ctx, base, "approver@example.com")
	sel, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('approval-e2b_kill_sandbox').value`))
	if err != nil || sel != "human" {
		t.Errorf("kill's approval in settings = %q, %v; want human", sel, err)
	}
	webShot(t, ctx, "30-settings-approval")
	key := webCreateKey(t, ctx, wsBase, "approvals")

	sandbox := webMCPCreateSandbox(t, base+"/mcp", key)
	s := webMCPSession(t, base+"/mcp", key)
	kill := func(args map[string]any) (map[string]any, *sdk.CallToolResult) {
		t.Helper()
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		res, err := s.CallTool(cctx, &sdk.CallToolParams{Name: "e2b_kill_sandbox", Arguments: args})
		if err != nil {
			t.Fatalf("kill: %v", err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		return out, res
	}
	out, _ := kill(map[string]any{"sandbox_id": sandbox})
	approvalURL, _ := out["approval_url"].(string)
	id, _ := out["approval_id"].(string)
	if out["status"] != "approval_required" || approvalURL != wsBase+"/approvals/"+id {
		t.Fatalf("first kill = %v, want the approval page URL", out)
	}

	webWaitFor(t, ctx, wsBase, "#pending-count")
	if n := webText(t, ctx, "#pending-count"); n != "1" {
		t.Errorf("pending count in the navigation = %q, want 1", n)
	}
	webCheckPage(t, ctx, "overview-pending")
	webCheckPhoneMenu(t, ctx, "overview-pending", 1)
	webRun(t, ctx, "approval page", chromedp.Navigate(approvalURL), chromedp.WaitVisible(chromedp.ID("#approve-button")))
	if s := webText(t, ctx, "#approval-summary"); !strings.Contains(s, sandbox) || !strings.Contains(s, "template base") ||
		!strings.Contains(s, "owner=web-e2e") {
		t.Errorf("summary = %q, want the sandbox, its template and metadata", s)
	}
	if a := webText(t, ctx, "#approval-arguments"); !strings.Contains(a, sandbox) {
		t.Errorf("arguments = %q", a)
	}
	// The key is named as its owner named it, not by its id alone.
	if n := webText(t, ctx, "#approval-credential strong"); n != "approvals" {
		t.Errorf("the approval page names the key %q, want its name \"approvals\"", n)
	}
	webShot(t, ctx, "31-approval-pending")
	webCheckPage(t, ctx, "approval-pending")
	webRun(t, ctx, "approve",
		chromedp.Click(chromedp.ID("#approve-button")), chromedp.WaitVisible(chromedp.ID("#confirm-ok")),
		chromedp.Click(chromedp.ID("#confirm-ok")), chromedp.WaitVisible(chromedp.ID("#approved-notice")))
	if d := webText(t, ctx, "#approval-decider"); !strings.Contains(d, "approver@example.com") {
		t.Errorf("decided by = %q", d)
	}
	webShot(t, ctx, "32-approval-approved")
	webCheckPage(t, ctx, "approval-approved")

	out, res := kill(map[string]any{"sandbox_id": sandbox, "approval_id": id})
	if res.IsError || out["killed"] != true {
		t.Fatalf("kill with the approval = %s", testutil.ToolText(res))
	}
	webWaitText(t, ctx, approvalURL, "h1", "used")

	// A second request, denied on its page.
	other := webMCPCreateSandbox(t, base+"/mcp", key)
	out, _ = kill(map[string]any{"sandbox_id": other})
	id2, _ := out["approval_id"].(string)
	webRun(t, ctx, "deny", chromedp.Navigate(wsBase+"/approvals/"+id2), chromedp.WaitVisible(chromedp.ID("#deny-button")),
		chromedp.Click(chromedp.ID("#deny-button")), chromedp.WaitVisible(chromedp.CSS(`h1 [data-state=denied]`)))
	if _, res := kill(map[string]any{"sandbox_id": other, "approval_id": id2}); !res.IsError || !strings.Contains(testutil.ToolText(res), "denied") {
		t.Errorf("kill after deny = %s", testutil.ToolText(res))
	}
	webWaitText(t, ctx, wsBase+"/approvals", "#approvals-table", "denied")
	webShot(t, ctx, "33-approvals-list")
	webCheckPage(t, ctx, "approvals-list")

	// Settings: a tool's approval select saves at once; the guardrails form
	// saves and the gateway enforces it.
	webRun(t, ctx, "settings again", chromedp.Navigate(wsBase+"/settings"), chromedp.WaitVisible(chromedp.ID("#approval-e2b_pause_sandbox")))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(function(){var el=document.getElementById('approval-e2b_pause_sandbox');`+
		`el.focus();el.value='human';el.dispatchEvent(new Event('change',{bubbles:true}));return true})()`)); err != nil {
		t.Fatalf("choose human for pause: %v", err)
	}
	webRun(t, ctx, "approval saved", chromedp.WaitVisible(chromedp.CSS(`#approval-e2b_pause_sandbox ~ [data-saved]`)))
	webRun(t, ctx, "guardrails",
		webClear("#g-timeout"), chromedp.SendKeys(chromedp.ID("#g-timeout"), "600"),
		chromedp.SendKeys(chromedp.ID("#g-templates"), "base, python"),
		chromedp.Click(chromedp.CSS(`#guardrails-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#g-templates[value="base, python"]`)))
	webShot(t, ctx, "34-settings-guardrails")
	webCheckPage(t, ctx, "settings-guardrails")
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	s2 := webMCPSession(t, base+"/mcp", key)
	res, err = s2.CallTool(cctx, &sdk.CallToolParams{Name: "e2b_create_sandbox", Arguments: map[string]any{"timeout": 900}})
	if err != nil || !res.IsError || !strings.Contains(testutil.ToolText(res), "at most 600 seconds") {
		t.Errorf("create over the guardrail set in the browser = %v, %v", testutil.ToolText(res), err)
	}
	res, err = s2.CallTool(cctx, &sdk.CallToolParams{Name: "e2b_pause_sandbox", Arguments: map[string]any{"sandbox_id": other}})
	if err != nil || res.IsError || !strings.Contains(testutil.ToolText(res), "approval") {
		t.Errorf("pause after choosing human in the browser = %v, %v; want an approval request", testutil.ToolText(res), err)
	}
	problems.check(t)
}
