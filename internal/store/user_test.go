package store_test

import (
	"context"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

func mustUser(t *testing.T, db *store.DB, email string) *mcpgate.User {
	t.Helper()
	u, err := db.CreateUser(context.Background(), email, "hash", nil)
	if err != nil {
		t.Fatalf("CreateUser(%s) err = %v", email, err)
	}
	return u
}

// mustWorkspace creates a user and returns the id of their personal
// workspace, and the user.
func mustWorkspace(t *testing.T, db *store.DB, email string) (string, *mcpgate.User) {
	t.Helper()
	u := mustUser(t, db, email)
	return mustPersonal(t, db, u), u
}

// openTwoWorkspaces is a fresh database with two people, a@ and b@, each in
// their own personal workspace: the opening of every isolation test.
func openTwoWorkspaces(t *testing.T) (db *store.DB, wsA string, a *mcpgate.User, wsB string, b *mcpgate.User) {
	t.Helper()
	db = storetest.Open(t)
	wsA, a = mustWorkspace(t, db, "a@example.com")
	wsB, b = mustWorkspace(t, db, "b@example.com")
	return db, wsA, a, wsB, b
}

func TestCreateUser(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	first := mustUser(t, db, "a@example.com")
	second := mustUser(t, db, "b@example.com")
	if !first.InstanceAdmin || second.InstanceAdmin {
		t.Fatalf("instance admin = %v, %v; want only the first user", first.InstanceAdmin, second.InstanceAdmin)
	}
	if _, err := db.CreateUser(ctx, "a@example.com", "h", nil); mcpgate.ErrorCode(err) != mcpgate.EConflict {
		t.Fatalf("duplicate CreateUser() err = %v, want conflict", err)
	}
	ws, err := db.WorkspacesOfUser(ctx, first.ID)
	if err != nil || len(ws) != 1 || ws[0].Role != mcpgate.RoleOwner || !ws[0].Personal {
		t.Fatalf("WorkspacesOfUser() = %+v, %v; want one personal workspace owned", ws, err)
	}
}

func TestMembership_IsolatedPerWorkspace(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	wsA, a := mustWorkspace(t, db, "a@example.com")
	b := mustUser(t, db, "b@example.com")
	if _, err := db.FindMembership(ctx, wsA, b.ID); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("FindMembership(other) err = %v, want not_found", err)
	}
	if _, err := db.FindMembership(ctx, "not-a-uuid", a.ID); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("FindMembership(bad id) err = %v, want not_found", err)
	}
	if err := db.RemoveMember(ctx, wsA, a.ID); mcpgate.ErrorCode(err) != mcpgate.EConflict {
		t.Fatalf("RemoveMember(last owner) err = %v, want conflict", err)
	}
	if _, err := db.UpdateMemberRole(ctx, wsA, a.ID, mcpgate.RoleMember); mcpgate.ErrorCode(err) != mcpgate.EConflict {
		t.Fatalf("UpdateMemberRole(last owner) err = %v, want conflict", err)
	}
	if err := db.RemoveMember(ctx, wsA, b.ID); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("RemoveMember(non-member) err = %v, want not_found", err)
	}
}
