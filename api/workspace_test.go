package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
)

// team is a workspace with an owner, an admin and a member, each invited and
// accepted over the API.
type team struct {
	ws                   string
	owner, admin, member *client
	ownerID, adminID     string
	memberID             string
}

func mustTeam(t *testing.T, ts *testServer) *team {
	t.Helper()
	tm := &team{owner: ts.newClient(t), admin: ts.newClient(t), member: ts.newClient(t)}
	tm.ownerID = tm.owner.mustSignup("owner@example.com").User.ID
	tm.adminID = tm.admin.mustSignup("admin@example.com").User.ID
	tm.memberID = tm.member.mustSignup("member@example.com").User.ID
	tm.ws = tm.owner.mustWorkspace("Team")
	tm.admin.mustAccept(tm.owner.mustInvite(tm.ws, "admin@example.com", mcpgate.RoleAdmin).Token)
	tm.member.mustAccept(tm.owner.mustInvite(tm.ws, "member@example.com", mcpgate.RoleMember).Token)
	return tm
}

// roles returns the workspace's members as email -> role.
func (c *client) roles(ws string) map[string]mcpgate.Role {
	c.t.Helper()
	var body struct {
		Members []mcpgate.Member `json:"members"`
	}
	c.do("GET", "/api/v1/workspaces/"+ws+"/members", nil).wantStatus(c.t, http.StatusOK).decode(c.t, &body)
	m := map[string]mcpgate.Role{}
	for _, mb := range body.Members {
		m[mb.Email] = mb.Role
	}
	return m
}

func TestWorkspace_CreateAndList(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	c := ts.signedUp(t, "a@example.com")
	ws := c.mustWorkspace("  Team A ")
	var list struct {
		Workspaces []mcpgate.Workspace `json:"workspaces"`
	}
	c.do("GET", "/api/v1/workspaces", nil).wantStatus(t, http.StatusOK).decode(t, &list)
	if len(list.Workspaces) != 2 || list.Workspaces[1].ID != ws || list.Workspaces[1].Name != "Team A" {
		t.Fatalf("GET /workspaces = %+v, want the personal one and Team A", list.Workspaces)
	}
	var got mcpgate.Workspace
	c.do("GET", "/api/v1/workspaces/"+ws+"/", nil).wantStatus(t, http.StatusOK).decode(t, &got)
	if got.ID != ws || got.Role != mcpgate.RoleOwner {
		t.Errorf("GET /workspaces/%s = %+v, want role owner", ws, got)
	}
	for _, name := range []string{"", "   ", strings.Repeat("n", 101), "tab\there"} {
		c.do("POST", "/api/v1/workspaces", map[string]string{"name": name}).wantStatus(t, http.StatusBadRequest)
	}
}

