package api_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestRedactPath: secrets are redacted by what they look
// like, in any spelling of the path.
func TestRedactPath(t *testing.T) {
	key, _, _ := mcpgate.NewMCPKey()
	const inv = "inv_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde"
	const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	tests := []struct{ in, want string }{
		{"/c/" + key + "/mcp", "/c/[redacted]/mcp"},
		{"//c/" + key + "/mcp", "//c/[redacted]/mcp"},
		{"/C/" + key + "/mcp", "/C/[redacted]/mcp"},
		{"/./c/" + key + "/mcp", "/./c/[redacted]/mcp"},
		{"/x/..//c/" + key + "/mcp", "/x/..//c/[redacted]/mcp"},
		{"/c/not-a-key/mcp", "/c/[redacted]/mcp"},
		{"/api/v1/workspaces/" + key, "/api/v1/workspaces/mcpg_[redacted]"},
		{"/api/v1/invitations/" + inv + "/accept", "/api/v1/invitations/[redacted]/accept"},
		{"/invite/" + inv, "/invite/[redacted]"},
		{"/INVITE/x" + inv, "/INVITE/[redacted]"},
		{"/app/w/1/keys?note=" + inv, "/app/w/1/keys?note=inv_[redacted]"},
		{"/a?token=" + jwt + "&b=1", "/a?token=[redacted]&b=1"},
		{"/api/v1/workspaces/abc/invitations", "/api/v1/workspaces/abc/invitations"},
		{"/app/w/abc/keys", "/app/w/abc/keys"},
		{"/mcp", "/mcp"},
		{"/oauth/token", "/oauth/token"},
		{"/oauth/x/mcpat_AbC-123_xyz", "/oauth/x/[redacted]"},
		{"/c/x/mcp/mcprt_secret", "/c/[redacted]/mcp/[redacted]"},
		{"/app/mcpac_code/page", "/app/[redacted]/page"},
		{"/api/v1/workspaces/w/grants/some-id", "/api/v1/workspaces/w/grants/some-id"},
	}
	for _, tt := range tests {
		if got := api.RedactPath(tt.in); got != tt.want {
			t.Errorf("RedactPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestConnectorPath_NonCanonical: spellings of a
// connector URL that reach it only after cleaning are refused with 404, not
// served, and the access log holds no key for any of them.
func TestConnectorPath_NonCanonical(t *testing.T) {
	var logs testutil.LockedBuffer
	served := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(name)) })
	}
	ts := newTestServer(t, api.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		MCP: served("mcp"), Web: served("web")})
	key, _, _ := mcpgate.NewMCPKey()
	for _, p := range []string{"//c/" + key + "/mcp", "/C/" + key + "/mcp", "/./c/" + key + "/mcp", "/x/..//c/" + key + "/mcp",
		"/c/" + key + "/mcp/", "/c/" + strings.Replace(key, "_", "%5F", 1) + "/mcp"} {
		if resp := mustPostJSON(t, ts.URL+p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s: status = %d, want 404", api.RedactPath(p), resp.StatusCode)
		}
	}
	if resp := mustPostJSON(t, ts.URL+"/c/"+key+"/mcp"); resp.StatusCode != http.StatusOK {
		t.Errorf("canonical connector URL: status = %d, want 200", resp.StatusCode)
	}
	resp, err := http.Get(ts.URL + "/invite/inv_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if strings.Contains(logs.String(), key[5:]) || strings.Contains(logs.String(), "AbCdEfGhIjKlMnOp") {
		t.Errorf("the access log holds a secret:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "/c/[redacted]/mcp") {
		t.Errorf("the access log has no redacted connector path; were the requests logged?\n%s", logs.String())
	}
}

// TestMCP_SecurityHeaders: /mcp and the connector URL
// answer with the API's security headers.
func TestMCP_SecurityHeaders(t *testing.T) {
	ts := newTestServer(t, api.Options{MCP: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{}")) })})
	key, _, _ := mcpgate.NewMCPKey()
	for _, p := range []string{"/mcp", "/c/" + key + "/mcp"} {
		resp := mustPostJSON(t, ts.URL+p)
		for _, h := range []string{"X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy", "Content-Security-Policy"} {
			if resp.Header.Get(h) == "" {
				t.Errorf("POST %s: no %s header", api.RedactPath(p), h)
			}
		}
	}
}

// mustPostJSON posts {} to url and returns the response, its body closed.
func mustPostJSON(t *testing.T, url string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("POST %s err = %v", api.RedactPath(url), err)
	}
	resp.Body.Close()
	return resp
}
