package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/migrations"
)

// migrationLockID is the advisory lock that serialises migrations when several
// replicas start at once ("mcpgate" in ASCII).
const migrationLockID = 0x6d63706761746500

// DB is the gateway's database.
type DB struct {
	Pool *pgxpool.Pool

	queryTimeout atomic.Int64 // a time.Duration
	// longReads holds a token per long read under way (pool.go).
	longReads chan struct{}
	// down is set while the listener finds the database unreachable
	// (notify.go): waits for a connection then fail at once.
	down atomic.Bool
}

// Open connects to the database at dsn with the default Options and checks
// that it answers.
func Open(ctx context.Context, dsn string) (*DB, error) { return OpenWith(ctx, dsn, Options{}) }

// OpenWith connects to the database at dsn with o and checks that it
// answers.
func OpenWith(ctx context.Context, dsn string, o Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", redactDSNError(err))
	}
	db := &DB{}
	db.configure(cfg, dsn, o)
	cfg.MaxConnIdleTime = 5 * time.Minute
	cfg.HealthCheckPeriod = 15 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	db.Pool = pool
	return db, nil
}

// redactDSNError drops the DSN, which may carry a password, from pgx's parse
// errors.
func redactDSNError(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if cause := errors.Unwrap(pe); cause != nil {
			return errors.New("invalid connection string: " + cause.Error())
		}
		return errors.New("invalid connection string")
	}
	return err
}

// closeWait bounds Close: closing a connection sends PostgreSQL a goodbye,
// and against a database that hangs pgx waits up to 15 s for each.
const closeWait = 2 * time.Second

// Close closes the pool. It returns after closeWait even if a database that
// hangs holds connections; they are then closed in the background (or by
// the process exiting).
func (db *DB) Close() {
	done := make(chan struct{})
	go func() { db.Pool.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
	}
}

// provider builds a goose provider over the pool. The session locker takes a
// Postgres advisory lock, so replicas starting together apply each migration
// once.
func (db *DB) provider() (*goose.Provider, func() error, error) {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID))
	if err != nil {
		return nil, nil, err
	}
	sqlDB := stdlib.OpenDBFromPool(db.Pool)
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		sqlDB.Close()
		return nil, nil, fmt.Errorf("migrations: %w", err)
	}
	return p, sqlDB.Close, nil
}

// Migrate applies every pending migration and returns how many ran.
func (db *DB) Migrate(ctx context.Context) (int, error) {
	p, closeFn, err := db.provider()
	if err != nil {
		return 0, err
	}
	defer closeFn()
	res, err := p.Up(WithoutQueryTimeout(ctx))
	if err != nil {
		return 0, fmt.Errorf("apply migrations: %w", err)
	}
	return len(res), nil
}

// MigrateDown rolls back the most recent migration.
func (db *DB) MigrateDown(ctx context.Context) error {
	p, closeFn, err := db.provider()
	if err != nil {
		return err
	}
	defer closeFn()
	if _, err := p.Down(WithoutQueryTimeout(ctx)); err != nil {
		return fmt.Errorf("roll back migration: %w", err)
	}
	return nil
}

// MigrationStatus is one migration's state.
type MigrationStatus struct {
	Version   int64
	Source    string
	Applied   bool
	AppliedAt time.Time
}

// MigrationsStatus lists every migration and whether it is applied.
func (db *DB) MigrationsStatus(ctx context.Context) ([]MigrationStatus, error) {
	p, closeFn, err := db.provider()
	if err != nil {
		return nil, err
	}
	defer closeFn()
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	out := make([]MigrationStatus, 0, len(st))
	for _, s := range st {
		out = append(out, MigrationStatus{Version: s.Source.Version, Source: s.Source.Path,
			Applied: s.State == goose.StateApplied, AppliedAt: s.AppliedAt})
	}
	return out, nil
}

// Ready reports whether the database answers and every migration is applied.
func (db *DB) Ready(ctx context.Context) error {
	var version int64
	err := db.Pool.QueryRow(ctx,
		`SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&version)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if want := LatestMigration(); version < want {
		return fmt.Errorf("schema at version %d, want %d: run mcpgate migrate", version, want)
	}
	return nil
}

// LatestMigration is the highest migration version embedded in the binary.
func LatestMigration() int64 {
	entries, _ := migrations.FS.ReadDir(".")
	var latest int64
	for _, e := range entries {
		var v int64
		if _, err := fmt.Sscanf(e.Name(), "%05d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// inTx runs fn in a transaction, committing when it returns nil.
func (db *DB) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db.Pool, fn)
}

// touchLastUsed moves last_used_at of a batch of rows of table forward to
// their last-use times, in one statement; it never moves one back, so a late
// batch from another replica cannot undo a newer mark. idType is the type
// of the table's id column.
func (db *DB) touchLastUsed(ctx context.Context, table, idType string, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	ids := make([]string, 0, len(used))
	times := make([]time.Time, 0, len(used))
	for id, t := range used {
		ids = append(ids, id)
		times = append(times, t)
	}
	_, err := db.Pool.Exec(ctx, `
		UPDATE `+table+` r SET last_used_at = u.t
		FROM unnest($1::`+idType+`[], $2::timestamptz[]) AS u(id, t)
		WHERE r.id = u.id AND (r.last_used_at IS NULL OR r.last_used_at < u.t)`, ids, times)
	return mapError(err, "")
}

// listRows runs a query and collects its rows, each filled in by scan, with
// errors mapped as every store method maps them.
func listRows[T any](ctx context.Context, db *DB, scan func(pgx.Row, *T) error, sql string, args ...any) ([]T, error) {
	rows, err := db.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, mapError(err, "")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) {
		var v T
		return v, scan(r, &v)
	})
	return out, mapError(err, "")
}

// mapError turns database errors into coded errors: no rows become ENotFound
// with the given message, unique violations EConflict, and an unreachable
// database EUnavailable. Anything else is wrapped as it is.
func mapError(err error, notFound string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return mcpgate.Errorf(mcpgate.ENotFound, "%s", notFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505":
			return &mcpgate.Error{Code: mcpgate.EConflict, Message: "already exists", Err: err}
		case "22P02": // invalid text representation, e.g. a malformed uuid in a path
			return mcpgate.Errorf(mcpgate.ENotFound, "%s", notFound)
		case "23503": // a foreign key names a row that is gone (a deleted workspace)
			return mcpgate.Errorf(mcpgate.ENotFound, "%s", notFound)
		case "57P01", "57P02", "57P03", "08000", "08003", "08006":
			return &mcpgate.Error{Code: mcpgate.EUnavailable, Message: "the database is unavailable; try again shortly", Err: err}
		}
		return err
	}
	// A deadline that passed (the query timeout, or the pool refusing at
	// once while the database is marked down) is the database not
	// answering: unavailable, try again, like a refused connection.
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) || isConnError(err) || errors.Is(err, context.DeadlineExceeded) {
		return &mcpgate.Error{Code: mcpgate.EUnavailable, Message: "the database is unavailable; try again shortly", Err: err}
	}
	return err
}

func isConnError(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce)
}

// isUUID reports whether s has the shape of a uuid; ids from URLs that do not
// are answered as not found without a query.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
