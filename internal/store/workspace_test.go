package store_test

import (
	"context"
	"crypto/sha256"
	"slices"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

func tokenHash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// mustInvitation creates an invitation to ws for email, valid for ttl.
func mustInvitation(t *testing.T, db *store.DB, ws, by, email, token string, ttl time.Duration) *mcpgate.Invitation {
	t.Helper()
	inv := &mcpgate.Invitation{WorkspaceID: ws, Email: email, Role: mcpgate.RoleMember, CreatedBy: by,
		ExpiresAt: time.Now().Add(ttl).UTC().Truncate(time.Second)}
	if err := db.CreateInvitation(context.Background(), inv, tokenHash(token)); err != nil {
		t.Fatalf("CreateInvitation() err = %v", err)
	}
	return inv
}

func mustPersonal(t *testing.T, db *store.DB, u *mcpgate.User) string {
	t.Helper()
	// Read straight from members: the migration tests call this on the
	// schema of 00001, which lacks columns WorkspacesOfUser reads.
	var ws string
	if err := db.Pool.QueryRow(context.Background(), `SELECT workspace_id FROM members WHERE user_id = $1`, u.ID).Scan(&ws); err != nil {
		t.Fatalf("personal workspace of %s: %v", u.Email, err)
	}
	return ws
}

// unlisted turns a listing into a lookup's answer, for the isolation table:
// ENotFound when none of list is the other workspace's row (mine), and nil,
// a leak, when one is.
func unlisted[T any](list []T, err error, mine func(T) bool) error {
	if err != nil {
		return err
	}
	if slices.ContainsFunc(list, mine) {
		return nil
	}
	return mcpgate.Errorf(mcpgate.ENotFound, "not listed")
}

// Every store method that takes a workspace id sees only that workspace:
// A's rows, asked for through B's workspace, are not found and stay as they
// were.
func TestWorkspaceIsolation(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	a := mustUser(t, db, "a@example.com")
	b := mustUser(t, db, "b@example.com")
	wsA := mustPersonal(t, db, a)
	wsB := mustPersonal(t, db, b)
	invA := mustInvitation(t, db, wsA, a.ID, "friend@example.com", "inv_a", time.Hour)

	tests := []struct {
		name string
		call func() error
	}{
		{name: "FindMembership", call: func() error { _, err := db.FindMembership(ctx, wsB, a.ID); return err }},
		{name: "FindMember", call: func() error { _, err := db.FindMember(ctx, wsB, a.ID); return err }},
		{name: "UpdateMemberRole", call: func() error { _, err := db.UpdateMemberRole(ctx, wsB, a.ID, mcpgate.RoleMember); return err }},
		{name: "UpdateMemberRole to owner", call: func() error { _, err := db.UpdateMemberRole(ctx, wsB, a.ID, mcpgate.RoleOwner); return err }},
		{name: "RemoveMember", call: func() error { return db.RemoveMember(ctx, wsB, a.ID) }},
		{name: "DeleteInvitation", call: func() error { return db.DeleteInvitation(ctx, wsB, invA.ID) }},
		{name: "ListMembers", call: func() error {
			ms, err := db.ListMembers(ctx, wsB)
			return unlisted(ms, err, func(m mcpgate.Member) bool { return m.UserID == a.ID })
		}},
		{name: "ListInvitations", call: func() error {
			invs, err := db.ListInvitations(ctx, wsB)
			return unlisted(invs, err, func(i mcpgate.Invitation) bool { return i.ID == invA.ID })
		}},
		{name: "FindMembership bad id", call: func() error { _, err := db.FindMembership(ctx, "nope", a.ID); return err }},
		{name: "ListMembers bad id", call: func() error {
			ms, err := db.ListMembers(ctx, "nope")
			if err == nil && len(ms) == 0 {
				return mcpgate.Errorf(mcpgate.ENotFound, "none")
			}
			return err
		}},
		{name: "UpdateMemberRole bad workspace id", call: func() error { _, err := db.UpdateMemberRole(ctx, "nope", a.ID, mcpgate.RoleMember); return err }},
		{name: "RemoveMember bad workspace id", call: func() error { return db.RemoveMember(ctx, "nope", a.ID) }},
		{name: "DeleteInvitation bad workspace id", call: func() error { return db.DeleteInvitation(ctx, "nope", invA.ID) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
				t.Fatalf("%s(B's workspace, A's row) err = %v, want not_found", tt.name, err)
			}
		})
	}

	// A's rows are unchanged.
	m, err := db.FindMember(ctx, wsA, a.ID)
	if err != nil || m.Role != mcpgate.RoleOwner {
		t.Fatalf("FindMember(A) = %+v, %v; want owner", m, err)
	}
	invs, err := db.ListInvitations(ctx, wsA)
	if err != nil || len(invs) != 1 || invs[0].ID != invA.ID {
		t.Fatalf("ListInvitations(A) = %+v, %v; want the invitation", invs, err)
	}
	// Creating an invitation in B's workspace does not touch A's.
	mustInvitation(t, db, wsB, b.ID, "friend@example.com", "inv_b", time.Hour)
	if invs, _ := db.ListInvitations(ctx, wsA); len(invs) != 1 {
		t.Fatalf("ListInvitations(A) after B invited = %d, want 1", len(invs))
	}
	if ms, _ := db.ListMembers(ctx, wsB); len(ms) != 1 || ms[0].UserID != b.ID {
		t.Fatalf("ListMembers(B) = %+v, want only B", ms)
	}
}

