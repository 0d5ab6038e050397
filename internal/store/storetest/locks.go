package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/store"
)

// WaitingLocks counts the advisory locks that someone is waiting for in
// db's database (on any pool): how a race test sees that a second caller
// waits for the first's lock.
func WaitingLocks(tb testing.TB, db *store.DB) int {
	tb.Helper()
	var n int
	err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n)
	if err != nil {
		tb.Fatalf("count waiting locks: %v", err)
	}
	return n
}

// Until waits for cond to hold, failing the test after 20 s. It is for a
// state the code under test reaches on its own (a caller waiting for a
// lock), never for a race to happen by chance.
func Until(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
