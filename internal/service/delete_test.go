package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/password"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
)

func TestDeleteAccount(t *testing.T) {
	env := servicetest.New(t, service.Options{PasswordParams: &password.Params{Time: 1, Memory: 8 * 1024, Threads: 1}})
	ctx := context.Background()
	svc := env.Service
	const pw = "a long password 1"
	owner, err := svc.Accounts.Signup(ctx, "owner@example.com", pw, "", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	leaver, err := svc.Accounts.Signup(ctx, "leaver@example.com", pw, "", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	shared, err := svc.Workspaces.CreateWorkspace(ctx, owner, "Team")
	if err != nil {
		t.Fatal(err)
	}
	ownerActor, _, _ := svc.Workspaces.Enter(ctx, owner, shared.ID, mcpgate.SourceAPI)
	_, inv, err := svc.Workspaces.Invite(ctx, ownerActor, leaver.Email, mcpgate.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Workspaces.AcceptInvitation(ctx, leaver, inv); err != nil {
		t.Fatal(err)
	}
	leaverActor, _, _ := svc.Workspaces.Enter(ctx, leaver, shared.ID, mcpgate.SourceAPI)
	k, _, err := svc.Keys.CreateKey(ctx, leaverActor, mcpgate.NewKey{Name: "leaver's"})
	if err != nil {
		t.Fatal(err)
	}
	sess, _ := env.DB.CreateSession(ctx, leaver.ID, time.Now().Add(time.Hour))

	// The last owner of a workspace with another member cannot leave.
	err = svc.Accounts.DeleteAccount(ctx, owner, pw, "x")
	if mcpgate.ErrorCode(err) != mcpgate.EConflict || !strings.Contains(err.Error(), "Team") {
		t.Fatalf("DeleteAccount(last owner) err = %v, want conflict naming Team", err)
	}
	if err := svc.Accounts.DeleteAccount(ctx, leaver, "wrong password", "x"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("DeleteAccount(wrong password) err = %v", err)
	}
	if err := svc.Accounts.DeleteAccount(ctx, leaver, pw, "x"); err != nil {
		t.Fatalf("DeleteAccount() err = %v", err)
	}
	if _, err := svc.Accounts.Login(ctx, mcpgate.Credentials{Email: leaver.Email, Password: pw}, "y"); err == nil {
		t.Fatal("deleted account can log in")
	}
	if _, err := env.DB.FindSessionUser(ctx, sess); err == nil {
		t.Fatal("session survived the deletion")
	}
	keys, _ := svc.Keys.Keys(ctx, ownerActor)
	for _, kk := range keys {
		if kk.ID == k.ID {
			t.Fatal("the deleted person's key is still listed")
		}
	}
	if _, _, err := env.DB.FindKeyForAuth(ctx, k.ID); err == nil {
		t.Fatal("the deleted person's key still authenticates")
	}
	members, _ := svc.Workspaces.Members(ctx, ownerActor)
	if len(members) != 1 {
		t.Fatalf("members after deletion = %+v", members)
	}
	var deleted bool
	for _, ev := range env.Audit.Events() {
		if ev.Action == string(mcpgate.ActionAccountDeleted) && ev.WorkspaceID == shared.ID && ev.ActorID == "" {
			deleted = true
		}
	}
	if !deleted {
		t.Fatalf("no account.deleted event in the shared workspace: %+v", env.Audit.Events())
	}
	// Now the owner is alone in Team and may go.
	if err := svc.Accounts.DeleteAccount(ctx, owner, pw, "x"); err != nil {
		t.Fatalf("DeleteAccount(owner, alone) err = %v", err)
	}
	if n, _ := env.DB.CountUsers(ctx); n != 0 {
		t.Fatalf("users left = %d", n)
	}
}

// Audit rows of a deleted person stay in a shared workspace, without the actor.
func TestDeleteAccount_AuditRowsStay(t *testing.T) {
	env := servicetest.New(t, service.Options{PasswordParams: &password.Params{Time: 1, Memory: 8 * 1024, Threads: 1}})
	db := env.DB
	ctx := context.Background()
	owner, err := db.CreateUser(ctx, "o@example.com", "h", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws, _ := env.Service.Workspaces.CreateWorkspace(ctx, owner, "Shared")
	u, err := env.Service.Accounts.Signup(ctx, "gone@example.com", "a long password 1", "", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO members (workspace_id, user_id, role) VALUES ($1, $2, 'member')`, ws.ID, u.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.InsertAudit(ctx, []mcpgate.AuditEvent{{WorkspaceID: ws.ID, ActorID: u.ID, Kind: mcpgate.KindToolCall, Action: "sandbox_list", Outcome: mcpgate.OutcomeOK, CreatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Service.Accounts.DeleteAccount(ctx, u, "a long password 1", "x"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE workspace_id = $1 AND action = 'sandbox_list' AND actor_id IS NULL`, ws.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("audit rows of the deleted person = %d, %v; want 1 kept without actor", n, err)
	}
}
