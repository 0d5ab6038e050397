package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

// StatusOf returns the HTTP status for an error (the one table, shared with
// the MCP endpoint).
func StatusOf(err error) int { return httpx.StatusOf(err) }

// WriteError writes err as the one error shape and logs it once.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	httpx.WriteError(w, r, log, err)
}

func writeJSON(w http.ResponseWriter, status int, v any) { httpx.WriteJSON(w, status, v) }

type errorBody = httpx.ErrorBody

// maxJSONBody bounds every JSON request body.
const maxJSONBody = 64 << 10

// decodeJSON reads one JSON object from the body into v: the content type
// must be JSON, unknown fields are refused, trailing data is refused, and the
// body is bounded.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return mcpgate.Errorf(mcpgate.EInvalid, "the request body must be application/json")
		}
	} else {
		return mcpgate.Errorf(mcpgate.EInvalid, "the request body must be application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			return mcpgate.Errorf(mcpgate.EInvalid, "the request body is larger than %d bytes", maxJSONBody)
		}
		return mcpgate.Errorf(mcpgate.EInvalid, "the request body could not be read")
	}
	// encoding/json would silently turn invalid UTF-8 into U+FFFD, storing
	// a name or email (or hashing a password) other than the one sent.
	if !utf8.Valid(body) {
		return mcpgate.Errorf(mcpgate.EInvalid, "the request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &tooBig):
			return mcpgate.Errorf(mcpgate.EInvalid, "the request body is larger than %d bytes", maxJSONBody)
		case errors.Is(err, io.EOF):
			return mcpgate.Errorf(mcpgate.EInvalid, "the request body is empty")
		case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
			return mcpgate.Errorf(mcpgate.EInvalid, "the request body is not valid JSON")
		case errors.As(err, &typ):
			return mcpgate.Errorf(mcpgate.EInvalid, "field %q has the wrong type", typ.Field)
		default:
			// Unknown fields: encoding/json's message names the field and
			// nothing else from the body.
			return mcpgate.Errorf(mcpgate.EInvalid, "invalid request body: %s", trimJSONPrefix(err.Error()))
		}
	}
	if dec.More() {
		return mcpgate.Errorf(mcpgate.EInvalid, "the request body must hold one JSON object")
	}
	return nil
}

func trimJSONPrefix(s string) string {
	const p = "json: "
	if len(s) > len(p) && s[:len(p)] == p {
		s = s[len(p):]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
