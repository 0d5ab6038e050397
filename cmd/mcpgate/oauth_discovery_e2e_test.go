package main

// End-to-end tests of how OAuth clients find and register with the gateway:
// discovery documents, MCP keys still working beside OAuth, registration's
// refusals and rate limit, and client ID metadata documents refused.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

func TestOAuthEndToEnd_Discovery(t *testing.T) {
	f := newOAuthFixture(t)
	o, rB, alice, wsA := f.o, f.rB, f.alice, f.wsA

	t.Run("Discovery", func(t *testing.T) {
		resp, _ := o.rawMCP(t, o.front+"/mcp", nil, "")
		want := `Bearer resource_metadata="` + o.front + `/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
			t.Fatalf("no credential: %d %q, want 401 %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
		}
		// Each document describes the resource its URL was made from
		// (RFC 9728 §3.3; the path-less one once said …/mcp), which
		// go-sdk checks.
		for path, resource := range map[string]string{"/.well-known/oauth-protected-resource": o.front,
			"/.well-known/oauth-protected-resource/mcp": o.front + "/mcp"} {
			prm, err := oauthex.GetProtectedResourceMetadata(context.Background(), o.front+path, resource, nil)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if !slices.Equal(prm.AuthorizationServers, []string{o.front}) || !slices.Contains(prm.ScopesSupported, "mcp:tools") {
				t.Errorf("%s = %+v", path, prm)
			}
		}
		// A connector URL with a bad key is not an OAuth resource: a plain
		// 401 (before the fix, it pointed to /mcp's metadata).
		resp, _ = o.rawMCP(t, o.front+"/c/mcpg_notakey/mcp", nil, "")
		if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || strings.Contains(got, "resource_metadata") {
			t.Errorf("connector URL with a bad key: %d %q, want a 401 without OAuth hints", resp.StatusCode, got)
		}
		asm, err := auth.GetAuthServerMetadata(context.Background(), o.front, nil)
		if err != nil || asm == nil {
			t.Fatalf("GetAuthServerMetadata() = %v, %v", asm, err)
		}
		if !slices.Equal(asm.CodeChallengeMethodsSupported, []string{"S256"}) || !asm.ClientIDMetadataDocumentSupported ||
			asm.RegistrationEndpoint != o.front+"/oauth/register" || asm.RevocationEndpoint != o.front+"/oauth/revoke" {
			t.Errorf("server metadata = %+v", asm)
		}
	})

	t.Run("KeysUntouched", func(t *testing.T) {
		status, raw := alice.with(t).do(e2eNoRecord(context.Background()), http.MethodPost, "/api/v1/workspaces/"+wsA+"/keys",
			map[string]any{"name": "header key"})
		var key e2eKey
		if status != http.StatusCreated || json.Unmarshal(raw, &key) != nil || !strings.HasPrefix(key.Key, "mcpg_") {
			t.Fatalf("create key = %d", status)
		}
		o.rec.secret(key.Key, "MCP key")
		for _, version := range []string{"", "2025-11-25"} {
			cs := o.session(t, o.front+"/mcp", e2eBearer(key.Key), version, nil)
			e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
			cs = o.session(t, o.front+"/mcp", http.Header{"X-Api-Key": {key.Key}}, version, nil)
			e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
			cs = o.session(t, o.front+"/c/"+key.Key+"/mcp", nil, version, nil)
			e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
		}
	})

	t.Run("Registration", func(t *testing.T) {
		for name, md := range map[string]map[string]any{
			"no redirect":       {"client_name": "x"},
			"http non-loopback": {"redirect_uris": []string{"http://evil.example.com/cb"}},
			"javascript":        {"redirect_uris": []string{"javascript:alert(1)"}},
			"implicit":          {"redirect_uris": []string{"https://a.example.com/cb"}, "grant_types": []string{"implicit"}},
		} {
			b, _ := json.Marshal(md)
			resp, err := http.Post(o.front+"/oauth/register", "application/json", strings.NewReader(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: register = %d, want 400", name, resp.StatusCode)
			}
		}
		// Rate limit per address: 20, then 429.
		got429 := false
		for i := range 25 {
			resp, err := http.Post(rB.url+"/oauth/register", "application/json",
				strings.NewReader(fmt.Sprintf(`{"client_name":"spam %d","redirect_uris":["http://127.0.0.1/cb"]}`, i)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				got429 = true
				break
			}
		}
		if !got429 {
			t.Error("25 registrations from one address were all accepted, want a 429")
		}
	})

	t.Run("MetadataDocumentRefused", func(t *testing.T) {
		alice := alice.with(t)
		cb := newCallback(t)
		for name, id := range map[string]string{
			"redirect":         o.cimd.URL + "/redirect.json",
			"missing":          o.cimd.URL + "/missing.json",
			"wrong client_id":  o.setCIMD("/liar.json", map[string]any{"client_id": "https://elsewhere.example.com/c.json", "redirect_uris": []string{cb.url}}),
			"too large":        o.setCIMD("/large.json", map[string]any{"client_id": o.cimd.URL + "/large.json", "redirect_uris": []string{cb.url}, "pad": strings.Repeat("x", 70<<10)}),
			"http is no CIMD":  strings.Replace(o.cimd.URL, "https", "http", 1) + "/client.json",
			"private address":  "https://10.0.0.1/client.json",
			"link-local range": "https://169.254.169.254/latest/meta-data.json",
		} {
			loc, status, body := o.consent(t, alice, o.config(id, cb.url).AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), wsA, "full", "allow")
			if loc != nil || status != http.StatusBadRequest {
				t.Errorf("%s: authorize = %v %d, want a 400 page", name, loc, status)
			}
			// The page says why, but never what the gateway dialled.
			// (The test server's own URL is in the page; it may contain 443.)
			if strings.Contains(body, "dial tcp") || strings.Contains(body, "10.0.0.1:443") || strings.Contains(body, "169.254.169.254:443") {
				t.Errorf("%s: the error page reveals network details:\n%s", name, body)
			}
		}
	})

	t.Run("NoSecretsInLogs", func(t *testing.T) { o.noSecretsInLogs(t) })
}
