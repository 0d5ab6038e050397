package service_test

import (
	"context"
	"testing"

	"github.com/mcpgate/mcpgate"
)

// TestApproval_OAuthGrant: a connected app (an OAuth grant) asks for a
// person's approval like an MCP key does, and the approval is bound to that
// grant: the same person's MCP key, or another grant of theirs, cannot spend
// it; the grant that asked runs the call once.
func TestApproval_OAuthGrant(t *testing.T) {
	f := newPadFixture(t)
	ctx := context.Background()
	f.enableEnd(t, mcpgate.ApprovalHuman)
	grantActor := func(id string) *mcpgate.Actor {
		return &mcpgate.Actor{UserID: f.member.UserID, Email: f.member.Email, WorkspaceID: f.ws, Scope: mcpgate.ScopeFull,
			GrantID: id, ClientName: "Claude", Source: mcpgate.SourceMCP}
	}
	app, otherApp, memberKey := grantActor("5f0c3c4e-6a43-4c1e-9a64-0c1b3c2d7e11"), grantActor("9d6a2f7e-3b1c-4e8a-8f2d-4a5b6c7d8e9f"),
		f.keyActor(t, f.member)

	ap := f.request(t, app, "p1")
	if ap.GrantID != app.GrantID || ap.KeyID != "" || ap.State != mcpgate.ApprovalPending {
		t.Fatalf("approval = %+v, want pending and bound to the grant", ap)
	}
	if _, err := f.svc.Approve(ctx, app, ap.ID); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("the app approving its own call: err = %v, want forbidden", err)
	}
	if _, err := f.svc.Approve(ctx, f.member, ap.ID); err != nil {
		t.Fatalf("Approve() err = %v", err)
	}
	for name, other := range map[string]*mcpgate.Actor{"the same person's MCP key": memberKey, "another grant": otherApp} {
		if err := f.use(other, ap.ID, `{"pad":"p1"}`); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
			t.Errorf("%s spending the app's approval: err = %v, want forbidden", name, err)
		}
	}
	if f.endedCount() != 0 {
		t.Fatal("a mismatched credential ran the tool")
	}
	if err := f.use(app, ap.ID, `{"pad":"p1"}`); err != nil {
		t.Fatalf("the app spending its approval: err = %v", err)
	}
	if err := f.use(app, ap.ID, `{"pad":"p1"}`); err == nil {
		t.Error("the approval ran twice")
	}
	if f.endedCount() != 1 {
		t.Errorf("pads ended = %d, want 1", f.endedCount())
	}
}
