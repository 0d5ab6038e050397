package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/mcpgate/mcpgate/internal/mail"
)

// Every mail the gateway sends reads on a phone as on a desktop: rendered
// as a mail client would show its HTML part, in Chromium at 1280 and 390
// px, nothing sticks out sideways (a long link or summary wraps) and axe
// finds nothing serious. Screenshots: mail-<kind>-<width>.png.
func TestMailHTML_Widths(t *testing.T) {
	long := "https://gateway.example.com/app/w/0f2d6c1e-5b7a-4c1e-9d3f-8a6b2c4d5e6f/approvals/3kq8x0v7w2m5n9p4r6t1y0zb"
	data := map[mail.Kind]mail.Data{
		mail.KindReset:         {To: "ada@example.com", Link: "https://gateway.example.com/reset-password?token=" + strings.Repeat("x", 43)},
		mail.KindVerify:        {To: "ada@example.com", Link: "https://gateway.example.com/verify-email?token=" + strings.Repeat("y", 43)},
		mail.KindEmailChanged:  {To: "ada@example.com", NewEmail: "ada.lovelace.with.a.long.address@subdomain.example.org"},
		mail.KindAccountExists: {To: "ada@example.com", Link: "https://gateway.example.com/login"},
		mail.KindApprovalRequested: {To: "ada@example.com", Link: long, Approval: &mail.Approval{
			Tool: "Kill a sandbox (e2b_kill_sandbox)", Summary: "End sandbox ixn4k2c9r7v1b5z0q8w3e6t2 (template base, started 3 hours ago, 2 GiB, metadata project=a-rather-long-project-name-without-spaces)",
			RequestedBy: `the MCP key “nightly-ci-agent” of ada.lovelace.with.a.long.address@subdomain.example.org`,
			Workspace:   "Analytical Engines Ltd", Expires: "2026-12-02 10:15 UTC", CanDecide: true}},
	}
	ctx, cancel := webNewBrowser(t)
	defer cancel()
	axe := webAxeSource(t)
	for kind, d := range data {
		d.PublicURL = "https://gateway.example.com"
		msg, err := mail.Render(kind, d)
		if err != nil {
			t.Fatalf("Render(%s) err = %v", kind, err)
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte(msg.HTML))
		}))
		webRun(t, ctx, "open the "+string(kind)+" mail", chromedp.Navigate(srv.URL))
		for _, vp := range webWidths {
			at := fmt.Sprintf("the %s mail at %d px", kind, vp.w)
			webRun(t, ctx, at, chromedp.EmulateViewport(vp.w, vp.h))
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`,
				chromedp.EvalAwaitPromise)); err != nil {
				t.Fatalf("%s: wait for layout: %v", at, err)
			}
			overflow, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](webOverflowJS))
			if err != nil {
				t.Fatalf("%s: measure overflow: %v", at, err)
			}
			if len(overflow) > 0 {
				t.Errorf("%s scrolls sideways: %s", at, strings.Join(overflow, "; "))
			}
			for _, v := range webRunAxe(t, ctx, axe, at) {
				t.Errorf("%s: axe %s", at, v)
			}
			webShot(t, ctx, fmt.Sprintf("mail-%s-%d", kind, vp.w))
		}
		srv.Close()
	}
}
