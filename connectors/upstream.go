package connectors

import (
	"errors"
	"fmt"
)

// UpstreamError records the HTTP status an upstream answered with. Connectors
// wrap it inside the *mcpgate.Error they return, as its cause, so the gateway
// can audit the upstream status of any connector's call without knowing the
// connector. It carries no upstream body: bodies may hold secrets.
type UpstreamError struct {
	// Status is the upstream's HTTP status code.
	Status int
	// Code is the upstream's machine-readable error code, when it sent one
	// from a known, secret-free set (E2B's error_code, for example).
	Code string
}

// Error implements error.
func (e *UpstreamError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("upstream status %d (%s)", e.Status, e.Code)
	}
	return fmt.Sprintf("upstream status %d", e.Status)
}

// UpstreamStatus returns the upstream HTTP status recorded anywhere in err's
// chain, or 0 when the call never got an answer (or err is nil).
func UpstreamStatus(err error) int {
	if ue := (*UpstreamError)(nil); errors.As(err, &ue) {
		return ue.Status
	}
	return 0
}
