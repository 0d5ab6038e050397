package api

import "testing"

func TestRedactPath(t *testing.T) {
	for in, want := range map[string]string{
		"/c/mcpg_abc_def/mcp":                 "/c/[redacted]/mcp",
		"/mcp":                                "/mcp",
		"/oauth/token":                        "/oauth/token",
		"/oauth/x/mcpat_AbC-123_xyz":          "/oauth/x/[redacted]",
		"/c/x/mcp/mcprt_secret":               "/c/[redacted]/mcp/[redacted]",
		"/app/mcpac_code/page":                "/app/[redacted]/page",
		"/api/v1/workspaces/w/grants/some-id": "/api/v1/workspaces/w/grants/some-id",
	} {
		if got := RedactPath(in); got != want {
			t.Errorf("RedactPath(%q) = %q, want %q", in, got, want)
		}
	}
}
