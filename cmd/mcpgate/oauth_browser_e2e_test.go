package main

// End-to-end test of OAuth as a person sees it: go-sdk's
// AuthorizationCodeHandler (DCR, or a client ID metadata document, with
// PKCE and resource) with headless Chromium signing in and consenting, the
// step-up from a read-only grant, and revoking an app on the Keys page.

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

func TestOAuthEndToEnd_Browser(t *testing.T) {
	f := newOAuthFixture(t)
	o, rA, rB, alice, wsA := f.o, f.rA, f.rB, f.alice, f.wsA

	bctx, cancel := webNewBrowser(t)
	defer cancel()
	// Chromium signs alice in on the first authorization and consents;
	// the second finds her signed in.
	signedIn := false
	var fetcherOf func(cb *callback, accessOf func() string) auth.AuthorizationCodeFetcher
	fetcher := func(cb *callback, access string) auth.AuthorizationCodeFetcher {
		return fetcherOf(cb, func() string { return access })
	}
	fetcherOf = func(cb *callback, accessOf func() string) auth.AuthorizationCodeFetcher {
		return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			access := accessOf()
			webRun(t, bctx, "open the authorization URL", chromedp.Navigate(args.URL))
			if !signedIn {
				// The login page says which gateway and which app
				// (before the fix, it said only "Log in").
				webRun(t, bctx, "login page", chromedp.WaitVisible(chromedp.ID("#email")))
				if got := webText(t, bctx, "#login-app"); !strings.Contains(got, "E2E native client") {
					t.Errorf("the login page during OAuth says %q, want the app's name", got)
				}
				if got := webText(t, bctx, "#login-gateway"); !strings.Contains(got, strings.TrimPrefix(o.front, "http://")) {
					t.Errorf("the login page during OAuth names gateway %q, want %s", got, o.front)
				}
				webCheckPage(t, bctx, "oauth-login")
				webRun(t, bctx, "sign in",
					chromedp.WaitVisible(chromedp.ID("#email")),
					chromedp.SendKeys(chromedp.ID("#email"), alice.email),
					chromedp.SendKeys(chromedp.ID("#password"), e2ePassword),
					chromedp.Click(chromedp.CSS(`button[type=submit]`)))
				signedIn = true
			}
			webRun(t, bctx, "consent page", chromedp.WaitVisible(chromedp.ID("#consent-form")))
			webShot(t, bctx, "oauth-consent-"+access)
			webCheckPage(t, bctx, "oauth-consent-"+access) // accessibility and layout at 1280 and 390 px, screenshots
			// What a person needs to trust it, and nothing that leads
			// away from the flow.
			for sel, want := range map[string]string{"#consent-gateway": strings.TrimPrefix(o.front, "http://"),
				"#consent-resource": o.front + "/mcp", "#consent-asks": "access", "#consent-known": "",
				".flow-origin": strings.TrimPrefix(o.front, "http://")} {
				if got := webText(t, bctx, sel); !strings.Contains(got, want) {
					t.Errorf("consent %s = %q, want %q", sel, got, want)
				}
			}
			if n, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('header a, footer a').length`)); n != 0 {
				t.Errorf("the consent page's header or footer has %d links leading away from the flow", n)
			}
			q, _ := json.Marshal(access)
			webRun(t, bctx, "choose and allow", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := chromedp.Evaluate[bool](`(document.querySelector('input[name=access][value=' + `+string(q)+` + ']').checked = true, true)`)(ctx, tg)
				return err
			}), chromedp.Click(chromedp.ID("#consent-allow")), chromedp.WaitVisible(chromedp.ID("#done")))
			v := cb.wait(t)
			o.rec.secret(v.Get("code"), "authorization code")
			return &auth.AuthorizationResult{Code: v.Get("code"), State: v.Get("state"), Iss: v.Get("iss")}, nil
		}
	}
	connect := func(t *testing.T, h *auth.AuthorizationCodeHandler, version string) *mcp.ClientSession {
		cs, err := e2eConnect(t, &mcp.StreamableClientTransport{Endpoint: o.front + "/mcp", OAuthHandler: h, MaxRetries: -1},
			version, nil, 90*time.Second)
		if err != nil {
			t.Fatalf("Connect() with OAuth err = %v", err)
		}
		return cs
	}

	t.Run("DCR", func(t *testing.T) {
		cb := newCallback(t)
		h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
			DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
				ClientName: "E2E native client", RedirectURIs: []string{cb.url}, TokenEndpointAuthMethod: "none"}},
			AuthorizationCodeFetcher: fetcher(cb, "full"), RequestRefreshToken: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		cs := connect(t, h, "")
		out := e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
		if data, _ := out["data"].([]any); len(data) != 1 {
			t.Errorf("list_sandboxes through OAuth = %v, want alice's one sandbox", out)
		}
		// Both protocol generations take the same token.
		ts, _ := h.TokenSource(context.Background())
		tok, err := ts.Token()
		if err != nil {
			t.Fatal(err)
		}
		o.rec.secret(tok.AccessToken, "access token")
		legacy := o.session(t, o.front+"/mcp", e2eBearer(tok.AccessToken), "2025-11-25", nil)
		e2eCallOK(t, legacy, "e2b_list_sandboxes", nil)
		// The audit row names the grant and its client.
		grants := alice.with(t).grants(wsA)
		if len(grants) != 1 || grants[0].Scope != "full" {
			t.Fatalf("grants = %+v, want the one full grant", grants)
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			raw := alice.with(t).api(http.MethodGet, "/api/v1/workspaces/"+wsA+"/audit?tool=e2b_list_sandboxes", nil, http.StatusOK)
			if strings.Contains(string(raw), `"grant_id":"`+grants[0].ID+`"`) &&
				strings.Contains(string(raw), `"client_name":"E2E native client"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no audit row names grant %s and its client: %s", grants[0].ID, raw)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	var cimdHandler *auth.AuthorizationCodeHandler
	t.Run("ClientIDMetadataDocument", func(t *testing.T) {
		cb := newCallback(t)
		id := o.cimd.URL + "/client.json"
		o.setCIMD("/client.json", map[string]any{"client_id": id, "client_name": "E2E CIMD client",
			"redirect_uris": []string{cb.url}, "token_endpoint_auth_method": "none"})
		access := "read_only"
		h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
			ClientIDMetadataDocumentConfig: &auth.ClientIDMetadataDocumentConfig{URL: id},
			RedirectURL:                    cb.url,
			AuthorizationCodeFetcher:       fetcherOf(cb, func() string { return access }),
		})
		if err != nil {
			t.Fatal(err)
		}
		cimdHandler = h
		cs := connect(t, h, "2025-11-25")
		e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
		names := e2eToolNames(t, cs)
		if slices.Contains(names, "e2b_create_sandbox") || slices.Contains(names, "e2b_pause_sandbox") {
			t.Errorf("read-only grant lists %v, want read-only tools only", names)
		}
		// A write tool gets the step-up answer (MCP 2025-11-25): 403,
		// insufficient_scope naming the scope needed, and words that
		// call the grant a grant (before the fix, "This MCP key is read-only").
		ts, _ := h.TokenSource(context.Background())
		ro, err := ts.Token()
		if err != nil {
			t.Fatal(err)
		}
		o.rec.secret(ro.AccessToken, "access token")
		mark := o.simLog.mark()
		resp, body := o.rawMCPCall(t, o.front+"/mcp", ro.AccessToken, "e2b_create_sandbox")
		want := `Bearer error="insufficient_scope", resource_metadata="` + o.front + `/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`
		if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), want) ||
			!strings.Contains(string(body), "grant") || strings.Contains(string(body), "MCP key") {
			t.Fatalf("read-only grant calling a write tool: %d %q %s, want 403 %q and a grant's wording",
				resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, want)
		}
		if n := len(o.simLog.since(mark)); n != 0 {
			t.Errorf("the refused call reached E2B (%d requests)", n)
		}
		// go-sdk steps up: it asks alice again, she gives full access
		// this time, and the same call goes through.
		access = "full"
		e2eCallOK(t, cs, "e2b_create_sandbox", map[string]any{})
	})

	// The Keys page lists both apps; revoking one there ends its
	// access on every replica.
	t.Run("ConnectedApps", func(t *testing.T) {
		if cimdHandler == nil {
			t.Skip("needs the metadata document client")
		}
		ts, _ := cimdHandler.TokenSource(context.Background())
		tok, err := ts.Token()
		if err != nil {
			t.Fatal(err)
		}
		o.rec.secret(tok.AccessToken, "access token")
		gid := alice.with(t).grantOf(wsA, "E2E CIMD client")
		webRun(t, bctx, "keys page", chromedp.Navigate(o.front+"/app/w/"+wsA+"/keys"), chromedp.WaitVisible(chromedp.ID("#grants-table")))
		for _, want := range []string{"E2E native client", "E2E CIMD client", "self-registered", "Read-only"} {
			if got := webText(t, bctx, "#connected-apps"); !strings.Contains(got, want) {
				t.Errorf("Connected apps lacks %q: %s", want, got)
			}
		}
		webShot(t, bctx, "oauth-connected-apps")
		webCheckPage(t, bctx, "connected apps")
		for _, r := range o.replicas { // now cached on both
			if s := o.mcpStatus(t, r.url+"/mcp", tok.AccessToken); s != http.StatusOK {
				t.Fatalf("%s: the app's token before the revoke = %d, want 200", r.url, s)
			}
		}
		// The page reloads once the revoke is answered, and the revoked
		// grant's form is gone from it: the revoke is committed then, and
		// both replicas refuse the token once they have applied it.
		grantForm := `form[data-api-path$="/grants/` + gid + `"]`
		webRun(t, bctx, "revoke", chromedp.Click(chromedp.CSS(grantForm+` button`)),
			chromedp.WaitVisible(chromedp.ID("#confirm-ok")), chromedp.Click(chromedp.ID("#confirm-ok")),
			chromedp.WaitNotPresent(chromedp.CSS(grantForm)))
		o.waitApplied(t)
		if o.mcpStatus(t, rA.url+"/mcp", tok.AccessToken) != http.StatusUnauthorized ||
			o.mcpStatus(t, rB.url+"/mcp", tok.AccessToken) != http.StatusUnauthorized {
			t.Fatal("the app revoked in the dashboard still works")
		}
		// The step-up left the app two grants (read-only, then full);
		// the revoked one is gone from the page.
		webRun(t, bctx, "reloaded", chromedp.WaitVisible(chromedp.ID("#grants-table")))
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('form[data-api-path$="/grants/`+gid+`"]').length`))
		if err != nil || n != 0 {
			t.Errorf("the revoked grant is still listed (%d, %v)", n, err)
		}
	})

	t.Run("NoSecretsInLogs", func(t *testing.T) { o.noSecretsInLogs(t) })
}
