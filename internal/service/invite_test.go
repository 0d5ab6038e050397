package service_test

import (
	"context"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
)

// TestInvite_InviteOnlySignup: with SIGNUP=invite, the
// owner of a personal workspace cannot mint accounts by inviting into it;
// owners and admins of a shared workspace and the instance admin can, and
// anyone may invite a person who already has an account.
func TestInvite_InviteOnlySignup(t *testing.T) {
	ctx := context.Background()
	env := servicetest.New(t, service.Options{Signup: service.SignupInvite})
	_, instAdmin := env.NewUser(t, "first@example.com") // the first user is the instance admin
	u, personal := env.NewUser(t, "plain@example.com")
	env.NewUser(t, "existing@example.com")
	shared, err := env.Service.Workspaces.CreateWorkspace(ctx, u, "Team")
	if err != nil {
		t.Fatalf("CreateWorkspace() err = %v", err)
	}
	owner, _, err := env.Service.Workspaces.Enter(ctx, u, shared.ID, mcpgate.SourceAPI)
	if err != nil {
		t.Fatalf("Enter() err = %v", err)
	}
	tests := []struct {
		name     string
		actor    *mcpgate.Actor
		email    string
		wantCode mcpgate.Code
	}{
		{name: "personal workspace, new person", actor: personal, email: "new1@example.com", wantCode: mcpgate.EForbidden},
		{name: "personal workspace, existing account", actor: personal, email: "existing@example.com"},
		{name: "shared workspace owner, new person", actor: owner, email: "new2@example.com"},
		{name: "instance admin's personal workspace, new person", actor: instAdmin, email: "new3@example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, tok, err := env.Service.Workspaces.Invite(ctx, tt.actor, tt.email, mcpgate.RoleMember)
			if got := codeOf(err); got != tt.wantCode {
				t.Fatalf("Invite() err = %v, want code %q", err, tt.wantCode)
			}
			if err == nil && tok == "" {
				t.Fatalf("Invite() token empty")
			}
		})
	}
	// Open sign-up keeps the old rule: any workspace admin may invite.
	open := servicetest.New(t, service.Options{Signup: service.SignupOpen})
	open.NewUser(t, "first@example.com")
	_, p := open.NewUser(t, "plain@example.com")
	if _, _, err := open.Service.Workspaces.Invite(ctx, p, "new@example.com", mcpgate.RoleMember); err != nil {
		t.Errorf("open sign-up: Invite() err = %v, want nil", err)
	}
}

func codeOf(err error) mcpgate.Code {
	if err == nil {
		return ""
	}
	return mcpgate.ErrorCode(err)
}
