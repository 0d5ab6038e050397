package store

import (
	"strings"
	"syscall"
	"time"
)

// tcpUserTimeoutOpt is TCP_USER_TIMEOUT from linux/tcp.h; the syscall
// package does not name it.
const tcpUserTimeoutOpt = 0x12

// setTCPUserTimeout returns a net.Dialer Control that sets TCP_USER_TIMEOUT
// on the socket: data sent and not acknowledged for d ends the connection.
func setTCPUserTimeout(d time.Duration) func(network, address string, c syscall.RawConn) error {
	return func(network, _ string, c syscall.RawConn) error {
		if !strings.HasPrefix(network, "tcp") {
			return nil // a Unix socket: nothing to time out
		}
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeoutOpt, int(d.Milliseconds()))
		})
		if err != nil {
			return err
		}
		return serr
	}
}
