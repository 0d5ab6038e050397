package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate"
)

// statusOf is the one table from error codes to HTTP statuses.
var statusOf = map[mcpgate.Code]int{
	mcpgate.EInvalid:      http.StatusBadRequest,
	mcpgate.EUnauthorized: http.StatusUnauthorized,
	mcpgate.EForbidden:    http.StatusForbidden,
	mcpgate.ENotFound:     http.StatusNotFound,
	mcpgate.EConflict:     http.StatusConflict,
	mcpgate.ETooMany:      http.StatusTooManyRequests,
	mcpgate.EUpstream:     http.StatusBadGateway,
	mcpgate.EUnavailable:  http.StatusServiceUnavailable,
	mcpgate.EInternal:     http.StatusInternalServerError,
}

// StatusOf returns the HTTP status for an error.
func StatusOf(err error) int {
	if s, ok := statusOf[mcpgate.ErrorCode(err)]; ok {
		return s
	}
	return http.StatusInternalServerError
}

type errorBody struct {
	Error struct {
		Code    mcpgate.Code `json:"code"`
		Message string       `json:"message"`
	} `json:"error"`
}

// WriteError writes err as the API's one error shape and logs it once: server
// faults at error level with their cause, client errors at debug.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	code := mcpgate.ErrorCode(err)
	status := StatusOf(err)
	if status >= 500 {
		log.ErrorContext(r.Context(), "request failed", "status", status, "err", err)
	} else {
		log.DebugContext(r.Context(), "request refused", "status", status, "err", err)
	}
	if s := mcpgate.ErrorRetryAfter(err); s > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(s))
	}
	var body errorBody
	body.Error.Code = code
	body.Error.Message = mcpgate.ErrorMessage(err)
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

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
