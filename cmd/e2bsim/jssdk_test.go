package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/testutil/npmtest"
)

// jsSDK is the official E2B JS SDK the test runs, pinned exactly (the newest
// npm served when it was pinned) with every dependency's integrity hash in
// testdata/jssdk/package-lock.json. It needs Node.js 20.18.1 or later (its
// package.json "engines"); scripts/ensure-node.sh installs Node.js and npm.
const jsSDK = "e2b@2.51.0"

// installJSSDK installs the pinned SDK and returns the path of its ESM entry
// point.
func installJSSDK(t *testing.T) string {
	t.Helper()
	dir := npmtest.Install(t, filepath.Join("testdata", "jssdk"))
	var pkg struct{ Version string }
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "e2b", "package.json"))
	if err != nil || json.Unmarshal(b, &pkg) != nil || "e2b@"+pkg.Version != jsSDK {
		t.Fatalf("installed e2b %q (%v), want %s: update testdata/jssdk with the constant", pkg.Version, err, jsSDK)
	}
	return filepath.Join(dir, "node_modules", "e2b", "dist", "index.mjs")
}

// TestOfficialJSSDK runs E2B's own JS SDK against e2bsim for every
// control-plane call the gateway makes or relies on (testdata/jssdk.mjs):
// templates' aliases and tags, create and connect on the SDK's v2 routes,
// list with metadata and paging, info, timeout, pause, metrics, snapshots,
// kill, and the SDK's error classes (not found, authentication, rate limit).
// What it found missing in e2bsim: create was 405, connect 404, Template.exists
// false.
func TestOfficialJSSDK(t *testing.T) {
	entry := installJSSDK(t)
	node := npmtest.Tool(t, "node")
	const key = "e2b_0123456789abcdef0123456789abcdef"
	srv := httptest.NewServer(e2bsim.New(e2bsim.Options{TeamKeys: []string{key}, MaxRunning: 6}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "jssdk.mjs"))
	cmd.Env = append(os.Environ(), "E2B_SDK="+entry, "E2B_API_URL="+srv.URL, "E2B_API_KEY="+key, "E2B_DEBUG=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the SDK script failed: %v\n%s", err, out)
	}
	for _, step := range []string{"Template.exists", "Template tags", "Sandbox.create", "Sandbox.list metadata and paging",
		"Sandbox.getInfo", "Sandbox.setTimeout", "Sandbox.getMetrics", "Sandbox.pause", "Sandbox.connect", "Sandbox snapshots",
		"Sandbox.kill", "error classes"} {
		if !strings.Contains(string(out), "ok "+step+"\n") {
			t.Errorf("step %q did not pass\n%s", step, out)
		}
	}
	t.Logf("%s against e2bsim:\n%s", jsSDK, out)
}
