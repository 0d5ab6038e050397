//go:build !unix

package audit

// diskFree is unknown where statfs does not exist.
func diskFree(string) int64 { return -1 }
