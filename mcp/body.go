package mcp

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

// maxMCPBody bounds an MCP request body, as the SDK's MaxRequestBodyBytes does.
const maxMCPBody = 1 << 20

// checkBody reads a POST body and refuses one that is not valid UTF-8, as
// the JSON API does: encoding/json would silently turn invalid bytes into
// U+FFFD, so a tool would run with arguments (a file path, a command) other
// than the ones the client sent, and the audit log would record those. The
// body is handed on from memory; the SDK would have read it whole anyway.
//
// It returns the body (nil for other methods) and whether to go on.
func (g *Gateway) checkBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost || r.Body == nil {
		return nil, true
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxMCPBody))
	if err != nil {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			httpx.WriteError(w, r, g.log, mcpgate.Errorf(mcpgate.EInvalid, "the request body is larger than %d bytes", maxMCPBody))
		} else {
			httpx.WriteError(w, r, g.log, mcpgate.Errorf(mcpgate.EInvalid, "the request body could not be read"))
		}
		return nil, false
	}
	if !utf8.Valid(body) {
		httpx.WriteError(w, r, g.log, mcpgate.Errorf(mcpgate.EInvalid, "the request body is not valid UTF-8"))
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}
