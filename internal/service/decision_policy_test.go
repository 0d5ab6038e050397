package service_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mcpgate/mcpgate"
)

// The two-factor policy covers every place a person stands
// in for the human, and the optional four-eyes rule keeps the requester from
// deciding their own request.

// enrolTOTP turns two-factor sign-in on for the actor's person.
func (f *padFixture) enrolTOTP(t *testing.T, a *mcpgate.Actor) {
	t.Helper()
	ctx := context.Background()
	if err := f.db.BeginTOTP(ctx, f.sealer, a.UserID, mcpgate.Secret("JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP")); err != nil {
		t.Fatal(err)
	}
	if err := f.db.ConfirmTOTP(ctx, a.UserID, 1, nil); err != nil {
		t.Fatal(err)
	}
}

// requireTwoFactor has an enrolled owner turn the workspace's policy on.
func (f *padFixture) requireTwoFactor(t *testing.T) {
	t.Helper()
	f.enrolTOTP(t, f.owner)
	on := true
	if _, err := f.svc.Workspaces.UpdateWorkspace(context.Background(), f.owner, mcpgate.WorkspaceUpdate{RequireTwoFactor: &on}); err != nil {
		t.Fatal(err)
	}
}

// confirmEnd is the dashboard's confirmed call of pads_end by a person.
func (f *padFixture) confirmEnd(a *mcpgate.Actor, pad string) error {
	_, err := f.svc.Tools.CallTool(context.Background(), a, mcpgate.ToolCall{Tool: "pads_end",
		Arguments: []byte(`{"pad":"` + pad + `"}`), Confirmed: true})
	return err
}

func TestTwoFactorPolicy_DashboardConfirmation(t *testing.T) {
	f := newPadFixture(t)
	f.enableEnd(t, mcpgate.ApprovalHuman)
	f.requireTwoFactor(t)
	// Before, an admin without two-factor sign-in ended the pad with one
	// confirmed call from the dashboard.
	for name, a := range map[string]*mcpgate.Actor{"admin": f.admin, "member": f.member} {
		if err := f.confirmEnd(a, "p1"); mcpgate.ErrorCode(err) != mcpgate.ETOTPEnrolment {
			t.Fatalf("%s without TOTP confirming in the dashboard: err = %v, want totp_enrolment_required", name, err)
		}
	}
	if f.endedCount() != 0 {
		t.Fatalf("ended = %d, want 0", f.endedCount())
	}
	if ev := f.audit.Last(); ev.Outcome != mcpgate.OutcomeDenied || ev.Action != "pads_end" {
		t.Errorf("the refusal is not audited as denied: %+v", ev)
	}
	if err := f.confirmEnd(f.owner, "p1"); err != nil {
		t.Fatalf("enrolled owner confirming: err = %v", err)
	}
	f.enrolTOTP(t, f.admin)
	if err := f.confirmEnd(f.admin, "p2"); err != nil {
		t.Fatalf("enrolled admin confirming: err = %v", err)
	}
	if f.endedCount() != 2 {
		t.Fatalf("ended = %d, want 2", f.endedCount())
	}
}

