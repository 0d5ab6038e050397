//go:build !unix

package audit

import "os"

// lockFile is a no-op where flock does not exist: give each gateway its own
// DATA_DIR there.
func lockFile(*os.File) error { return nil }
