package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcpgate/mcpgate"
)

// ErrorKind says why talking to an upstream failed, for the gateway to
// choose what to tell the admin or the model.
type ErrorKind string

// The kinds of Error.
const (
	KindRefused         ErrorKind = "refused"          // the URL or address is outside the hop's policy
	KindUnreachable     ErrorKind = "unreachable"      // no connection: DNS, refused, reset
	KindTLS             ErrorKind = "tls"              // the certificate or handshake failed
	KindUnauthorized    ErrorKind = "unauthorized"     // 401
	KindForbidden       ErrorKind = "forbidden"        // 403
	KindRedirect        ErrorKind = "redirect"         // 3xx, never followed
	KindNotMCP          ErrorKind = "not_mcp"          // something answered, but not an MCP server
	KindProtocolVersion ErrorKind = "protocol_version" // no protocol version both sides speak
	KindTimeout         ErrorKind = "timeout"          // the absolute deadline passed
	KindIdle            ErrorKind = "idle"             // no progress for the idle timeout
	KindTooLarge        ErrorKind = "too_large"        // the answer passed the byte cap
	KindSessionExpired  ErrorKind = "session_expired"  // 404 on a session, call not repeated
	KindProtocol        ErrorKind = "protocol"         // any other failure of the exchange
)

// Error is a failure on the hop to an upstream. Message is safe to show
// an admin; the detail kept for logs has every credential value of the
// target replaced, so neither ever holds a header the gateway sent.
type Error struct {
	Kind    ErrorKind
	Message string
	// Status is the upstream's HTTP status when it answered with one.
	Status int
	// WWWAuthenticate is the upstream's challenge on a 401 or 403.
	WWWAuthenticate string
	detail          string
}

// Error implements error.
func (e *Error) Error() string {
	if e.detail == "" {
		return e.Message
	}
	return e.Message + ": " + e.detail
}

// Unwrap gives the gateway's coded error, so mcpgate.ErrorCode and
// mcpgate.ErrorMessage read an *Error as any other.
func (e *Error) Unwrap() error {
	code := mcpgate.EUpstream
	switch e.Kind {
	case KindRefused:
		code = mcpgate.EInvalid
	case KindUnreachable, KindTimeout, KindIdle:
		code = mcpgate.EUnavailable
	}
	return &mcpgate.Error{Code: code, Message: e.Message}
}

// RPCError is a JSON-RPC error the upstream answered a call with. Its
// message and data are the upstream's (credential values replaced): the
// gateway may turn it into a tool error, not trust it.
type RPCError struct {
	Code    int64
	Message string
	Data    json.RawMessage
}

// Error implements error.
func (e *RPCError) Error() string {
	return fmt.Sprintf("upstream answered with JSON-RPC error %d: %s", e.Code, e.Message)
}

// Unwrap gives the gateway's coded error.
func (e *RPCError) Unwrap() error {
	return &mcpgate.Error{Code: mcpgate.EUpstream, Message: "the upstream server refused the call"}
}

// redactor replaces the target's credential values in text the upstream
// or the HTTP stack produced, since an upstream may echo a header back.
type redactor []string

func newRedactor(t Target) redactor {
	var r redactor
	// Each value also as it reads inside a JSON string (log data and
	// relayed params are JSON text): quotes, backslashes and <, >, &
	// escaped as Go writes them.
	add := func(v string) {
		r = append(r, v)
		if b, err := json.Marshal(v); err == nil && string(b[1:len(b)-1]) != v {
			r = append(r, string(b[1:len(b)-1]))
		}
	}
	for _, v := range t.Headers {
		s := v.Reveal()
		add(s)
		if _, tok, ok := strings.Cut(s, " "); ok {
			add(tok) // the token of "Bearer <token>"
		}
		for _, f := range strings.Fields(s) {
			if len(f) >= 8 {
				add(f)
			}
		}
	}
	if i := strings.IndexByte(t.URL, '?'); i >= 0 && i+1 < len(t.URL) {
		add(t.URL[i+1:]) // a query may carry an API key
	}
	return r
}

// Redactor returns what replaces t's credential values (its headers' and
// its URL's query) in text the server wrote, as the pool does in its
// errors and in the log messages it relays.
func Redactor(t Target) func(string) string { return newRedactor(t).text }

func (r redactor) text(s string) string {
	for _, v := range r {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

func (r redactor) rpc(w *jsonrpc.Error) *RPCError {
	return &RPCError{Code: w.Code, Message: r.text(w.Message), Data: json.RawMessage(r.text(string(w.Data)))}
}

// newError builds an Error whose detail is cause's text, redacted.
func (r redactor) newError(kind ErrorKind, cause error, format string, args ...any) *Error {
	e := &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
	if cause != nil {
		e.detail = r.text(cause.Error())
	}
	return e
}

// classify turns a failed exchange into an Error, from what the probe saw
// on the wire first (a status says more than the SDK's error text) and
// the error chain after.
func classify(err error, pr *probe, r redactor) *Error {
	status, contentType, challenge, answered := pr.snapshot()
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		kind, what := KindUnauthorized, "401 Unauthorized: the credential is missing or not accepted"
		if status == http.StatusForbidden {
			kind, what = KindForbidden, "403 Forbidden: the credential is not allowed this"
		}
		e := r.newError(kind, err, "the server answered %s", what)
		e.Status, e.WWWAuthenticate = status, r.text(challenge)
		return e
	case status >= 300 && status < 400:
		e := r.newError(KindRedirect, err, "the server answered with a redirect (%d); the gateway follows none: register the final URL", status)
		e.Status = status
		return e
	case errors.Is(err, ErrAddrRefused):
		return r.newError(KindRefused, err, "the server's address is not one the gateway may reach (https to a public address, or a network listed in UPSTREAM_PRIVATE_NETWORKS)")
	case isTLSError(err):
		return r.newError(KindTLS, err, "the TLS connection to the server failed (certificate or handshake)")
	case status != 0 && !answered && notMCPStatus(status):
		e := r.newError(KindNotMCP, err, "the URL does not answer as an MCP server (HTTP %d, %s)", status, orNone(contentType))
		e.Status = status
		return e
	case errors.Is(err, context.DeadlineExceeded):
		return r.newError(KindTimeout, err, "the server did not answer in time")
	case isNetError(err):
		return r.newError(KindUnreachable, err, "the server cannot be reached")
	}
	e := r.newError(KindProtocol, err, "the MCP exchange with the server failed")
	e.Status = status
	return e
}

func orNone(s string) string {
	if s == "" {
		return "no content type"
	}
	return cutText(s, maxQuoted)
}

// maxQuoted bounds the upstream's text (a version, a content type) that a
// message quotes: it reaches admins' messages, last_error and the audit.
const maxQuoted = 120

// cutText cuts s to n characters. Cut after redacting: a credential cut
// in two would no longer be found to redact.
func cutText(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// notMCPStatus reports whether a last answer says "this is not an MCP
// endpoint": a 404/405/406/415, or a success that is neither JSON nor an
// event stream, or JSON that held no JSON-RPC answer.
func notMCPStatus(status int) bool {
	switch status {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotAcceptable, http.StatusUnsupportedMediaType:
		return true
	}
	// A success, or a bare 400, that held no JSON-RPC answer at all.
	return (status >= 200 && status < 300) || status == http.StatusBadRequest
}

func isTLSError(err error) bool {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		alert    tls.AlertError
	)
	return errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &record) || errors.As(err, &alert)
}

func isNetError(err error) bool {
	var (
		op  *net.OpError
		dns *net.DNSError
	)
	return errors.As(err, &op) || errors.As(err, &dns)
}