func TestTwoFactorPolicy_RoleChanges(t *testing.T) {
	f := newPadFixture(t)
	ctx := context.Background()
	f.enableEnd(t, mcpgate.ApprovalHuman)
	f.requireTwoFactor(t)
	// Before: an admin without two-factor demoted themselves to member (and
	// then approved their own key's requests as a member).
	if _, err := f.svc.Workspaces.SetMemberRole(ctx, f.admin, f.admin.UserID, mcpgate.RoleMember); mcpgate.ErrorCode(err) != mcpgate.ETOTPEnrolment {
		t.Fatalf("admin without TOTP demoting themselves: err = %v, want totp_enrolment_required", err)
	}
	if _, err := f.svc.Workspaces.SetMemberRole(ctx, f.admin, f.member.UserID, mcpgate.RoleAdmin); mcpgate.ErrorCode(err) != mcpgate.ETOTPEnrolment {
		t.Fatalf("admin without TOTP promoting a member: err = %v, want totp_enrolment_required", err)
	}
	if err := f.svc.Workspaces.RemoveMember(ctx, f.admin, f.member.UserID); mcpgate.ErrorCode(err) != mcpgate.ETOTPEnrolment {
		t.Fatalf("admin without TOTP removing a member: err = %v, want totp_enrolment_required", err)
	}
	// Demoted by the owner, the person is a member without two-factor, and
	// a member decides nothing without it either: the policy holds the
	// decision, whatever the role.
	key := f.keyActor(t, f.admin)
	ap := f.request(t, key, "p1")
	if _, err := f.svc.Workspaces.SetMemberRole(ctx, f.owner, f.admin.UserID, mcpgate.RoleMember); err != nil {
		t.Fatalf("enrolled owner demoting the admin: err = %v", err)
	}
	demoted, _, err := f.svc.Workspaces.Enter(ctx, &mcpgate.User{ID: f.admin.UserID, Email: f.admin.Email}, f.ws, mcpgate.SourceDashboard)
	if err != nil {
		t.Fatal(err)
	}
	for name, decide := range map[string]func(context.Context, *mcpgate.Actor, string) (*mcpgate.ApprovalRequest, error){
		"Approve": f.svc.Approvals.Approve, "Deny": f.svc.Approvals.Deny} {
		if _, err := decide(ctx, demoted, ap.ID); mcpgate.ErrorCode(err) != mcpgate.ETOTPEnrolment {
			t.Fatalf("%s by the demoted member without TOTP of their own request: err = %v, want totp_enrolment_required", name, err)
		}
	}
	if err := f.use(key, ap.ID, `{"pad":"p1"}`); err == nil || f.endedCount() != 0 {
		t.Fatalf("the request ran without a decision: err = %v, ended = %d", err, f.endedCount())
	}
	f.enrolTOTP(t, demoted)
	if _, err := f.svc.Approvals.Approve(ctx, demoted, ap.ID); err != nil {
		t.Fatalf("enrolled member approving their own request: err = %v", err)
	}
}

func TestTwoFactorPolicy_OAuthConsent(t *testing.T) {
	f := newPadFixture(t)
	ctx := context.Background()
	admin := &mcpgate.User{ID: f.admin.UserID, Email: f.admin.Email}
	if _, _, err := f.svc.Workspaces.EnterToGrant(ctx, admin, f.ws); err != nil {
		t.Fatalf("EnterToGrant() without the policy: err = %v", err)
	}
	f.requireTwoFactor(t)
	if _, _, err := f.svc.Workspaces.EnterToGrant(ctx, admin, f.ws); mcpgate.ErrorCode(err) != mcpgate.ETOTPEnrolment {
		t.Fatalf("admin without TOTP consenting to an app: err = %v, want totp_enrolment_required", err)
	}
	a, ws, err := f.svc.Workspaces.EnterToGrant(ctx, &mcpgate.User{ID: f.owner.UserID, Email: f.owner.Email}, f.ws)
	if err != nil || a.Role != mcpgate.RoleOwner || ws.ID != f.ws {
		t.Fatalf("enrolled owner consenting: %+v, %+v, %v", a, ws, err)
	}
	// Not a member: not found, as Enter says.
	if _, _, err := f.svc.Workspaces.EnterToGrant(ctx, admin, f.outside.WorkspaceID); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("EnterToGrant(another workspace) err = %v, want not found", err)
	}
}

