// Package testutil holds the few helpers that tests of several packages
// share: a log buffer that the code under test may write from its goroutines
// while the test reads it, random secrets, the text of a tool call's result,
// a bearer-token transport for MCP clients, and the go-sdk version that the
// copies of its unexported behaviour were checked against (gosdk.go). It is
// imported by tests and the benchmark (bench), never by the gateway.
//
// Imports from this module: none.
package testutil

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// LockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// RandomHex returns n random bytes, hex-encoded.
func RandomHex(n int) string { return hex.EncodeToString(randomBytes(n)) }

// RandomBase64 returns n random bytes, standard base64: the shape of
// ENCRYPTION_KEY (n = 32) and JWT_SECRET.
func RandomBase64(n int) string { return base64.StdEncoding.EncodeToString(randomBytes(n)) }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// ToolText joins the text parts of a tool call's result, one a line.
func ToolText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
