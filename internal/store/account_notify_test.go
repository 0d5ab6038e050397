package store_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// Deleting an account tells every replica that the person's keys and OAuth
// grants in the shared workspaces they left are gone, so neither stays in a
// cache until its TTL.
func TestDeleteUser_NotifiesKeysAndGrants(t *testing.T) {
	db := storetest.Open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	owner, member := mustUser(t, db, "owner@example.com"), mustUser(t, db, "member@example.com")
	ws := mustPersonal(t, db, owner)
	mustInvitation(t, db, ws, owner.ID, "member@example.com", "tok", time.Hour)
	if _, err := db.AcceptInvitation(ctx, tokenHash("tok"), member.ID, member.Email); err != nil {
		t.Fatal(err)
	}
	got := make(chan store.Invalidation, 16)
	ready := make(chan struct{})
	go db.Listen(ctx, slog.New(slog.DiscardHandler), ready, func(inv store.Invalidation) { got <- inv }, nil)
	<-ready
	if _, err := db.DeleteUser(ctx, member.ID); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{store.InvalidateKeys + ":" + ws: false, store.InvalidateGrants + ":" + ws: false}
	deadline := time.After(5 * time.Second)
	for n := 0; n < len(want); {
		select {
		case inv := <-got:
			if seen, ok := want[inv.Kind+":"+inv.WorkspaceID]; ok && !seen {
				want[inv.Kind+":"+inv.WorkspaceID] = true
				n++
			}
		case <-deadline:
			t.Fatalf("notifications after DeleteUser: %v (true = received)", want)
		}
	}
}