func TestApproval_FourEyes(t *testing.T) {
	f := newPadFixture(t)
	ctx := context.Background()
	f.enableEnd(t, mcpgate.ApprovalHuman)
	on, off := true, false
	if _, err := f.svc.Workspaces.UpdateWorkspace(ctx, f.admin, mcpgate.WorkspaceUpdate{ApprovalFourEyes: &on}); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Fatalf("admin turning four eyes on: err = %v, want forbidden", err)
	}
	ws, err := f.svc.Workspaces.UpdateWorkspace(ctx, f.owner, mcpgate.WorkspaceUpdate{ApprovalFourEyes: &on})
	if err != nil || !ws.ApprovalFourEyes {
		t.Fatalf("UpdateWorkspace(four eyes on) = %+v, %v", ws, err)
	}
	if ev := f.audit.Last(); ev.Action != string(mcpgate.ActionWorkspaceUpdated) || ev.Arguments["approval_four_eyes"] != true {
		t.Errorf("last audit event = %+v", ev)
	}
	if _, got, _ := f.svc.Workspaces.Enter(ctx, &mcpgate.User{ID: f.member.UserID}, f.ws, mcpgate.SourceDashboard); !got.ApprovalFourEyes {
		t.Error("Enter() does not show the setting")
	}
	// Another workspace is untouched.
	if _, got, _ := f.svc.Workspaces.Enter(ctx, &mcpgate.User{ID: f.outside.UserID}, f.outside.WorkspaceID, mcpgate.SourceDashboard); got.ApprovalFourEyes {
		t.Error("the setting leaked into another workspace")
	}

	// Nobody decides their own request: not a member (before, a member was
	// their own human approver), not an admin, not the owner.
	for name, who := range map[string]*mcpgate.Actor{"member": f.member, "admin": f.admin, "owner": f.owner} {
		key := f.keyActor(t, who)
		ap := f.request(t, key, "p-"+name)
		for verb, decide := range map[string]func(context.Context, *mcpgate.Actor, string) (*mcpgate.ApprovalRequest, error){
			"Approve": f.svc.Approvals.Approve, "Deny": f.svc.Approvals.Deny} {
			if _, err := decide(ctx, who, ap.ID); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
				t.Fatalf("%s: %s of their own request err = %v, want forbidden", name, verb, err)
			}
		}
		other := f.owner
		if who == f.owner {
			other = f.admin
		}
		if _, err := f.svc.Approvals.Approve(ctx, other, ap.ID); err != nil {
			t.Fatalf("%s's request approved by another: err = %v", name, err)
		}
		if err := f.use(key, ap.ID, `{"pad":"p-`+name+`"}`); err != nil {
			t.Fatalf("%s's key using the approval: err = %v", name, err)
		}
	}
	// A confirmed call in the dashboard is the requester approving
	// themselves: refused, and audited as denied.
	before := f.endedCount()
	err = f.confirmEnd(f.owner, "p9")
	if mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Fatalf("owner confirming in the dashboard under four eyes: err = %v, want forbidden", err)
	}
	if f.endedCount() != before {
		t.Fatal("the dashboard confirmation ran under four eyes")
	}
	if ev := f.audit.Last(); ev.Outcome != mcpgate.OutcomeDenied || ev.Action != "pads_end" {
		t.Errorf("the refusal is not audited as denied: %+v", ev)
	}
	// Tools that need no human are not concerned.
	if _, err := f.svc.Tools.CallTool(ctx, f.member, mcpgate.ToolCall{Tool: "notes_list"}); err != nil {
		t.Fatalf("member CallTool(notes_list) err = %v", err)
	}
	// Off again, the requester may decide.
	if _, err := f.svc.Workspaces.UpdateWorkspace(ctx, f.owner, mcpgate.WorkspaceUpdate{ApprovalFourEyes: &off}); err != nil {
		t.Fatal(err)
	}
	if err := f.confirmEnd(f.owner, "p9"); err != nil {
		var c *mcpgate.ConfirmationRequiredError
		t.Fatalf("owner confirming with four eyes off: err = %v (confirmation %v)", err, errors.As(err, &c))
	}
}