func TestMembers_Roles(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	tm := mustTeam(t, ts)
	base := "/api/v1/workspaces/" + tm.ws
	want := map[string]mcpgate.Role{"owner@example.com": "owner", "admin@example.com": "admin", "member@example.com": "member"}
	if diff := cmp.Diff(want, tm.member.roles(tm.ws)); diff != "" {
		t.Fatalf("members after the invitations (-want +got):\n%s", diff)
	}

	tests := []struct {
		name       string
		c          *client
		method     string
		path       string
		body       any
		wantStatus int
	}{
		{name: "member cannot invite", c: tm.member, method: "POST", path: "/invitations",
			body: map[string]string{"email": "x@example.com", "role": "member"}, wantStatus: 403},
		{name: "member cannot list invitations", c: tm.member, method: "GET", path: "/invitations", wantStatus: 403},
		{name: "member cannot change a role", c: tm.member, method: "PATCH", path: "/members/" + tm.adminID,
			body: map[string]string{"role": "member"}, wantStatus: 403},
		{name: "member cannot promote self", c: tm.member, method: "PATCH", path: "/members/" + tm.memberID,
			body: map[string]string{"role": "admin"}, wantStatus: 403},
		{name: "member cannot remove another", c: tm.member, method: "DELETE", path: "/members/" + tm.adminID, wantStatus: 403},
		{name: "member cannot remove the owner", c: tm.member, method: "DELETE", path: "/members/" + tm.ownerID, wantStatus: 403},
		{name: "admin cannot promote to owner", c: tm.admin, method: "PATCH", path: "/members/" + tm.memberID,
			body: map[string]string{"role": "owner"}, wantStatus: 403},
		{name: "admin cannot promote self to owner", c: tm.admin, method: "PATCH", path: "/members/" + tm.adminID,
			body: map[string]string{"role": "owner"}, wantStatus: 403},
		{name: "admin cannot demote the owner", c: tm.admin, method: "PATCH", path: "/members/" + tm.ownerID,
			body: map[string]string{"role": "member"}, wantStatus: 403},
		{name: "admin cannot remove the owner", c: tm.admin, method: "DELETE", path: "/members/" + tm.ownerID, wantStatus: 403},
		{name: "admin cannot invite an owner", c: tm.admin, method: "POST", path: "/invitations",
			body: map[string]string{"email": "x@example.com", "role": "owner"}, wantStatus: 400},
		{name: "unknown role", c: tm.owner, method: "PATCH", path: "/members/" + tm.memberID,
			body: map[string]string{"role": "root"}, wantStatus: 400},
		{name: "last owner cannot be demoted", c: tm.owner, method: "PATCH", path: "/members/" + tm.ownerID,
			body: map[string]string{"role": "admin"}, wantStatus: 409},
		{name: "last owner cannot leave", c: tm.owner, method: "DELETE", path: "/members/" + tm.ownerID, wantStatus: 409},
		{name: "unknown member", c: tm.owner, method: "PATCH", path: "/members/7f6c2a51-33a4-4c5e-9a53-8d3b8e0c1f00",
			body: map[string]string{"role": "admin"}, wantStatus: 404},
		{name: "member id not a uuid", c: tm.owner, method: "DELETE", path: "/members/nobody", wantStatus: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.t = t
			r := tt.c.do(tt.method, base+tt.path, tt.body).wantStatus(t, tt.wantStatus)
			r.errorCode(t)
		})
	}
	// Nothing above changed anything.
	for _, c := range []*client{tm.owner, tm.admin, tm.member} {
		c.t = t
	}
	if diff := cmp.Diff(want, tm.owner.roles(tm.ws)); diff != "" {
		t.Fatalf("members after the refused changes (-want +got):\n%s", diff)
	}

	// An admin manages members and admins.
	tm.admin.do("PATCH", base+"/members/"+tm.memberID, map[string]string{"role": "admin"}).wantStatus(t, http.StatusOK)
	tm.admin.do("PATCH", base+"/members/"+tm.memberID, map[string]string{"role": "member"}).wantStatus(t, http.StatusOK)
	// A member can leave.
	tm.member.do("DELETE", base+"/members/"+tm.memberID, nil).wantStatus(t, http.StatusNoContent)
	tm.member.do("GET", base+"/members", nil).wantStatus(t, http.StatusNotFound)
	if got := roleIn(tm.member.mustMe(), tm.ws); got != "" {
		t.Errorf("after leaving, /me still lists the workspace with role %q", got)
	}
	// With a second owner, the first may step down.
	tm.owner.do("PATCH", base+"/members/"+tm.adminID, map[string]string{"role": "owner"}).wantStatus(t, http.StatusOK)
	tm.owner.do("PATCH", base+"/members/"+tm.ownerID, map[string]string{"role": "member"}).wantStatus(t, http.StatusOK)
	// Now the former admin is the last owner.
	tm.admin.do("DELETE", base+"/members/"+tm.adminID, nil).wantStatus(t, http.StatusConflict)
	tm.owner.do("DELETE", base+"/members/"+tm.adminID, nil).wantStatus(t, http.StatusForbidden)
	want = map[string]mcpgate.Role{"owner@example.com": "member", "admin@example.com": "owner"}
	if diff := cmp.Diff(want, tm.admin.roles(tm.ws)); diff != "" {
		t.Fatalf("members at the end (-want +got):\n%s", diff)
	}
}

