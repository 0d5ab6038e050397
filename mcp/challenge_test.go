package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
)

type refuseAll struct{ reason string }

func (r refuseAll) Authenticate(_ context.Context, p mcpgate.Presented) (*mcpgate.Actor, error) {
	if p.Value == "" {
		return nil, nil
	}
	return nil, &mcpgate.AuthError{Reason: r.reason}
}

// With OAuth configured, every 401 names the resource metadata; only a
// request that presented a credential gets error="invalid_token", and a
// refused key and a refused token look the same.
func TestChallenge(t *testing.T) {
	const challenge = `Bearer resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`
	for _, reason := range []string{"unknown", "oauth_expired"} {
		g := New(Options{Authenticators: []mcpgate.Authenticator{refuseAll{reason}}, Challenge: challenge})
		h := g.Handler()
		for _, tt := range []struct {
			auth, want string
		}{
			{"", challenge},
			{"Bearer something", challenge + `, error="invalid_token"`},
		} {
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{}`))
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != tt.want {
				t.Errorf("reason=%s auth=%q: %d %q, want 401 %q", reason, tt.auth, w.Code, w.Header().Get("WWW-Authenticate"), tt.want)
			}
		}
		g.Close()
	}
}

// Keys and grants have limits (and confirmation bindings) of their own.
func TestCredentialID(t *testing.T) {
	a, b := (&mcpgate.Actor{GrantID: "g1"}).CredentialID(), (&mcpgate.Actor{GrantID: "g2"}).CredentialID()
	k := (&mcpgate.Actor{KeyID: "k1"}).CredentialID()
	if a == b || a == k || a == "" || k != "k1" {
		t.Errorf("CredentialID() = %q, %q, %q: want distinct ids per grant and the key id", a, b, k)
	}
	if p := (&mcpgate.Actor{UserID: "u1", Role: mcpgate.RoleOwner}).CredentialID(); p != "" {
		t.Errorf("a person's CredentialID() = %q, want none", p)
	}
}

// A 401 gives no OAuth hint where a sign-in cannot succeed: on a
// connector URL (not an OAuth resource), and under a loopback name other
// than the PUBLIC_URL's, where the body says which address to use.
func TestChallengeWithoutOAuthHint(t *testing.T) {
	const challenge = `Bearer resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`
	g := New(Options{Authenticators: []mcpgate.Authenticator{refuseAll{"unknown"}}, Challenge: challenge,
		PublicURL: "http://127.0.0.1:8080"})
	defer g.Close()
	h := g.Handler()
	tests := []struct {
		name, host, path, wantChallenge, wantBody string
	}{
		{"connector URL", "127.0.0.1:8080", "/c/mcpg_bad/mcp", `Bearer realm="mcpgate", error="invalid_token"`, "valid MCP key"},
		{"localhost for 127.0.0.1", "localhost:8080", "/mcp",
			`Bearer realm="mcpgate", error="invalid_token", error_description="connect to http://127.0.0.1:8080/mcp"`,
			"connect to http://127.0.0.1:8080/mcp"},
		{"[::1] for 127.0.0.1", "[::1]:8080", "/mcp", `Bearer realm="mcpgate", error="invalid_token", error_description="connect to http://127.0.0.1:8080/mcp"`, "127.0.0.1:8080"},
		{"PUBLIC_URL itself", "127.0.0.1:8080", "/mcp", challenge, "valid MCP key"},
		{"another port", "localhost:9090", "/mcp", challenge, "valid MCP key"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodPost, "http://"+tt.host+tt.path, strings.NewReader(`{}`))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != tt.wantChallenge || !strings.Contains(w.Body.String(), tt.wantBody) {
			t.Errorf("%s: %d %q %s, want 401 %q naming %q", tt.name, w.Code, w.Header().Get("WWW-Authenticate"), w.Body, tt.wantChallenge, tt.wantBody)
		}
	}
}
