package upstreamtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil/npmtest"
)

// Everything installs the official MCP reference server
// (@modelcontextprotocol/server-everything, pinned with integrity by the
// package-lock.json in lockDir; npm ci checks every hash), runs it with
// Node over streamable HTTP on a free loopback port until tb ends, and
// returns its endpoint. Node and npm are prerequisites of the project's
// tests (scripts/ensure-node.sh).
func Everything(tb testing.TB, lockDir string) string {
	tb.Helper()
	node := npmtest.Tool(tb, "node")
	dir := npmtest.Install(tb, lockDir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(node, filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	listening := make(chan struct{})
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				once.Do(func() { close(listening) })
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		tb.Fatal("the everything server did not start listening within 30 s")
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}