func TestAcceptInvitation(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	owner := mustUser(t, db, "owner@example.com")
	ws := mustPersonal(t, db, owner)
	friend := mustUser(t, db, "friend@example.com")
	stranger := mustUser(t, db, "stranger@example.com")

	mustInvitation(t, db, ws, owner.ID, "friend@example.com", "inv_ok", time.Hour)
	mustInvitation(t, db, ws, owner.ID, "friend@example.com", "inv_expired", -time.Second)
	withdrawn := mustInvitation(t, db, ws, owner.ID, "friend@example.com", "inv_withdrawn", time.Hour)
	if err := db.DeleteInvitation(ctx, ws, withdrawn.ID); err != nil {
		t.Fatalf("DeleteInvitation() err = %v", err)
	}

	tests := []struct {
		name     string
		token    string
		user     *mcpgate.User
		wantCode mcpgate.Code
	}{
		{name: "another email", token: "inv_ok", user: stranger, wantCode: mcpgate.EForbidden},
		{name: "expired", token: "inv_expired", user: friend, wantCode: mcpgate.ENotFound},
		{name: "withdrawn", token: "inv_withdrawn", user: friend, wantCode: mcpgate.ENotFound},
		{name: "unknown", token: "inv_unknown", user: friend, wantCode: mcpgate.ENotFound},
		{name: "ok", token: "inv_ok", user: friend},
		{name: "reused", token: "inv_ok", user: friend, wantCode: mcpgate.ENotFound},
		{name: "reused by another", token: "inv_ok", user: stranger, wantCode: mcpgate.ENotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := db.AcceptInvitation(ctx, tokenHash(tt.token), tt.user.ID, tt.user.Email)
			if mcpgate.ErrorCode(err) != tt.wantCode {
				t.Fatalf("AcceptInvitation() err = %v, want code %q", err, tt.wantCode)
			}
			if err == nil && (w.ID != ws || w.Role != mcpgate.RoleMember) {
				t.Fatalf("AcceptInvitation() = %+v, want workspace %s with role member", w, ws)
			}
		})
	}
	if _, err := db.FindMembership(ctx, ws, stranger.ID); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("stranger became a member: err = %v", err)
	}
	if m, err := db.FindMember(ctx, ws, friend.ID); err != nil || m.Role != mcpgate.RoleMember {
		t.Fatalf("FindMember(friend) = %+v, %v; want member", m, err)
	}
	if _, err := db.FindOpenInvitation(ctx, tokenHash("inv_ok")); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("FindOpenInvitation(spent) err = %v, want not_found", err)
	}
}

