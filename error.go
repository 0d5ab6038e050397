package mcpgate

import (
	"errors"
	"fmt"
)

// Code classifies an error so that each layer can map it to its own surface
// (an HTTP status, an MCP tool error) without reading error text.
type Code string

// The error codes. The API maps each to one HTTP status.
const (
	EInvalid      Code = "invalid"
	EUnauthorized Code = "unauthorized"
	EForbidden    Code = "forbidden"
	ENotFound     Code = "not_found"
	EConflict     Code = "conflict"
	ETooMany      Code = "rate_limited"
	EUpstream     Code = "upstream"
	EUnavailable  Code = "unavailable"
	EInternal     Code = "internal"
	// ETOTPRequired answers a login with the right password from a person
	// who signs in with a second factor and gave no code: ask for one.
	ETOTPRequired Code = "totp_required"
	// ETOTPEnrolment refuses an owner or admin without two-factor sign-in
	// a change that their workspace's policy reserves for those with it.
	ETOTPEnrolment Code = "totp_enrolment_required"
)

// Error is an error with a code and a message that is safe to show a user.
// Err carries the cause for logs only; it never reaches a response.
type Error struct {
	Code    Code
	Message string
	// RetryAfter, when positive, is how many seconds the caller should wait
	// (rate limits, upstream 429s).
	RetryAfter int
	Err        error
}

// Error implements error. It returns the safe message, followed by the cause
// for logs.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and a formatted safe message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WrapError returns an *Error with the given code and safe message that
// keeps err as its cause for logs.
func WrapError(code Code, err error, message string) *Error {
	return &Error{Code: code, Message: message, Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, or EInternal
// for any other non-nil error.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	if e := (*Error)(nil); errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the message that is safe to show a user: the message of
// the first *Error in err's chain, or "internal error" for anything else.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	if e := (*Error)(nil); errors.As(err, &e) && e.Code != EInternal {
		return e.Message
	}
	return "internal error"
}

// ErrorRetryAfter returns the RetryAfter seconds of the first *Error in err's
// chain, or 0.
func ErrorRetryAfter(err error) int {
	if e := (*Error)(nil); errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}
