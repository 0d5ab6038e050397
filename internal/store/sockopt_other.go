//go:build !linux

package store

import (
	"syscall"
	"time"
)

// setTCPUserTimeout is a no-op where TCP_USER_TIMEOUT does not exist; the
// keep-alive and the statements' deadlines still apply.
func setTCPUserTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
