//go:build unix

package audit

import "syscall"

// diskFree is the bytes an unprivileged process may still write on the
// filesystem holding path, or -1 when it cannot be read.
func diskFree(path string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
