package service_test

import (
	"context"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
)

// TestCaps: a person cannot mint keys or workspaces
// without bound; revoked keys free their place, other people have their own.
func TestCaps(t *testing.T) {
	ctx := context.Background()
	env := servicetest.New(t, service.Options{MaxKeysPerUser: 3, MaxWorkspacesPerUser: 2})
	u, a := env.NewUser(t, "member@example.com")
	_, other := env.NewUser(t, "other@example.com")
	var ids []string
	for i := range 3 {
		k, _, err := env.Service.Keys.CreateKey(ctx, a, mcpgate.NewKey{Name: "k"})
		if err != nil {
			t.Fatalf("CreateKey(%d) err = %v", i, err)
		}
		ids = append(ids, k.ID)
	}
	if _, _, err := env.Service.Keys.CreateKey(ctx, a, mcpgate.NewKey{Name: "k"}); codeOf(err) != mcpgate.EConflict {
		t.Fatalf("4th key: err = %v, want conflict", err)
	}
	if _, _, err := env.Service.Keys.CreateKey(ctx, other, mcpgate.NewKey{Name: "k"}); err != nil {
		t.Errorf("another person's key: err = %v", err)
	}
	if err := env.Service.Keys.RevokeKey(ctx, a, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.Service.Keys.CreateKey(ctx, a, mcpgate.NewKey{Name: "k"}); err != nil {
		t.Errorf("key after revoking one: err = %v", err)
	}
	for i := range 2 {
		if _, err := env.Service.Workspaces.CreateWorkspace(ctx, u, "team"); err != nil {
			t.Fatalf("CreateWorkspace(%d) err = %v", i, err)
		}
	}
	if _, err := env.Service.Workspaces.CreateWorkspace(ctx, u, "team"); codeOf(err) != mcpgate.EConflict {
		t.Errorf("3rd workspace: err = %v, want conflict", err)
	}
}
