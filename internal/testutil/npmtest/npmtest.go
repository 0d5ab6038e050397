// Package npmtest installs npm packages that tests run (the official
// TypeScript MCP SDK, E2B's JS SDK, the reference MCP server, the
// conformance suite), each pinned by a package-lock.json whose integrity
// hashes npm ci checks. A package is installed once per lockfile, in the
// user's cache, so the source tree stays clean and later runs need no
// network. Node.js and npm are prerequisites of the project's tests
// (scripts/ensure-node.sh, which make test runs): a missing one fails the
// test, never skips it (except under -short, make check's tier, where every
// test that asks for them is skipped).
//
// Imports from this module: internal/testutil.
package npmtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

var installed struct {
	sync.Mutex
	dirs map[string]string
}

// Install returns a directory where the npm package in src (its
// package.json and package-lock.json) is installed by "npm ci".
func Install(t testing.TB, src string) string {
	t.Helper()
	installed.Lock()
	defer installed.Unlock()
	if dir := installed.dirs[src]; dir != "" {
		return dir
	}
	npm := Tool(t, "npm")
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "mcpgate-test", filepath.Base(src)+"-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".installed")); err != nil {
		install(t, npm, src, dir)
	}
	if installed.dirs == nil {
		installed.dirs = map[string]string{}
	}
	installed.dirs[src] = dir
	return dir
}

// install runs npm ci beside dir and renames the result into place, so that
// an interrupted install is never taken for a finished one.
func install(t testing.TB, npm, src, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	for _, f := range []string{"package.json", "package-lock.json"} {
		CopyFile(t, filepath.Join(src, f), filepath.Join(tmp, f))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	home, _ := os.UserHomeDir()
	cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(home, ".npm"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci of %s: %v\n%s", src, err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, "node_modules", ".installed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
}

// Tool returns the path of node, npm or npx, failing the test with how to
// get it when it is missing (skipping it under -short).
func Tool(t testing.TB, name string) string {
	t.Helper()
	testutil.SkipIfShort(t, "Node.js")
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: run scripts/ensure-node.sh (make test does) to install Node.js and npm", name)
	}
	return path
}

// CopyFile copies the file from to to.
func CopyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
