package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// mustStore opens a store on a fresh database; the test closes it itself or
// at cleanup.
func mustStore(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), storetest.NewDatabase(t))
	if err != nil {
		t.Fatalf("store.Open() err = %v", err)
	}
	t.Cleanup(db.Close)
	return db
}

func TestReady(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		ready      func(t *testing.T) func(context.Context) error
		wantStatus int
	}{
		{name: "migrated database", wantStatus: 200, ready: func(t *testing.T) func(context.Context) error {
			return mustStore(t).Ready
		}},
		{name: "database unreachable", wantStatus: 503, ready: func(t *testing.T) func(context.Context) error {
			db := mustStore(t)
			db.Close()
			return db.Ready
		}},
		{name: "migration pending", wantStatus: 503, ready: func(t *testing.T) func(context.Context) error {
			db := mustStore(t)
			if err := db.MigrateDown(context.Background()); err != nil {
				t.Fatalf("MigrateDown() err = %v", err)
			}
			return db.Ready
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, api.Options{Ready: tt.ready(t)})
			c := ts.newClient(t)
			c.do("GET", "/readyz", nil).wantStatus(t, tt.wantStatus)
			// The process is up whatever the database says.
			c.do("GET", "/healthz", nil).wantStatus(t, http.StatusOK)
		})
	}
}
