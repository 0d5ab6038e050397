package main

// End-to-end tests of grants over their life: refresh rotation and reuse,
// revokes and a removed member refused on the other replica, grants kept to
// their workspace, and a person's approval bound to the grant that asked.

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

func TestOAuthEndToEnd_Grants(t *testing.T) {
	f := newOAuthFixture(t)
	o, rA, rB, bob, teamA, wsA := f.o, f.rA, f.rB, f.bob, f.teamA, f.wsA
	alice := f.alice.with(t)
	cb := newCallback(t)
	id := o.register(t, "grants", cb.url)
	cfg := o.config(id, cb.url)

	t.Run("refresh rotation and reuse", func(t *testing.T) {
		tok := o.mustToken(t, alice, cfg, wsA, "full")
		if time.Until(tok.Expiry) > time.Hour+time.Minute || time.Until(tok.Expiry) < 59*time.Minute {
			t.Errorf("access token expires at %v, want in one hour", tok.Expiry)
		}
		next, err := cfg.TokenSource(context.Background(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
		if err != nil {
			t.Fatalf("refresh err = %v", err)
		}
		o.rec.secret(next.AccessToken, "access token")
		o.rec.secret(next.RefreshToken, "refresh token")
		if next.RefreshToken == tok.RefreshToken || next.AccessToken == tok.AccessToken {
			t.Fatal("refresh did not rotate the tokens")
		}
		if s := o.mcpStatus(t, o.front+"/mcp", next.AccessToken); s != http.StatusOK {
			t.Fatalf("refreshed token = %d", s)
		}
		// The old refresh token again: reuse revokes the whole grant.
		_, err = cfg.TokenSource(context.Background(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
		wantOAuthError(t, err, "invalid_grant")
		for _, r := range o.replicas {
			if s := o.mcpStatus(t, r.url+"/mcp", next.AccessToken); s != http.StatusUnauthorized {
				t.Errorf("%s: token of a grant whose refresh token was reused = %d, want 401", r.url, s)
			}
		}
		_, err = cfg.TokenSource(context.Background(), &oauth2.Token{RefreshToken: next.RefreshToken}).Token()
		wantOAuthError(t, err, "invalid_grant")
	})
	t.Run("revoke on one replica, refused on the other", func(t *testing.T) {
		for _, how := range []string{"oauth/revoke", "dashboard API"} {
			tok := o.mustToken(t, alice, cfg, wsA, "full")
			if s := o.mcpStatus(t, rB.url+"/mcp", tok.AccessToken); s != http.StatusOK { // now cached on B
				t.Fatalf("token on replica B = %d", s)
			}
			if how == "oauth/revoke" {
				resp, err := http.PostForm(rA.url+"/oauth/revoke", url.Values{"token": {tok.RefreshToken}, "client_id": {id}})
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("revoke = %v, %v", resp, err)
				}
				resp.Body.Close()
			} else {
				gid := alice.grantOf(wsA, "grants")
				if gid == "" {
					t.Fatalf("grant not listed: %+v", alice.grants(wsA))
				}
				alice.api(http.MethodDelete, "/api/v1/workspaces/"+wsA+"/grants/"+gid, nil, http.StatusNoContent)
			}
			// Revoked on replica A; B refuses it once it has applied the
			// revoke's notification.
			o.waitApplied(t, rB)
			if s := o.mcpStatus(t, rB.url+"/mcp", tok.AccessToken); s != http.StatusUnauthorized {
				t.Fatalf("%s: replica B still accepts the revoked token (%d) after applying the revoke", how, s)
			}
		}
	})
	t.Run("workspaces", func(t *testing.T) {
		// alice's token for her personal workspace reaches only its
		// E2B team; bob's workspace and its grants stay out of reach.
		tok := o.mustToken(t, alice, cfg, wsA, "full")
		mark := o.simLog.mark()
		cs := o.session(t, o.front+"/mcp", e2eBearer(tok.AccessToken), "", nil)
		e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
		for _, req := range o.simLog.since(mark) {
			if req.key != teamA {
				t.Errorf("a call with alice's grant reached another team's E2B key")
			}
		}
		loc, status, _ := o.consent(t, alice, cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), bob.personal, "full", "allow")
		if loc != nil || status != http.StatusNotFound {
			t.Errorf("consent for a workspace alice is not in = %v %d, want a 404 page", loc, status)
		}
		bob := bob.with(t)
		bob.api(http.MethodGet, "/api/v1/workspaces/"+wsA+"/grants", nil, http.StatusNotFound)
		grants := alice.grants(wsA)
		if len(grants) == 0 {
			t.Fatal("no grant listed")
		}
		bob.api(http.MethodDelete, "/api/v1/workspaces/"+bob.personal+"/grants/"+grants[0].ID, nil, http.StatusNotFound)
		bob.api(http.MethodDelete, "/api/v1/workspaces/"+wsA+"/grants/"+grants[0].ID, nil, http.StatusNotFound)
		if bobs := bob.grants(bob.personal); len(bobs) != 0 {
			t.Errorf("bob's workspace lists %d grants, want none", len(bobs))
		}
		if s := o.mcpStatus(t, o.front+"/mcp", tok.AccessToken); s != http.StatusOK {
			t.Errorf("bob's attempts revoked alice's grant: %d", s)
		}
	})
	t.Run("member removed", func(t *testing.T) {
		carol := o.signup(o.front, "carol@example.com", alice.invite(wsA, "carol@example.com", "member")).with(t)
		tok := o.mustToken(t, carol, cfg, wsA, "read_only")
		if s := o.mcpStatus(t, rB.url+"/mcp", tok.AccessToken); s != http.StatusOK {
			t.Fatalf("carol's token = %d", s)
		}
		if mine := carol.grants(wsA); len(mine) != 1 || mine[0].UserEmail != "carol@example.com" {
			t.Errorf("a member sees grants %+v, want only her own", mine)
		}
		alice.api(http.MethodDelete, "/api/v1/workspaces/"+wsA+"/members/"+carol.id, nil, http.StatusNoContent)
		o.waitApplied(t, rB)
		if s := o.mcpStatus(t, rB.url+"/mcp", tok.AccessToken); s != http.StatusUnauthorized {
			t.Fatal("a removed member's token still works on replica B")
		}
	})

	// A connected app asks for a person's approval as an MCP key does; the
	// approval is bound to its grant, and another grant of the same person
	// cannot spend it.
	t.Run("HumanApproval", func(t *testing.T) {
		alice := alice.with(t)
		cb := newCallback(t)
		cfg := o.config(o.register(t, "approver", cb.url), cb.url)
		alice.setTool(wsA, toolKill, map[string]any{"enabled": true, "approval": "human"})
		t.Cleanup(func() { alice.setTool(wsA, toolKill, map[string]any{"enabled": false}) })
		app := o.session(t, rA.url+"/mcp", e2eBearer(o.mustToken(t, alice, cfg, wsA, "full").AccessToken), "2025-11-25", nil)
		other := o.session(t, rB.url+"/mcp", e2eBearer(o.mustToken(t, alice, cfg, wsA, "full").AccessToken), "2025-11-25", nil)
		sb := o.simSandbox(teamA, map[string]any{"templateID": "base"})
		args := map[string]any{"sandbox_id": sb}

		out := e2eStructured(t, e2eCall(t, app, toolKill, args))
		id, _ := out["approval_id"].(string)
		if out["status"] != "approval_required" || id == "" {
			t.Fatalf("kill through OAuth = %v, want approval_required", out)
		}
		var got struct {
			State      string `json:"state"`
			GrantID    string `json:"grant_id"`
			ClientName string `json:"client_name"`
		}
		alice.decode(alice.api(http.MethodGet, "/api/v1/workspaces/"+wsA+"/approvals/"+id, nil, http.StatusOK), &got)
		if got.State != "pending" || got.GrantID == "" || got.ClientName != "approver" {
			t.Fatalf("approval = %+v, want pending, bound to the app's grant", got)
		}
		alice.api(http.MethodPost, "/api/v1/workspaces/"+wsA+"/approvals/"+id+"/approve", nil, http.StatusOK)
		if msg := e2eCallErr(t, other, toolKill, withArg(args, "approval_id", id)); !strings.Contains(msg, "different call") {
			t.Errorf("another grant spending the approval = %q, want refused", msg)
		}
		if state, _ := o.simSandboxState(teamA, sb); state != "running" {
			t.Fatalf("sandbox = %q after a mismatched use, want running", state)
		}
		e2eCallOK(t, app, toolKill, withArg(args, "approval_id", id))
		if state, _ := o.simSandboxState(teamA, sb); state != "" {
			t.Errorf("sandbox = %q after the approved kill, want gone", state)
		}
	})

	t.Run("NoSecretsInLogs", func(t *testing.T) { o.noSecretsInLogs(t) })
}
