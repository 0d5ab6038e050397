package upstream

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGoSDKVersion fences what this package relies on in go-sdk v1.8.0
// beyond its documented API (see doc.go): the caller's context reaching
// Connection.Write and the HTTP request, the unexported session-update
// hook used only for the protocol-version header, and the list of
// protocol versions (supportedVersions). When the SDK moves, re-read
// mcp/streamable.go, mcp/client.go and mcp/transport.go, then update this.
func TestGoSDKVersion(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/modelcontextprotocol/go-sdk").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if v := strings.TrimSpace(string(out)); v != "v1.8.0" {
		t.Fatalf("go-sdk is %s; this package was checked against v1.8.0", v)
	}
}
