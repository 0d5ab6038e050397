// Package storetest gives each test its own fresh PostgreSQL database with
// every migration applied.
//
// It reads TEST_DATABASE_URL (a role that may CREATE DATABASE); `make test`
// always sets it. Without it a test fails with a message saying how to run the
// suite: a missing database is a failure, never a silent skip. Under
// `go test -short` (make check's tier, which needs no database) every test
// that asks for a database is skipped instead, whether one is set or not.
//
// Speed: the migrations run once per migration set into a template database
// (named after a hash of the migration files); each test then copies it with
// CREATE DATABASE ... TEMPLATE, which takes milliseconds.
//
// Imports from this module: internal/store, internal/testutil, migrations.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/migrations"
)

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// AdminURL returns TEST_DATABASE_URL or fails the test (skips it under
// -short). Every database a test gets comes through here.
func AdminURL(t testing.TB) string {
	t.Helper()
	testutil.SkipIfShort(t, "PostgreSQL")
	u := os.Getenv("TEST_DATABASE_URL")
	if u == "" {
		t.Fatal("TEST_DATABASE_URL is not set: run the tests with `make test`, which finds or starts a PostgreSQL, " +
			"or set TEST_DATABASE_URL to a role that may CREATE DATABASE")
	}
	return u
}

// Open returns a store on a fresh database, closed and dropped when the test
// ends.
func Open(t testing.TB) *store.DB {
	t.Helper()
	dsn := NewDatabase(t)
	db, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("store.Open() err = %v", err)
	}
	t.Cleanup(db.Close)
	return db
}

// NewDatabase creates a fresh, migrated database and returns its URL. It is
// dropped when the test ends (connections still open are terminated).
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin := AdminURL(t)
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(admin) })
	if templateErr != nil {
		t.Fatalf("prepare template database: %v", templateErr)
	}
	name := "mcpgate_test_" + randomHex(6)
	return createDatabase(t, admin, name, "create test database", func(ctx context.Context, c *pgx.Conn) error {
		var err error
		for range 50 { // the template is briefly busy while another process copies it
			_, err = c.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, name, templateName))
			if !isBusy(err) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		return err
	})
}

// NewEmptyDatabase creates a database with no schema at all (for migration
// tests) and returns its URL; it is dropped when the test ends.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	admin := AdminURL(t)
	name := "mcpgate_empty_" + randomHex(6)
	return createDatabase(t, admin, name, "create empty database", func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s`, name))
		return err
	})
}

// createDatabase runs create (which makes database name) as the admin,
// drops the database when the test ends (terminating connections still
// open), and returns its URL.
func createDatabase(t testing.TB, admin, name, what string, create func(context.Context, *pgx.Conn) error) string {
	t.Helper()
	ctx := context.Background()
	if err := withAdmin(ctx, admin, func(c *pgx.Conn) error { return create(ctx, c) }); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() {
		_ = withAdmin(ctx, admin, func(c *pgx.Conn) error {
			_, err := c.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, name))
			return err
		})
	})
	return withDatabase(admin, name)
}

func isBusy(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55006"
}

func ensureTemplate(admin string) (string, error) {
	sum := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, p)
		sum.Write([]byte(p))
		sum.Write(b)
		return err
	})
	if err != nil {
		return "", err
	}
	name := "mcpgate_tpl_" + hex.EncodeToString(sum.Sum(nil))[:16]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = withAdmin(ctx, admin, func(c *pgx.Conn) error {
		// Test packages run as parallel processes: one builds the template while
		// the others wait on this lock.
		if _, err := c.Exec(ctx, `SELECT pg_advisory_lock(7316027)`); err != nil {
			return err
		}
		defer c.Exec(context.Background(), `SELECT pg_advisory_unlock(7316027)`)
		var ready bool
		if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)`, name).Scan(&ready); err != nil {
			return err
		}
		if ready {
			return nil
		}
		building := name + "_build"
		if _, err := c.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, building)); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s`, building)); err != nil {
			return err
		}
		db, err := store.Open(ctx, withDatabase(admin, building))
		if err != nil {
			return err
		}
		_, err = db.Migrate(ctx)
		db.Close()
		if err != nil {
			return err
		}
		if _, err := c.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s RENAME TO %s`, building, name)); err != nil {
			return err
		}
		_, err = c.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s IS_TEMPLATE true`, name))
		return err
	})
	return name, err
}

func withAdmin(ctx context.Context, admin string, fn func(*pgx.Conn) error) error {
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to TEST_DATABASE_URL: %w", err)
	}
	defer c.Close(context.Background())
	return fn(c)
}

// withDatabase returns the admin URL pointed at another database. It handles
// both URL and keyword/value connection strings.
func withDatabase(admin, name string) string {
	if u, err := url.Parse(admin); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		return u.String()
	}
	var parts []string
	for _, f := range strings.Fields(admin) {
		if !strings.HasPrefix(f, "dbname=") {
			parts = append(parts, f)
		}
	}
	return strings.Join(append(parts, "dbname="+name), " ")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
