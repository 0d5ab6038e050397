package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/password"
)

// TestUserResetPassword_RevokesOnRunningGateway (issue 32): the MCP key and
// the OAuth access token that `mcpgate user reset-password --revoke-keys`
// revokes are refused within a second by both replicas of a gateway running
// on the same database, though each had them cached, and the account's
// dashboard session ends; neither the output nor the audit log holds a
// secret.
func TestUserResetPassword_RevokesOnRunningGateway(t *testing.T) {
	saved := userPasswordParams
	userPasswordParams = password.Params{Time: 1, Memory: 1024, Threads: 1}
	t.Cleanup(func() { userPasswordParams = saved })
	o := newOAuthEnv(t)
	ctx := context.Background()
	bob := o.signup(o.front, "bob@example.com", "")
	// createKey expects the connector URL of e2ePublicURL; this
	// deployment's PUBLIC_URL is its front proxy.
	var key e2eKey
	status, raw := bob.do(e2eNoRecord(ctx), http.MethodPost, "/api/v1/workspaces/"+bob.personal+"/keys", map[string]any{"name": "laptop"})
	if status != http.StatusCreated {
		t.Fatalf("create key = %d %s", status, raw)
	}
	bob.decode(raw, &key)
	o.rec.secret(key.Key, "MCP key")
	cb := newCallback(t)
	tok := o.mustToken(t, bob, o.config(o.register(t, "operator test app", cb.url), cb.url), bob.personal, "full")
	bearers := map[string]string{"MCP key": key.Key, "access token": tok.AccessToken}
	for _, r := range o.replicas {
		for what, b := range bearers {
			if s := o.mcpStatus(t, r.url+"/mcp", b); s != http.StatusOK { // now cached on r
				t.Fatalf("%s on %s before the reset = %d, want 200", what, r.url, s)
			}
		}
	}

	const newPassword = "the operator's new password"
	var out bytes.Buffer
	err := userCommand(ctx, []string{"reset-password", "--stdin", "--revoke-keys", "bob@example.com"},
		func(k string) string { return map[string]string{"DATABASE_URL": o.dsn}[k] }, strings.NewReader(newPassword+"\n"), &out)
	if err != nil {
		t.Fatalf("reset-password --revoke-keys err = %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "1 MCP key(s) of the account revoked") || !strings.Contains(out.String(), "1 OAuth grant(s)") {
		t.Errorf("reset-password output:\n%s", out.String())
	}
	// The command changed the database only; each replica refuses both
	// once it has applied the command's notifications.
	o.waitApplied(t)
	for _, r := range o.replicas {
		for what, b := range bearers {
			if s := o.mcpStatus(t, r.url+"/mcp", b); s != http.StatusUnauthorized {
				t.Fatalf("%s still accepts the revoked %s (%d) after applying the command's change", r.url, what, s)
			}
		}
	}
	if s, _ := bob.do(ctx, http.MethodGet, "/api/v1/me", nil); s != http.StatusUnauthorized {
		t.Errorf("bob's dashboard session after the reset = %d, want 401", s)
	}

	// What the command printed and audited holds no secret.
	var audited strings.Builder
	rows, err := o.dbConn(t).Query(ctx, `SELECT action, source, coalesce(arguments::text, ''), message FROM audit_log WHERE source = 'operator'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var action, source, args, msg string
		if err := rows.Scan(&action, &source, &args, &msg); err != nil {
			t.Fatal(err)
		}
		audited.WriteString(action + " " + args + " " + msg + "\n")
	}
	if rows.Close(); rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if got := audited.String(); !strings.Contains(got, "account.password_reset") || !strings.Contains(got, `"grants": 1`) {
		t.Errorf("operator audit rows:\n%s\nwant the reset and the revocation of 1 grant", got)
	}
	secrets := map[string]string{"the new password": newPassword, "MCP key": key.Key, "access token": tok.AccessToken,
		"refresh token": tok.RefreshToken}
	for what, v := range secrets {
		if strings.Contains(out.String(), v) || strings.Contains(audited.String(), v) {
			t.Errorf("the %s is in the command's output or its audit rows", what)
		}
	}
}
