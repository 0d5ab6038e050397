package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/upstream/upstreamtest"
)

// TestServerRelaysWebJourney: in a real Chromium, an owner turns on
// sampling for a server (saved at once, kept after a reload), allow-lists
// a URL-mode elicitation host in the textarea, and allows a host the
// server asked for with its "Allow" button; the section passes the
// strict page check at every width (390 px included).
func TestServerRelaysWebJourney(t *testing.T) {
	dsn := storetest.NewDatabase(t)
	base, ctx, problems := webStartJourney(t, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8", "DATABASE_URL": dsn})
	up := upstreamtest.New(t, &sdk.Tool{Name: "search", Description: "finds pages", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}})

	webSubmitSignIn(t, ctx, "sign up", base+"/signup", "relays@example.com", "correct horse battery staple",
		chromedp.WaitVisible(chromedp.ID("#next-steps")))
	m := regexp.MustCompile(`/app/w/([0-9a-f-]+)$`).FindStringSubmatch(webLocation(t, ctx))
	if m == nil {
		t.Fatal("no workspace after signup")
	}
	wsBase := base + m[0]
	webRun(t, ctx, "add a server", chromedp.Navigate(wsBase+"/servers"), chromedp.WaitVisible(chromedp.ID("#add-server")),
		chromedp.SendKeys(chromedp.ID("#server-name"), "docs"),
		chromedp.SendKeys(chromedp.ID("#server-url"), up.URL),
		chromedp.Click(chromedp.CSS(`#add-server button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#server-relays")))
	if webCount(t, ctx, `#allow-sampling:checked`) != 0 || webCount(t, ctx, `#allow-roots:checked`) != 0 {
		t.Fatal("sampling or roots is on for a new server")
	}

	// What the call path records when the server names a host.
	db, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if err := db.RecordElicitationHost(context.Background(), m[1], "docs", "pay.example.com"); err != nil {
		t.Fatal(err)
	}
	webRun(t, ctx, "turn sampling on",
		chromedp.Click(chromedp.CSS(`#allow-sampling-form .switch`)),
		chromedp.WaitVisible(chromedp.CSS(`#allow-sampling-form [data-saved]`)))
	webRun(t, ctx, "allow a host in the list",
		chromedp.Navigate(wsBase+"/servers/docs"), chromedp.WaitVisible(chromedp.ID("#elicitation-hosts")),
		chromedp.SendKeys(chromedp.ID("#elicitation-hosts"), "Login.Example.com:8443\n"),
		chromedp.Click(chromedp.CSS(`#elicitation-hosts-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#flash")), chromedp.WaitVisible(chromedp.ID("#server-relays")))
	if webCount(t, ctx, `#allow-sampling:checked`) != 1 {
		t.Error("sampling is off after a reload")
	}
	if got := webFieldValue(t, ctx, "#elicitation-hosts"); got != "login.example.com:8443" {
		t.Errorf("allow-list = %q, want login.example.com:8443", got)
	}
	webCheckPage(t, ctx, "server-relays")
	webRun(t, ctx, "allow a host asked for",
		chromedp.Click(chromedp.CSS(`#flash [data-flash-close]`)), chromedp.WaitNotVisible(chromedp.ID("#flash")),
		chromedp.Click(chromedp.CSS(`tr[data-host="pay.example.com"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("#flash")), chromedp.WaitVisible(chromedp.CSS(`tr[data-host="pay.example.com"] .pill-ok`)))
	if got := webFieldValue(t, ctx, "#elicitation-hosts"); got != "login.example.com:8443\npay.example.com" {
		t.Errorf("allow-list after Allow = %q", got)
	}
	if s := webText(t, ctx, `tr[data-host="pay.example.com"]`); !strings.Contains(s, "allowed") {
		t.Errorf("host row = %q, want allowed", s)
	}
	row, err := db.FindServer(context.Background(), m[1], "docs")
	if err != nil || !row.AllowSampling || row.AllowRoots || len(row.ElicitationURLHosts) != 2 {
		t.Errorf("stored = %+v, %v; want sampling on, roots off, two hosts", row, err)
	}
	webCheckPage(t, ctx, "server-relays-allowed")
	webShotSection(t, ctx, "#server-relays", "server-relays-section")
	problems.check(t)
}

// webFieldValue is the value of the form field sel.
func webFieldValue(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	q, _ := json.Marshal(sel)
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+string(q)+`).value`))
	if err != nil {
		t.Fatalf("value of %s: %v", sel, err)
	}
	return v
}

// webShotSection saves a screenshot at each width of the page scrolled to
// sel, for a person to look at.
func webShotSection(t *testing.T, ctx context.Context, sel, shot string) {
	t.Helper()
	q, _ := json.Marshal(sel)
	for _, vp := range webWidths {
		var emulate []chromedp.EmulateViewportOption
		if vp.mob {
			emulate = append(emulate, chromedp.EmulateScale(2))
		}
		webRun(t, ctx, fmt.Sprintf("%s at %d px", shot, vp.w), chromedp.EmulateViewport(vp.w, vp.h, emulate...))
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(document.querySelector(`+string(q)+`).scrollIntoView(), true)`)); err != nil {
			t.Fatalf("scroll to %s: %v", sel, err)
		}
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", shot, err)
		}
		if err := os.WriteFile(filepath.Join(webScreenshotDir, fmt.Sprintf("%s-%d.png", shot, vp.w)), png, 0o644); err != nil {
			t.Errorf("save screenshot: %v", err)
		}
	}
}
