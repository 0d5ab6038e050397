// Package credtest seeds a test database with sealed E2B credentials and
// reads how many of them each vault term seals: what the re-seal tests
// (internal/reseal) and the vault commands' tests (cmd/mcpgate) both check.
// It is imported by tests only.
//
// Imports from this module: internal/store, mcpgate.
package credtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
)

// Put stores credential number i, in a new workspace of ownerID, sealed by
// k, and returns the workspace's id and the credential.
func Put(tb testing.TB, db *store.DB, k store.Sealer, ownerID string, i int) (wsID, key string) {
	tb.Helper()
	ctx := context.Background()
	ws, err := db.CreateWorkspace(ctx, ownerID, fmt.Sprintf("ws %d", i))
	if err != nil {
		tb.Fatalf("CreateWorkspace() err = %v", err)
	}
	key = fmt.Sprintf("e2b_%040x", i+1)
	c := &mcpgate.Connection{WorkspaceID: ws.ID, Connector: "e2b", KeyHint: "e2b_…" + key[len(key)-4:], VerifiedAt: time.Now(), UpdatedBy: ownerID}
	if err := db.PutConnection(ctx, k, c, mcpgate.Secret(key)); err != nil {
		tb.Fatalf("PutConnection() err = %v", err)
	}
	return ws.ID, key
}

// CheckOpen checks that every credential of want (by workspace id) but
// those of the workspaces in skip opens with k to its value.
func CheckOpen(tb testing.TB, db *store.DB, k store.Sealer, want map[string]string, skip ...string) {
	tb.Helper()
	for ws, key := range want {
		if slices.Contains(skip, ws) {
			continue
		}
		got, err := db.OpenCredential(context.Background(), k, ws, "e2b")
		if err != nil || got.Reveal() != key {
			tb.Fatalf("OpenCredential(%s) = %q, %v; want %q", ws, got.Reveal(), err, key)
		}
	}
}

// TermUsage returns the credentials per term, "term:rows" in ascending term
// order, e.g. "1:3 2:5".
func TermUsage(tb testing.TB, db *store.DB) string {
	tb.Helper()
	usage, err := db.SealedTermUsage(context.Background())
	if err != nil {
		tb.Fatalf("SealedTermUsage() err = %v", err)
	}
	var parts []string
	for _, u := range usage {
		parts = append(parts, fmt.Sprintf("%d:%d", u.Term, u.Rows))
	}
	return strings.Join(parts, " ")
}

// WaitTermUsage waits up to 15 s until TermUsage is want.
func WaitTermUsage(tb testing.TB, db *store.DB, want string) {
	tb.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := TermUsage(tb, db)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("credentials per term = %q after 15s, want %q", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
