package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// TestCaps_atomic: a capped creation counts and creates
// in one step, on any replicas. Two creations race for the last place
// under the limit, each on its own pool on one database (two replicas):
// the first is held between its count and its insert until the second has
// either counted too (nothing orders them: both would pass) or waits for
// the first's lock. Exactly one passes.
func TestCaps_atomic(t *testing.T) {
	const limit = 2
	tests := []struct {
		name string
		// create makes the i-th thing of the one person the test is about.
		create func(ctx context.Context, db *store.DB, f *capsFixture, i int) error
		count  func(ctx context.Context, db *store.DB, f *capsFixture) int
	}{
		{"keys per person", func(ctx context.Context, db *store.DB, f *capsFixture, _ int) error {
			_, id, hash := mcpgate.NewMCPKey()
			_, err := db.CreateKeyWithin(ctx, &mcpgate.APIKey{ID: id, WorkspaceID: f.ws, UserID: f.user, Name: "k", Scope: mcpgate.ScopeFull},
				hash, limit)
			return err
		}, func(ctx context.Context, db *store.DB, f *capsFixture) int {
			keys, err := db.ListKeys(ctx, f.ws, f.user)
			if err != nil {
				f.t.Fatal(err)
			}
			return len(keys)
		}},
		{"workspaces per person", func(ctx context.Context, db *store.DB, f *capsFixture, _ int) error {
			_, _, err := db.CreateWorkspaceWithin(ctx, f.user, "team", limit)
			return err
		}, func(ctx context.Context, db *store.DB, f *capsFixture) int {
			wss, err := db.WorkspacesOfUser(ctx, f.user)
			if err != nil {
				f.t.Fatal(err)
			}
			return len(wss) - 1 // the personal one is not counted
		}},
		{"pending approvals", func(ctx context.Context, db *store.DB, f *capsFixture, _ int) error {
			ap := &mcpgate.ApprovalRequest{WorkspaceID: f.ws, KeyID: "k1", RequestedBy: f.user, Tool: "t", ToolTitle: "T",
				Arguments: map[string]any{}, Summary: "s", ExpiresAt: time.Now().Add(10 * time.Minute)}
			_, err := db.CreateApprovalWithin(ctx, ap, "hash", limit, time.Now())
			return err
		}, func(ctx context.Context, db *store.DB, f *capsFixture) int {
			n, err := db.CountPendingApprovals(ctx, f.ws, f.user, time.Now())
			if err != nil {
				f.t.Fatal(err)
			}
			return n
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := newCapsFixture(t)
			for i := range limit - 1 {
				if err := tt.create(ctx, f.dbs[0], f, i); err != nil {
					t.Fatalf("create(%d) err = %v", i, err)
				}
			}
			var mu sync.Mutex
			counted := 0
			entered, release := make(chan struct{}), make(chan struct{})
			defer store.SetCapCounted(func(string) {
				mu.Lock()
				counted++
				first := counted == 1
				mu.Unlock()
				if first {
					close(entered)
					<-release
				}
			})()
			errs := make(chan error, 2)
			go func() { errs <- tt.create(ctx, f.dbs[0], f, limit) }()
			<-entered
			go func() { errs <- tt.create(ctx, f.dbs[1], f, limit+1) }()
			storetest.Until(t, "the second creation to count or wait for the lock", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return counted > 1 || storetest.WaitingLocks(t, f.dbs[0]) > 0
			})
			close(release)
			var refused int
			for range 2 {
				if err := <-errs; errors.Is(err, store.ErrCapReached) {
					refused++
				} else if err != nil {
					t.Fatalf("create err = %v", err)
				}
			}
			if n := tt.count(ctx, f.dbs[0], f); n != limit || refused != 1 {
				t.Errorf("%d made (%d refused), want %d (1 refused)", n, refused, limit)
			}
		})
	}
}

// capsFixture is one person with a personal workspace, seen through two
// pools on one database.
type capsFixture struct {
	t        *testing.T
	dbs      [2]*store.DB
	user, ws string
}

func newCapsFixture(t *testing.T) *capsFixture {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t)
	second, err := store.Open(ctx, db.Pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Close)
	u, err := db.CreateUser(ctx, "capped@example.com", "hash", nil)
	if err != nil {
		t.Fatal(err)
	}
	wss, err := db.WorkspacesOfUser(ctx, u.ID)
	if err != nil || len(wss) != 1 {
		t.Fatalf("WorkspacesOfUser() = %v, %v", wss, err)
	}
	return &capsFixture{t: t, dbs: [2]*store.DB{db, second}, user: u.ID, ws: wss[0].ID}
}