func TestInvitations(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	owner := ts.signedUp(t, "owner@example.com")
	ws := owner.mustWorkspace("Team")
	base := "/api/v1/workspaces/" + ws

	invited := ts.signedUp(t, "invited@example.com")
	other := ts.newClient(t)
	other.mustSignup("other@example.com")

	t.Run("accept adds the member with the role", func(t *testing.T) {
		owner.t, invited.t = t, t
		inv := owner.mustInvite(ws, "Invited@Example.com", mcpgate.RoleAdmin)
		if inv.Email != "invited@example.com" || inv.Role != mcpgate.RoleAdmin || !strings.HasSuffix(inv.AcceptURL, "/invite/"+inv.Token) {
			t.Fatalf("invitation = %+v", inv)
		}
		var list struct {
			Invitations []map[string]any `json:"invitations"`
		}
		owner.do("GET", base+"/invitations", nil).wantStatus(t, http.StatusOK).decode(t, &list)
		if len(list.Invitations) != 1 || list.Invitations[0]["id"] != inv.ID {
			t.Fatalf("GET invitations = %v, want the one open invitation", list.Invitations)
		}
		if _, ok := list.Invitations[0]["token"]; ok {
			t.Fatalf("GET invitations shows the token: %v", list.Invitations[0])
		}
		// Sent to someone else: refused, and the invitation stays usable.
		other.t = t
		other.do("POST", "/api/v1/invitations/"+inv.Token+"/accept", nil).wantStatus(t, http.StatusForbidden)
		invited.mustAccept(inv.Token)
		if got := roleIn(invited.mustMe(), ws); got != mcpgate.RoleAdmin {
			t.Fatalf("role after accepting = %q, want admin", got)
		}
		// Single use: the same token again, by anyone, is refused.
		for _, c := range []*client{invited, other} {
			r := c.do("POST", "/api/v1/invitations/"+inv.Token+"/accept", nil).wantStatus(t, http.StatusNotFound)
			if code := r.errorCode(t); code != mcpgate.ENotFound {
				t.Errorf("reuse code = %q, want %q", code, mcpgate.ENotFound)
			}
		}
		owner.do("GET", base+"/invitations", nil).wantStatus(t, http.StatusOK).decode(t, &list)
		if len(list.Invitations) != 0 {
			t.Errorf("a spent invitation is still listed: %v", list.Invitations)
		}
	})

	t.Run("expired", func(t *testing.T) {
		owner.t, other.t = t, t
		inv := owner.mustInvite(ws, "other@example.com", mcpgate.RoleMember)
		if _, err := ts.db.Pool.Exec(context.Background(),
			`UPDATE invitations SET expires_at = now() - interval '1 second' WHERE id = $1`, inv.ID); err != nil {
			t.Fatalf("expire invitation: %v", err)
		}
		other.do("POST", "/api/v1/invitations/"+inv.Token+"/accept", nil).wantStatus(t, http.StatusNotFound)
		if got := roleIn(other.mustMe(), ws); got != "" {
			t.Fatalf("an expired invitation made other a %s", got)
		}
		// Nor can it be used to sign up.
		ts.newClient(t).do("POST", "/api/v1/auth/signup",
			map[string]string{"email": "other@example.com", "password": testPassword, "invitation": inv.Token}).
			wantStatus(t, http.StatusNotFound)
	})

	t.Run("withdrawn", func(t *testing.T) {
		owner.t, other.t = t, t
		inv := owner.mustInvite(ws, "other@example.com", mcpgate.RoleMember)
		owner.do("DELETE", base+"/invitations/"+inv.ID, nil).wantStatus(t, http.StatusNoContent)
		owner.do("DELETE", base+"/invitations/"+inv.ID, nil).wantStatus(t, http.StatusNotFound)
		other.do("POST", "/api/v1/invitations/"+inv.Token+"/accept", nil).wantStatus(t, http.StatusNotFound)
	})

	t.Run("already a member", func(t *testing.T) {
		owner.t, invited.t = t, t
		inv := owner.mustInvite(ws, "invited@example.com", mcpgate.RoleMember)
		invited.do("POST", "/api/v1/invitations/"+inv.Token+"/accept", nil).wantStatus(t, http.StatusConflict)
		if got := roleIn(invited.mustMe(), ws); got != mcpgate.RoleAdmin {
			t.Fatalf("role after a second invitation = %q, want admin unchanged", got)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		owner.t = t
		owner.do("POST", base+"/invitations", map[string]string{"email": "nope"}).wantStatus(t, http.StatusBadRequest)
		owner.do("POST", base+"/invitations", map[string]string{"email": "x@example.com", "role": "owner"}).wantStatus(t, http.StatusBadRequest)
		owner.do("POST", "/api/v1/invitations/inv_unknown/accept", nil).wantStatus(t, http.StatusNotFound)
	})
}

// Another workspace answers 404 on every route under /workspaces/{ws}, exactly
// as one that does not exist, and nothing in it changes.
func TestWorkspace_OtherWorkspaceIsNotFound(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	a := ts.newClient(t)
	aMe := a.mustSignup("a@example.com")
	wsA := aMe.Workspaces[0].ID
	inv := a.mustInvite(wsA, "friend@example.com", mcpgate.RoleMember)
	b := ts.signedUp(t, "b@example.com")

	var routes []route
	for _, r := range mustRoutes(t, ts.handler) {
		if strings.Contains(r.pattern, "{ws}") {
			routes = append(routes, r)
		}
	}
	if len(routes) < 6 {
		t.Fatalf("chi.Walk found %d routes with {ws}: %v", len(routes), routes)
	}
	noRoute := b.do("GET", "/api/v1/no-such-route", nil)
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.pattern, func(t *testing.T) {
			b.t = t
			params := map[string]string{"user": aMe.User.ID, "id": inv.ID, "token": inv.Token, "name": "sandbox_create", "key": "k"}
			params["ws"] = wsA
			got := b.do(rt.method, fillPattern(rt.pattern, params), `{"role":"member","email":"b@example.com","name":"x"}`)
			params["ws"] = "7f6c2a51-33a4-4c5e-9a53-8d3b8e0c1f00"
			missing := b.do(rt.method, fillPattern(rt.pattern, params), `{"role":"member","email":"b@example.com","name":"x"}`)
			got.wantStatus(t, http.StatusNotFound)
			if got.message(t) == noRoute.message(t) {
				t.Fatalf("%s answered as an unknown route; the pattern was not filled in right", got.req)
			}
			if diff := cmp.Diff(string(missing.Body), string(got.Body)); diff != "" {
				t.Errorf("other workspace vs missing workspace body (-missing +other):\n%s", diff)
			}
		})
	}
	b.t = t
	// A's workspace is untouched.
	if diff := cmp.Diff(map[string]mcpgate.Role{"a@example.com": "owner"}, a.roles(wsA)); diff != "" {
		t.Errorf("A's members after B's requests (-want +got):\n%s", diff)
	}
	var list struct {
		Invitations []mcpgate.Invitation `json:"invitations"`
	}
	a.do("GET", "/api/v1/workspaces/"+wsA+"/invitations", nil).wantStatus(t, http.StatusOK).decode(t, &list)
	if len(list.Invitations) != 1 {
		t.Errorf("A's invitations after B's requests = %+v, want the one", list.Invitations)
	}
	b.do("GET", "/api/v1/workspaces/not-a-uuid/members", nil).wantStatus(t, http.StatusNotFound)
}
