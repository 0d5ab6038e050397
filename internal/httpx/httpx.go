package httpx

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"

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
	// The login's second step: the person is not signed in yet.
	mcpgate.ETOTPRequired: http.StatusUnauthorized,
	// A signed-in person the workspace's policy refuses until they enrol.
	mcpgate.ETOTPEnrolment: http.StatusForbidden,
}

// StatusOf returns the HTTP status for an error.
func StatusOf(err error) int {
	if s, ok := statusOf[mcpgate.ErrorCode(err)]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// ErrorBody is the one error shape: {"error":{"code":"…","message":"…"}}.
type ErrorBody struct {
	Error struct {
		Code    mcpgate.Code `json:"code"`
		Message string       `json:"message"`
	} `json:"error"`
}

// WriteError writes err as the one error shape and logs it once: server
// faults at error level with their cause, client errors at debug. A
// RetryAfter in err becomes the Retry-After header.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	status := StatusOf(err)
	if status >= 500 {
		log.ErrorContext(r.Context(), "request failed", "status", status, "err", err)
	} else {
		log.DebugContext(r.Context(), "request refused", "status", status, "err", err)
	}
	if s := mcpgate.ErrorRetryAfter(err); s > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(s))
	}
	var body ErrorBody
	body.Error.Code = mcpgate.ErrorCode(err)
	body.Error.Message = mcpgate.ErrorMessage(err)
	WriteJSON(w, status, body)
}

// WriteJSON writes v as an uncacheable JSON response.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

// ClientAddress is the address per-address limits count against and logs
// record: the one WithClientAddress computed for this request (which
// believes forwarding headers from TRUSTED_PROXIES only), else the TCP peer.
func ClientAddress(r *http.Request) string {
	if a, ok := r.Context().Value(addressKey{}).(string); ok {
		return a
	}
	return peerAddr(r.RemoteAddr)
}
