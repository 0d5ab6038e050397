package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

func mustOpenWith(t *testing.T, o store.Options) *store.DB {
	t.Helper()
	db, err := store.OpenWith(context.Background(), storetest.NewDatabase(t), o)
	if err != nil {
		t.Fatalf("OpenWith() err = %v", err)
	}
	t.Cleanup(db.Close)
	return db
}

// TestOpen_PoolSize: the pool is sized from the machine
// unless DATABASE_MAX_CONNS says otherwise, and long reads get a quarter of
// it, the hot path the rest.
func TestOpen_PoolSize(t *testing.T) {
	if db := mustOpenWith(t, store.Options{}); db.MaxConns() != store.DefaultMaxConns() || db.MaxConns() < 16 {
		t.Errorf("MaxConns() = %d, want DefaultMaxConns() = %d, at least 16", db.MaxConns(), store.DefaultMaxConns())
	}
	for _, tt := range []struct{ conns, slots int32 }{{4, 1}, {8, 2}, {40, 10}} {
		db := mustOpenWith(t, store.Options{MaxConns: tt.conns})
		if db.MaxConns() != tt.conns || db.LongReadSlots() != int(tt.slots) {
			t.Errorf("Options{MaxConns: %d}: MaxConns() = %d, LongReadSlots() = %d, want %d, %d", tt.conns, db.MaxConns(),
				db.LongReadSlots(), tt.conns, tt.slots)
		}
	}
}

// TestQueryTimeout: a statement that the database does
// not answer within the query timeout fails as EUnavailable instead of
// waiting, and the connection goes back to the pool; work marked
// WithoutQueryTimeout (an export, a migration) is bounded by its own
// context alone.
func TestQueryTimeout(t *testing.T) {
	db := mustOpenWith(t, store.Options{MaxConns: 4, QueryTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	start := time.Now()
	_, err := db.Pool.Exec(ctx, `SELECT pg_sleep(10)`)
	if mcpgate.ErrorCode(store.MapError(err)) != mcpgate.EUnavailable {
		t.Fatalf("a statement past the query timeout: err = %v, want one that maps to EUnavailable", err)
	}
	t.Logf("a 10 s statement with a 300 ms query timeout ended after %s", time.Since(start).Round(time.Millisecond))
	if _, err := db.Pool.Exec(store.WithoutQueryTimeout(ctx), `SELECT pg_sleep(0.5)`); err != nil {
		t.Fatalf("a statement WithoutQueryTimeout err = %v, want it to run to its end", err)
	}
	// Every connection is usable again: none stayed with the cancelled
	// statement.
	for range 4 {
		if err := db.Pool.Ping(ctx); err != nil {
			t.Fatalf("Ping() after the timeout err = %v", err)
		}
	}
}

// TestAcquireLongRead: the slots are taken without waiting, refused with
// ETooMany and a Retry-After when all are taken, and given back once.
func TestAcquireLongRead(t *testing.T) {
	db := mustOpenWith(t, store.Options{MaxConns: 8})
	r1, err := db.AcquireLongRead()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := db.AcquireLongRead()
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.AcquireLongRead()
	if mcpgate.ErrorCode(err) != mcpgate.ETooMany || mcpgate.ErrorRetryAfter(err) < 1 {
		t.Fatalf("a third long read of 2 slots: err = %v, want ETooMany with a Retry-After", err)
	}
	r1()
	r1() // twice gives back one slot, not two
	r3, err := db.AcquireLongRead()
	if err != nil {
		t.Fatalf("after a release: err = %v", err)
	}
	if _, err := db.AcquireLongRead(); mcpgate.ErrorCode(err) != mcpgate.ETooMany {
		t.Fatalf("a double release gave two slots back")
	}
	r2()
	r3()
}
