package testutil

import "testing"

// SkipIfShort skips the test under `go test -short`, the fast tier that
// `make check` runs, because the test needs something outside Go: needs
// names it ("PostgreSQL", "Chromium", "Node.js"). Without -short it does
// nothing, so `make test` goes on and a missing prerequisite fails the test
// loudly, as it always has: the skip belongs to the -short flag alone, never
// to what the machine happens to lack.
func SkipIfShort(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: skipped under -short (make check); make test runs it", needs)
	}
}
