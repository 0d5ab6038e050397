package main

// End-to-end tests of every refusal of the authorization code flow: PKCE,
// redirect URIs, scopes, codes, resources, consent.

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

func TestOAuthEndToEnd_Refusals(t *testing.T) {
	f := newOAuthFixture(t)
	o, rB, wsA := f.o, f.rB, f.wsA
	alice := f.alice.with(t)
	cb := newCallback(t)
	id := o.register(t, "refusals", cb.url)
	cfg := o.config(id, cb.url)

	t.Run("PKCE missing or plain", func(t *testing.T) {
		for name, opts := range map[string][]oauth2.AuthCodeOption{
			"missing": nil,
			"plain":   {oauth2.SetAuthURLParam("code_challenge", oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("code_challenge_method", "plain")},
		} {
			// Shown on the gateway's page, never sent to the client
			// (RFC 9700 §4.11.2).
			loc, status, body := o.consent(t, alice, cfg.AuthCodeURL("s", opts...), wsA, "full", "allow")
			if loc != nil || status != http.StatusBadRequest || !strings.Contains(body, "invalid_request") {
				t.Errorf("%s: consent = %v %d, want a 400 page naming invalid_request", name, loc, status)
			}
		}
	})
	t.Run("no redirect before sign-in", func(t *testing.T) {
		// Signed out, a malformed request goes to the login page,
		// never to the client's redirect URI.
		hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for name, u := range map[string]string{
			"bad response_type": strings.Replace(cfg.AuthCodeURL("s"), "response_type=code", "response_type=token", 1),
			"no PKCE":           cfg.AuthCodeURL("s"),
		} {
			resp, err := hc.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc, _ := resp.Location()
			if resp.StatusCode != http.StatusSeeOther || loc == nil || loc.Path != "/login" {
				t.Errorf("%s, signed out: %d to %v, want 303 to the login page", name, resp.StatusCode, loc)
			}
		}
		// Signed in, it is shown on the gateway's page.
		u := strings.Replace(cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), "response_type=code", "response_type=token", 1)
		loc, status, body := o.consent(t, alice, u, wsA, "full", "allow")
		if loc != nil || status != http.StatusBadRequest || !strings.Contains(body, "unsupported_response_type") {
			t.Errorf("bad response_type, signed in = %v %d, want a 400 page", loc, status)
		}
	})
	t.Run("scopes", func(t *testing.T) {
		// An unknown scope was once accepted, and the person could
		// pick Full when only mcp:tools:read was asked.
		bogus := o.config(id, cb.url)
		bogus.Scopes = []string{"mcp:tools", "bogus"}
		loc, status, body := o.consent(t, alice, bogus.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "allow")
		if loc != nil || status != http.StatusBadRequest || !strings.Contains(body, "invalid_scope") {
			t.Errorf("scope=bogus = %v %d, want a 400 page naming invalid_scope", loc, status)
		}
		read := o.config(id, cb.url)
		read.Scopes = []string{"mcp:tools:read"}
		loc, status, _ = o.consent(t, alice, read.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "allow")
		if loc != nil || status != http.StatusBadRequest {
			t.Errorf("full access for a read-only request = %v %d, want a 400 page", loc, status)
		}
		tok := o.mustToken(t, alice, read, wsA, "read_only")
		if tok.Extra("scope") != "mcp:tools:read" {
			t.Errorf("read-only grant's scope = %v", tok.Extra("scope"))
		}
		offline := o.config(id, cb.url)
		offline.Scopes = []string{"mcp:tools", "offline_access"}
		o.mustToken(t, alice, offline, wsA, "full")
	})
	t.Run("fragment in redirect_uri", func(t *testing.T) {
		frag := o.config(id, cb.url+"#x")
		loc, status, _ := o.consent(t, alice, frag.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "allow")
		if loc != nil || status != http.StatusBadRequest {
			t.Errorf("a redirect_uri with a fragment = %v %d, want a 400 page (as at registration)", loc, status)
		}
	})
	t.Run("wrong verifier", func(t *testing.T) {
		code, _ := o.code(t, alice, cfg, wsA, "full")
		_, err := o.exchange(cfg, code, oauth2.GenerateVerifier())
		wantOAuthError(t, err, "invalid_grant")
		_, err = cfg.Exchange(context.Background(), code) // no verifier at all
		wantOAuthError(t, err, "invalid_request")
	})
	t.Run("code replayed", func(t *testing.T) {
		code, verifier := o.code(t, alice, cfg, wsA, "full")
		tok, err := o.exchange(cfg, code, verifier)
		if err != nil {
			t.Fatal(err)
		}
		o.rec.secret(tok.AccessToken, "access token")
		if s := o.mcpStatus(t, o.front+"/mcp", tok.AccessToken); s != http.StatusOK {
			t.Fatalf("fresh token = %d", s)
		}
		_, err = o.exchange(cfg, code, verifier)
		wantOAuthError(t, err, "invalid_grant")
		for _, r := range o.replicas {
			if s := o.mcpStatus(t, r.url+"/mcp", tok.AccessToken); s != http.StatusUnauthorized {
				t.Errorf("%s: token of a replayed code = %d, want 401 (its grant revoked)", r.url, s)
			}
		}
	})
	t.Run("code expired", func(t *testing.T) {
		code, verifier := o.code(t, alice, cfg, wsA, "full")
		db := o.dbConn(t)
		if _, err := db.Exec(context.Background(), `UPDATE oauth_codes SET expires_at = now() - interval '1 second' WHERE used_at IS NULL`); err != nil {
			t.Fatal(err)
		}
		_, err := o.exchange(cfg, code, verifier)
		wantOAuthError(t, err, "invalid_grant")
	})
	t.Run("code lives 60 s", func(t *testing.T) {
		o.code(t, alice, cfg, wsA, "full")
		var secs float64
		db := o.dbConn(t)
		if err := db.QueryRow(context.Background(), `SELECT extract(epoch FROM max(expires_at) - now()) FROM oauth_codes WHERE used_at IS NULL`).Scan(&secs); err != nil {
			t.Fatal(err)
		}
		if secs > 60 || secs < 50 {
			t.Errorf("a new code expires in %.0f s, want 60", secs)
		}
	})
	t.Run("redirect URI", func(t *testing.T) {
		other := o.config(id, "http://127.0.0.1:1/elsewhere")
		loc, status, body := o.consent(t, alice, other.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "allow")
		if loc != nil || status != http.StatusBadRequest || !strings.Contains(body, "Unexpected return address") {
			t.Errorf("unregistered redirect = %v %d, want a 400 page and no redirect", loc, status)
		}
		// Loopback: any port is the same redirect (RFC 8252 §7.3)...
		u, _ := url.Parse(cb.url)
		anyPort := o.config(id, "http://127.0.0.1:1"+u.Path)
		code, verifier := o.code(t, alice, anyPort, wsA, "full")
		// ...but the token request must repeat the one used.
		_, err := o.exchange(cfg, code, verifier)
		wantOAuthError(t, err, "invalid_grant")
		// https must match exactly.
		web := o.register(t, "web client", "https://app.example.com/cb")
		loc, status, _ = o.consent(t, alice, o.config(web, "https://app.example.com/cb/").AuthCodeURL("s",
			oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "allow")
		if loc != nil || status != http.StatusBadRequest {
			t.Errorf("https redirect with another path = %v %d, want a 400 page", loc, status)
		}
	})
	t.Run("redirect_uri omitted", func(t *testing.T) {
		// A client with one registered redirect URI may leave it out of
		// both requests (RFC 6749 §4.1.1, §4.1.3); the answer goes there.
		bare := o.config(id, "")
		code, verifier := o.code(t, alice, bare, wsA, "full")
		if _, err := o.exchange(bare, code, verifier); err != nil {
			t.Fatalf("Exchange() without redirect_uri err = %v", err)
		}
		// Left out in one request and not the other, it does not match.
		code, verifier = o.code(t, alice, bare, wsA, "full")
		_, err := o.exchange(cfg, code, verifier)
		wantOAuthError(t, err, "invalid_grant")
	})
	t.Run("wrong resource", func(t *testing.T) {
		loc, status, body := o.consent(t, alice, cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()),
			oauth2.SetAuthURLParam("resource", "https://other.example.com/mcp")), wsA, "full", "allow")
		if loc != nil || status != http.StatusBadRequest || !strings.Contains(body, "invalid_target") {
			t.Errorf("authorize for another resource = %v %d, want a 400 page naming invalid_target", loc, status)
		}
		code, verifier := o.code(t, alice, cfg, wsA, "full")
		_, err := cfg.Exchange(context.Background(), code, oauth2.VerifierOption(verifier),
			oauth2.SetAuthURLParam("resource", "https://other.example.com/mcp"))
		wantOAuthError(t, err, "invalid_target")
		// A token whose grant names another resource is refused by /mcp.
		tok := o.mustToken(t, alice, cfg, wsA, "full")
		db := o.dbConn(t)
		if _, err := db.Exec(context.Background(), `UPDATE oauth_grants SET resource = 'https://other.example.com/mcp'
			WHERE id = (SELECT grant_id FROM oauth_tokens WHERE hash = sha256($1::bytea))`, []byte(tok.AccessToken)); err != nil {
			t.Fatal(err)
		}
		if s := o.mcpStatus(t, rB.url+"/mcp", tok.AccessToken); s != http.StatusUnauthorized {
			t.Errorf("token for another audience = %d, want 401", s)
		}
	})
	t.Run("denied", func(t *testing.T) {
		loc, _, _ := o.consent(t, alice, cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "deny")
		if loc == nil || loc.Query().Get("error") != "access_denied" || loc.Query().Get("code") != "" {
			t.Errorf("deny = %v, want access_denied", loc)
		}
	})
	t.Run("consent without CSRF", func(t *testing.T) {
		hc := &http.Client{Jar: alice.client.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		q, _ := url.Parse(cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
		form := q.Query()
		form.Set("workspace", wsA)
		form.Set("access", "full")
		form.Set("decision", "allow")
		resp, err := hc.PostForm(o.front+"/oauth/authorize", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("consent POST without CSRF token = %d, want 403", resp.StatusCode)
		}
	})

	t.Run("NoSecretsInLogs", func(t *testing.T) { o.noSecretsInLogs(t) })
}
