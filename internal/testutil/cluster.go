package testutil

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClusterDir returns a fresh DATA_DIR for an embedded PostgreSQL. As root
// the server runs as an unprivileged user, who must traverse the test's
// temporary directories; t.TempDir makes them 0700, so they are opened for
// searching (not listing). Under -short (make check) the test is skipped:
// every embedded cluster of the tests starts here.
func ClusterDir(t testing.TB) string {
	t.Helper()
	SkipIfShort(t, "PostgreSQL")
	base := t.TempDir()
	if os.Geteuid() == 0 {
		for _, d := range []string{filepath.Dir(base), base} {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatal(err)
			}
		}
	}
	return filepath.Join(base, "data")
}

// MustConnect opens one connection to dsn for the test, closed when it ends.
func MustConnect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}