func TestSessions(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	u := mustUser(t, db, "a@example.com")
	live, err := db.CreateSession(ctx, u.ID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatalf("CreateSession() err = %v", err)
	}
	expired, err := db.CreateSession(ctx, u.ID, time.Now().Add(-time.Second))
	if err != nil {
		t.Fatalf("CreateSession() err = %v", err)
	}
	revoked, err := db.CreateSession(ctx, u.ID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatalf("CreateSession() err = %v", err)
	}
	if err := db.RevokeSession(ctx, revoked); err != nil {
		t.Fatalf("RevokeSession() err = %v", err)
	}
	tests := []struct {
		name     string
		id       string
		wantCode mcpgate.Code
	}{
		{name: "live", id: live},
		{name: "expired", id: expired, wantCode: mcpgate.EUnauthorized},
		{name: "revoked", id: revoked, wantCode: mcpgate.EUnauthorized},
		{name: "unknown", id: "7f6c2a51-33a4-4c5e-9a53-8d3b8e0c1f00", wantCode: mcpgate.EUnauthorized},
		{name: "not a uuid", id: "x", wantCode: mcpgate.EUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.FindSessionUser(ctx, tt.id)
			if mcpgate.ErrorCode(err) != tt.wantCode {
				t.Fatalf("FindSessionUser() err = %v, want code %q", err, tt.wantCode)
			}
			if err == nil && got.ID != u.ID {
				t.Fatalf("FindSessionUser() = %s, want %s", got.ID, u.ID)
			}
		})
	}
	// A changed password ends every session.
	if err := db.SetPassword(ctx, u.ID, "new hash"); err != nil {
		t.Fatalf("SetPassword() err = %v", err)
	}
	if _, err := db.FindSessionUser(ctx, live); mcpgate.ErrorCode(err) != mcpgate.EUnauthorized {
		t.Fatalf("FindSessionUser() after SetPassword err = %v, want unauthorized", err)
	}
}

func TestLoginFailures(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	const period = time.Minute
	for range 3 {
		if err := db.RecordLoginFailure(ctx, period, "email:a@example.com", "addr:127.0.0.1"); err != nil {
			t.Fatalf("RecordLoginFailure() err = %v", err)
		}
	}
	if n, start, err := db.LoginFailures(ctx, "email:a@example.com", period); err != nil || n != 3 || time.Since(start) > period {
		t.Fatalf("LoginFailures() = %d, %v, %v; want 3 in the current window", n, start, err)
	}
	if err := db.ClearLoginFailures(ctx, "email:a@example.com"); err != nil {
		t.Fatalf("ClearLoginFailures() err = %v", err)
	}
	if n, _, err := db.LoginFailures(ctx, "email:a@example.com", period); err != nil || n != 0 {
		t.Fatalf("LoginFailures() after clear = %d, %v; want 0", n, err)
	}
	if n, _, _ := db.LoginFailures(ctx, "addr:127.0.0.1", period); n != 3 {
		t.Fatalf("LoginFailures(addr) = %d, want 3 (clearing the email leaves the address)", n)
	}
	// An old window no longer counts, and the next failure starts a new one.
	if _, err := db.Pool.Exec(ctx, `UPDATE login_failures SET window_start = now() - interval '2 minutes'`); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := db.LoginFailures(ctx, "addr:127.0.0.1", period); n != 0 {
		t.Fatalf("LoginFailures(addr) of an old window = %d, want 0", n)
	}
	if err := db.RecordLoginFailure(ctx, period, "addr:127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := db.LoginFailures(ctx, "addr:127.0.0.1", period); n != 1 {
		t.Fatalf("LoginFailures(addr) after a new failure = %d, want 1", n)
	}
}
