package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/npmtest"
)

// mcpRemoteVersion is the mcp-remote bridge the test runs through npx (from
// the npm registry; scripts/ensure-node.sh installs Node.js and npm).
const mcpRemoteVersion = "mcp-remote@0.15.1"

// TestOAuthMCPRemoteKeepsKeys runs the real mcp-remote bridge, which probes
// OAuth discovery, against a gateway that advertises OAuth, configured as
// the dashboard's setup snippets tell users to: with the key in an Authorization header,
// and with the connector URL. Both must connect and call a tool without
// ever starting an OAuth flow (which would print "Please authorize" and wait
// for a browser).
func TestOAuthMCPRemoteKeepsKeys(t *testing.T) {
	npx := npmtest.Tool(t, "npx")
	o := newOAuthEnv(t)
	alice, _ := o.signupWithE2B(o.front, "alice@example.com")
	status, raw := alice.do(e2eNoRecord(context.Background()), http.MethodPost, "/api/v1/workspaces/"+alice.personal+"/keys",
		map[string]any{"name": "mcp-remote"})
	var key e2eKey
	if status != http.StatusCreated || json.Unmarshal(raw, &key) != nil {
		t.Fatalf("create key = %d", status)
	}
	home, _ := os.UserHomeDir()
	for name, args := range map[string][]string{
		"header":        {o.front + "/mcp", "--transport", "http-only", "--header", "Authorization:${AUTH_HEADER}"},
		"connector URL": {o.front + "/c/" + key.Key + "/mcp", "--transport", "http-only"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			stderr := &testutil.LockedBuffer{}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, npx, append([]string{"-y", mcpRemoteVersion}, args...)...)
			// A fresh token store, so that nothing from an earlier run can
			// stand in for the key; the npm cache stays shared.
			cmd.Env = append(os.Environ(), "AUTH_HEADER=Bearer "+key.Key, "HOME="+dir,
				"MCP_REMOTE_CONFIG_DIR="+filepath.Join(dir, "mcp-auth"), "npm_config_cache="+filepath.Join(home, ".npm"),
				"BROWSER=false")
			cmd.Stderr = stderr
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcp-remote-e2e", Version: "v0"}, nil).Connect(ctx,
				&mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("connect through mcp-remote: %v\nmcp-remote stderr:\n%s", err, stderr)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "e2b_list_sandboxes", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("CallTool through mcp-remote = %v, %v\nstderr:\n%s", res, err, stderr)
			}
			if log := stderr.String(); strings.Contains(log, "Please authorize") || strings.Contains(log, "/oauth/authorize") {
				t.Errorf("mcp-remote started an OAuth flow although it has a valid key:\n%s", log)
			}
			// The probe must have found the OAuth metadata, or this test
			// would prove nothing about a gateway that advertises OAuth.
			if !strings.Contains(stderr.String(), "Discovered authorization server: "+o.front) {
				t.Errorf("mcp-remote did not discover the authorization server; stderr:\n%s", stderr)
			}
		})
	}
}
