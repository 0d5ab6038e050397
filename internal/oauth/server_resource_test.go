package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// Each server's own endpoint is a resource of the gateway: any
// well-formed name under /mcp/, in this gateway's spelling, and nothing
// that merely starts like one.
func TestResourceOf_ServerEndpoints(t *testing.T) {
	s := New(Options{PublicURL: "https://gw.example.com"})
	for requested, want := range map[string]string{
		"https://gw.example.com/mcp/docs":              "https://gw.example.com/mcp/docs",
		"HTTPS://GW.example.com:443/mcp/docs":          "https://gw.example.com/mcp/docs",
		"https://gw.example.com/mcp/a-1":               "https://gw.example.com/mcp/a-1",
		"https://gw.example.com/mcp/Docs":              "",
		"https://gw.example.com/mcp/docs/":             "",
		"https://gw.example.com/mcp/docs/x":            "",
		"https://gw.example.com/mcp/docs?x=1":          "",
		"https://gw.example.com/mcp/docs#x":            "",
		"https://gw.example.com/mcp/%64ocs":            "",
		"https://gw.example.com/mcp/a--b":              "",
		"https://gw.example.com/mcp/-a":                "",
		"https://gw.example.com/mcp/seventeen-chars12": "",
		"https://gw.example.com/mcpdocs":               "",
		"https://gw.example.com/mcp//docs":             "",
		"https://other.example.com/mcp/docs":           "",
		"https://gw.example.com/c/mcpk_x/mcp/docs":     "",
	} {
		if got := s.resourceOf(requested); got != want {
			t.Errorf("resourceOf(%q) = %q, want %q", requested, got, want)
		}
	}
	owns := OwnsResource("https://gw.example.com/")
	if !owns("https://gw.example.com/mcp/docs") || owns("https://second.example.com/mcp/docs") || owns("https://gw.example.com/mcp/Docs") {
		t.Error("OwnsResource() does not follow resourceOf for server endpoints")
	}
}

// TokenFor: a token is for the resource its grant names. One for /mcp is
// served there alone, one for /mcp/a at /mcp/a alone (not /mcp/b, not
// /mcp), one for the path-less identifier everywhere; a resource of
// another gateway nowhere.
func TestTokenFor(t *testing.T) {
	tokenFor := TokenFor("https://gw.example.com/")
	for _, tt := range []struct {
		grant, path string
		want        bool
	}{
		{"https://gw.example.com/mcp", "/mcp", true},
		{"https://gw.example.com/mcp", "/mcp/a", false},
		{"https://gw.example.com/mcp/a", "/mcp/a", true},
		{"https://gw.example.com/mcp/a", "/mcp/b", false},
		{"https://gw.example.com/mcp/b", "/mcp/a", false},
		{"https://gw.example.com/mcp/a", "/mcp", false},
		{"https://gw.example.com", "/mcp", true},
		{"https://gw.example.com", "/mcp/a", true},
		{"https://second.example.com/mcp/a", "/mcp/a", false},
		{"https://second.example.com", "/mcp", false},
		{"", "/mcp", false},
		{"https://gw.example.com/mcp/A", "/mcp/A", false},
	} {
		if got := tokenFor(tt.grant, tt.path); got != tt.want {
			t.Errorf("TokenFor(%q, %q) = %v, want %v", tt.grant, tt.path, got, tt.want)
		}
	}
}

func getMetadata(t *testing.T, s *Server, path string) (int, map[string]any) {
	t.Helper()
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	var doc map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &doc)
	return w.Code, doc
}

// The metadata of a server's endpoint names that endpoint as its resource
// (RFC 9728 §3.3: the URL it was read at, less the well-known part), the
// same document for every well-formed name (so it reveals no workspace's
// servers), none for a name no server can have; the 401 challenge of the
// endpoint points to it.
func TestServerResourceMetadata(t *testing.T) {
	s := New(Options{PublicURL: "https://gw.example.com"})
	for _, name := range []string{"docs", "nobody-has-this"} {
		status, doc := getMetadata(t, s, "/.well-known/oauth-protected-resource/mcp/"+name)
		if status != http.StatusOK || doc["resource"] != "https://gw.example.com/mcp/"+name {
			t.Errorf("metadata of /mcp/%s = %d %v, want resource https://gw.example.com/mcp/%s", name, status, doc, name)
		}
		if as, _ := doc["authorization_servers"].([]any); len(as) != 1 || as[0] != "https://gw.example.com" {
			t.Errorf("metadata of /mcp/%s names authorization servers %v", name, doc["authorization_servers"])
		}
	}
	for _, path := range []string{"/mcp/Docs", "/mcp/a--b", "/mcp/docs/x", "/mcp/"} {
		if status, _ := getMetadata(t, s, "/.well-known/oauth-protected-resource"+path); status != http.StatusNotFound {
			t.Errorf("metadata of %s = %d, want 404", path, status)
		}
	}
	want := `Bearer resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp/docs", scope="mcp:tools"`
	if got := s.ServerChallenge("docs"); got != want {
		t.Errorf("ServerChallenge() = %s, want %s", got, want)
	}
}

// A grant for a server's endpoint keeps that resource through refreshes:
// a refresh naming another server's endpoint (or /mcp) is refused without
// spending the refresh token, one naming none or its own is served, and
// the new token is still for that endpoint alone.
func TestRefreshKeepsServerResource(t *testing.T) {
	f := newFixture(t, "https://gw.example.com")
	_, refresh := f.grant(t, "https://gw.example.com/mcp/docs")
	ctx := context.Background()
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {f.client}}
	for _, other := range []string{"https://gw.example.com/mcp/wiki", "https://gw.example.com/mcp"} {
		form.Set("resource", other)
		if status, body := tokenRequest(t, f.srv, "/oauth/token", form); status != http.StatusBadRequest || body["error"] != "invalid_target" {
			t.Errorf("refresh of a /mcp/docs grant for %s = %d %v, want invalid_target", other, status, body)
		}
	}
	form.Del("resource")
	status, body := tokenRequest(t, f.srv, "/oauth/token", form)
	if status != http.StatusOK || !strings.HasPrefix(body["access_token"], accessPrefix) {
		t.Fatalf("refresh without a resource = %d %v, want new tokens", status, body)
	}
	a, err := f.auth.Authenticate(ctx, bearer(body["access_token"]))
	if err != nil || a == nil || a.Resource != "https://gw.example.com/mcp/docs" {
		t.Fatalf("the refreshed token's actor = %+v, %v, want the resource /mcp/docs", a, err)
	}
	form.Set("refresh_token", body["refresh_token"])
	form.Set("resource", "https://GW.example.com/mcp/docs")
	if status, body := tokenRequest(t, f.srv, "/oauth/token", form); status != http.StatusOK || body["access_token"] == "" {
		t.Errorf("refresh naming its own endpoint = %d %v, want new tokens", status, body)
	}
}
