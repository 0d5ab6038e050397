package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
)

// TestApprovals_WorkspaceIsolation: every approval method is scoped by
// workspace; another workspace's request is not found, not decided, not
// used and not counted.
func TestApprovals_WorkspaceIsolation(t *testing.T) {
	db, wsA, a, wsB, _ := openTwoWorkspaces(t)
	ctx := context.Background()
	now := time.Now()
	ap := &mcpgate.ApprovalRequest{WorkspaceID: wsA, KeyID: "k1", RequestedBy: a.ID, Tool: "t", ToolTitle: "T",
		Arguments: map[string]any{"x": "1"}, Summary: "s", ExpiresAt: now.Add(10 * time.Minute)}
	if err := db.CreateApproval(ctx, ap, "hash1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.FindApproval(ctx, wsB, ap.ID); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("FindApproval(other workspace) err = %v, want not found", err)
	}
	if list, err := db.FindApprovals(ctx, wsB, store.ApprovalFilter{Now: now}); err != nil || len(list) != 0 {
		t.Errorf("FindApprovals(other workspace) = %v, %v", list, err)
	}
	if n, _ := db.CountPendingApprovals(ctx, wsB, "", now); n != 0 {
		t.Errorf("CountPendingApprovals(other workspace) = %d", n)
	}
	if ok, err := db.DecideApproval(ctx, wsB, ap.ID, a.ID, true, now); ok || err != nil {
		t.Errorf("DecideApproval(other workspace) = %v, %v; want false", ok, err)
	}
	if ok, _ := db.DecideApproval(ctx, wsA, ap.ID, a.ID, true, now); !ok {
		t.Fatal("DecideApproval(own workspace) = false")
	}
	use := store.ApprovalUse{WorkspaceID: wsB, ID: ap.ID, KeyID: "k1", UserID: a.ID, Tool: "t", ArgsHashes: []string{"hash1"}, Now: now}
	if ok, err := db.UseApproval(ctx, use); ok || err != nil {
		t.Errorf("UseApproval(other workspace) = %v, %v; want false", ok, err)
	}
	use.WorkspaceID = wsA
	if ok, _ := db.UseApproval(ctx, use); !ok {
		t.Fatal("UseApproval(own workspace) = false")
	}
	if ok, _ := db.UseApproval(ctx, use); ok {
		t.Error("UseApproval() twice = true")
	}
	if ok, err := db.ExpireApproval(ctx, wsB, ap.ID, now.Add(time.Hour)); ok || err != nil {
		t.Errorf("ExpireApproval(other workspace) = %v, %v", ok, err)
	}
	if g, err := db.Guardrails(ctx, wsB); err != nil || g.MaxRunning != 0 {
		t.Errorf("Guardrails(untouched) = %+v, %v", g, err)
	}
	if err := db.SetGuardrails(ctx, wsA, a.ID, mcpgate.Guardrails{MaxRunning: 3, AllowedTemplates: []string{"base"}}); err != nil {
		t.Fatal(err)
	}
	if g, _ := db.Guardrails(ctx, wsB); g.MaxRunning != 0 || len(g.AllowedTemplates) != 0 {
		t.Errorf("workspace B sees A's guardrails: %+v", g)
	}
	if g, _ := db.Guardrails(ctx, wsA); g.MaxRunning != 3 || len(g.AllowedTemplates) != 1 {
		t.Errorf("Guardrails(A) = %+v", g)
	}
}
