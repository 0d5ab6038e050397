package store_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
)

// The approval wait is a workspace's own setting: set in one workspace, the
// other keeps its default; it shows in the workspace as its members read
// it; the table refuses what the gateway would not honour.
func TestApprovalWait_WorkspaceIsolation(t *testing.T) {
	db, wsA, a, wsB, b := openTwoWorkspaces(t)
	ctx := context.Background()
	if n, err := db.ApprovalWait(ctx, wsA); err != nil || n != 0 {
		t.Fatalf("ApprovalWait(new workspace) = %d, %v; want 0", n, err)
	}
	if err := db.SetApprovalWait(ctx, wsA, 30); err != nil {
		t.Fatal(err)
	}
	if n, _ := db.ApprovalWait(ctx, wsA); n != 30 {
		t.Errorf("ApprovalWait(A) = %d, want 30", n)
	}
	if n, _ := db.ApprovalWait(ctx, wsB); n != 0 {
		t.Errorf("ApprovalWait(B) = %d after A's change, want 0", n)
	}
	if w, err := db.FindMembership(ctx, wsA, a.ID); err != nil || w.ApprovalWaitSeconds != 30 {
		t.Errorf("FindMembership(A).ApprovalWaitSeconds = %+v, %v; want 30", w, err)
	}
	if list, _ := db.WorkspacesOfUser(ctx, b.ID); len(list) != 1 || list[0].ApprovalWaitSeconds != 0 {
		t.Errorf("WorkspacesOfUser(b) = %+v, want B's wait 0", list)
	}
	for _, n := range []int{-1, 56} {
		if err := db.SetApprovalWait(ctx, wsA, n); err == nil {
			t.Errorf("SetApprovalWait(%d) err = nil, want the table's refusal", n)
		}
	}
	if n, _ := db.ApprovalWait(ctx, wsA); n != 30 {
		t.Errorf("ApprovalWait(A) = %d after refused changes, want 30", n)
	}
	for _, ws := range []string{"not-a-uuid", "00000000-0000-0000-0000-000000000000"} {
		if err := db.SetApprovalWait(ctx, ws, 5); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
			t.Errorf("SetApprovalWait(%s) err = %v, want not found", ws, err)
		}
		if _, err := db.ApprovalWait(ctx, ws); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
			t.Errorf("ApprovalWait(%s) err = %v, want not found", ws, err)
		}
	}
}

// A decision is told to every replica, naming the workspace and the
// request; a decision that did not happen (already decided, another
// workspace's) is not.
func TestDecideApproval_Notifies(t *testing.T) {
	db, wsA, a, wsB, _ := openTwoWorkspaces(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := time.Now()
	ap := &mcpgate.ApprovalRequest{WorkspaceID: wsA, KeyID: "k1", RequestedBy: a.ID, Tool: "t", ToolTitle: "T",
		Arguments: map[string]any{}, Summary: "s", ExpiresAt: now.Add(10 * time.Minute)}
	if err := db.CreateApproval(ctx, ap, "hash1"); err != nil {
		t.Fatal(err)
	}
	got := make(chan store.Invalidation, 16)
	ready := make(chan struct{})
	go db.Listen(ctx, slog.New(slog.DiscardHandler), ready, func(inv store.Invalidation) {
		if inv.Kind == store.InvalidateApproval {
			got <- inv
		}
	}, nil)
	<-ready
	if ok, _ := db.DecideApproval(ctx, wsB, ap.ID, a.ID, true, now); ok {
		t.Fatal("DecideApproval(other workspace) = true")
	}
	if ok, err := db.DecideApproval(ctx, wsA, ap.ID, a.ID, false, now); !ok || err != nil {
		t.Fatalf("DecideApproval() = %v, %v", ok, err)
	}
	if ok, _ := db.DecideApproval(ctx, wsA, ap.ID, a.ID, true, now); ok {
		t.Fatal("DecideApproval(decided) = true")
	}
	// A marker after the refused decisions: the notifications arrive in
	// commit order, so anything they sent would come before it.
	if _, err := db.Pool.Exec(ctx, `SELECT pg_notify($1, $2)`, store.InvalidationChannel, store.InvalidateApproval+":marker:end"); err != nil {
		t.Fatal(err)
	}
	want := []store.Invalidation{{Kind: store.InvalidateApproval, WorkspaceID: wsA, ID: ap.ID},
		{Kind: store.InvalidateApproval, WorkspaceID: "marker", ID: "end"}}
	for _, w := range want {
		select {
		case inv := <-got:
			if inv != w {
				t.Fatalf("notification = %+v, want %+v", inv, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification %+v", w)
		}
	}
}
