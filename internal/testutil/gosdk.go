package testutil

import (
	"encoding/json"
	"os/exec"
	"testing"
)

// GoSDKVersion is the go-sdk release whose unexported behaviour the gateway
// relies on or copies: mcp/fastpath.go (the depth and Accept checks, the
// _meta capability type, the SSE answer) and internal/upstream (the
// session-update hook, the caller's context reaching the HTTP request).
// Each package's TestGoSDKVersion names what to re-read; raise this only
// once both have been re-read against the new release.
const GoSDKVersion = "v1.8.0"

// RequireGoSDK fails t, with recheck in the message, when the go-sdk the
// module builds with (go.mod, after any replace) is not GoSDKVersion.
func RequireGoSDK(t testing.TB, recheck string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-json", "github.com/modelcontextprotocol/go-sdk").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var m struct {
		Version string
		Replace *struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("go list: %v", err)
	}
	got := m.Version
	if m.Replace != nil {
		got = m.Version + " replaced by " + m.Replace.Path + " " + m.Replace.Version
	}
	if got != GoSDKVersion {
		t.Fatalf("go-sdk is %s; the copies of its behaviour were checked against %s. Re-check %s, then raise testutil.GoSDKVersion", got, GoSDKVersion, recheck)
	}
}
