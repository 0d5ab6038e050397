package upstream

import (
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestGoSDKVersion fences what this package relies on in go-sdk beyond its
// documented API (see doc.go): the caller's context reaching
// Connection.Write and the HTTP request, and the unexported session-update
// hook used only for the protocol-version header.
func TestGoSDKVersion(t *testing.T) {
	testutil.RequireGoSDK(t, "internal/upstream against go-sdk's mcp/streamable.go, mcp/client.go and mcp/transport.go (doc.go says what it relies on)")
}
