//go:build unix

package audit

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on f for as long as it is open, so that
// two gateways sharing a DATA_DIR never append to, or replay, one spool at
// once. The lock goes with the process, so a crash leaves none behind.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errSpoolInUse
	}
	return err
}
