package store_test

import (
	"context"
	"io/fs"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/migrations"
)

// Replicas starting together on a fresh database each run the migrations;
// the advisory lock must make every migration apply exactly once, and every
// replica must start.
func TestMigrate_ConcurrentReplicasApplyOnce(t *testing.T) {
	dsn := storetest.NewEmptyDatabase(t)
	ctx := context.Background()
	const replicas = 4
	applied := make([]int, replicas)
	var wg sync.WaitGroup
	errs := make(chan error, replicas)
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := store.Open(ctx, dsn)
			if err != nil {
				errs <- err
				return
			}
			defer db.Close()
			n, err := db.Migrate(ctx)
			if err != nil {
				errs <- err
				return
			}
			applied[i] = n
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Migrate() on a replica err = %v", err)
	}
	total := 0
	for _, n := range applied {
		total += n
	}
	// Count the embedded files rather than trust the highest version: the
	// numbers may have gaps while parallel branches each add one.
	entries, _ := fs.Glob(migrations.FS, "*.sql")
	if want := len(entries); total != want {
		t.Fatalf("migrations applied across replicas = %d (%v), want %d: each exactly once", total, applied, want)
	}
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, distinct int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != distinct || distinct != len(entries) {
		t.Fatalf("goose_db_version has %d rows for %d versions, want %d once each", rows, distinct, len(entries))
	}
	if err := db.Ready(ctx); err != nil {
		t.Fatalf("Ready() after concurrent migrations err = %v", err)
	}
}
