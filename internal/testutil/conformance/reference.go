package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/npmtest"
)

// referencePackage is the suite's reference server for the Go SDK, in the
// go-sdk module that go.mod requires: the package the suite's sdk command
// builds for it.
const referencePackage = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"

// ReferenceOptions configures the reference server.
type ReferenceOptions struct {
	// Stateless serves the 2026-07-28 protocol (no sessions, as the suite
	// runs the server for that revision); false serves 2025-11-25 with
	// sessions.
	Stateless bool
}

// built is the reference server's binary, built once per test process.
var built struct {
	sync.Mutex
	path string
}

// StartReference builds and starts the reference server on a free
// loopback port, waits until it answers, and returns its MCP endpoint. It
// stops with the test.
func StartReference(t testing.TB, opts ReferenceOptions) string {
	t.Helper()
	bin := referenceBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "-http="+addr, fmt.Sprintf("-stateless=%t", opts.Stateless))
	url := "http://" + addr + "/mcp"
	start(t, cmd, url, "the reference server")
	return url
}

// start starts cmd, stops it with the test, and waits until it answers at
// url.
func start(t testing.TB, cmd *exec.Cmd, url, what string) {
	t.Helper()
	logs := &testutil.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	if err := waitAnswer(url, exited); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, logs)
	}
}

// waitAnswer polls url with a ping until the server answers over HTTP
// (any status: it is up), the process exits, or 30 s pass.
func waitAnswer(url string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before answering: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within 30 s: %w", err)
		}
	}
}

// referenceBinary builds the reference server with the go command from the
// module cache (the go-sdk module go.sum pins, so offline once the
// module's tests have compiled), once per go-sdk version into the user's
// cache: later processes reuse it. A replaced go-sdk is built afresh into
// the test's directory, since its version says nothing about its source.
func referenceBinary(t testing.TB) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if built.path != "" {
		return built.path
	}
	gotool := goTool(t)
	moduleDir := moduleDir(t)
	list := exec.Command(gotool, "list", "-m", "-json", "github.com/modelcontextprotocol/go-sdk")
	list.Dir = moduleDir
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list the go-sdk module: %v", err)
	}
	var mod struct {
		Version string
		Replace *struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatalf("go list the go-sdk module: %v", err)
	}
	if mod.Replace != nil {
		path := filepath.Join(t.TempDir(), "everything-server")
		goBuild(t, gotool, moduleDir, path)
		return path // not kept for the process: the directory goes with t
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "mcpgate-test", "go-sdk-everything-server-"+mod.Version+"-"+runtime.GOOS+"-"+runtime.GOARCH)
	path := filepath.Join(dir, "everything-server")
	if _, err := os.Stat(path); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		tmp, err := os.CreateTemp(dir, "build-")
		if err != nil {
			t.Fatal(err)
		}
		tmp.Close()
		defer os.Remove(tmp.Name())
		goBuild(t, gotool, moduleDir, tmp.Name())
		// A rename replaces atomically: a concurrent test process sees the
		// old binary or the new one, never half of one.
		if err := os.Rename(tmp.Name(), path); err != nil {
			t.Fatal(err)
		}
	}
	built.path = path
	return path
}

func goBuild(t testing.TB, gotool, dir, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gotool, "build", "-o", out, referencePackage)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", referencePackage, err, b)
	}
}

// goTool is the go command; go test puts its own first on PATH.
func goTool(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: the reference server is built with it (%v)", err)
	}
	return p
}

// moduleDir is this package's source directory, inside the module whose
// go.mod pins the go-sdk, wherever the calling test runs.
func moduleDir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("conformance: cannot locate the package's source")
	}
	return filepath.Dir(file)
}

// StartEverything runs the official MCP "everything" server of the npm
// registry (@modelcontextprotocol/server-everything, pinned by
// testdata/server-everything/package-lock.json) under the suite's pinned
// Node.js over streamable HTTP on a free port, waits until it answers, and
// returns its MCP endpoint. It is not the suite's reference server (its
// tools have other names, so most scenarios fail against it), but a
// second server no one on the project wrote, run with Node. It stops with
// the test.
func StartEverything(t testing.TB) string {
	t.Helper()
	node := Install(t).Node
	dir := npmtest.Install(t, testdata(t, "server-everything"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(node, filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	start(t, cmd, url, "the everything server")
	return url
}
