package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors/e2b"
)

// adminRoutes is the contract: the routes only a workspace owner or admin
// may call. The rule lives in the services (internal/service tests every
// admin method with a member actor); TestMemberRefusedOnAdminRoutes checks
// that each route reaches it.
var adminRoutes = []string{
	"PATCH /api/v1/workspaces/{ws}/members/{user}",
	"GET /api/v1/workspaces/{ws}/invitations",
	"POST /api/v1/workspaces/{ws}/invitations",
	"DELETE /api/v1/workspaces/{ws}/invitations/{id}",
	"PUT /api/v1/workspaces/{ws}/connections/{connector}",
	"DELETE /api/v1/workspaces/{ws}/connections/{connector}",
	"PUT /api/v1/workspaces/{ws}/tools/{name}",
	"PUT /api/v1/workspaces/{ws}/guardrails",
	"GET /api/v1/workspaces/{ws}/notifications",
	"PUT /api/v1/workspaces/{ws}/notifications",
	"GET /api/v1/workspaces/{ws}/notifications/deliveries",
}

// TestMemberRefusedOnAdminRoutes: a plain member calling each admin route
// (with a body that would work for an admin) gets 403 and changes nothing.
func TestMemberRefusedOnAdminRoutes(t *testing.T) {
	s := newStack(t)
	var inv struct{ ID, Token string }
	s.mustJSON(t, s.owner, "POST", "/api/v1/workspaces/"+s.ws+"/invitations", map[string]any{"email": "member@example.com", "role": "member"}, http.StatusCreated, &inv)
	member := s.signup(t, "member@example.com", inv.Token)
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	s.mustJSON(t, member, "GET", "/api/v1/me", nil, http.StatusOK, &me)
	if me.User.ID != member.id {
		t.Fatalf("/me id = %q, want %q from signup", me.User.ID, member.id)
	}
	var ws mcpgate.Workspace
	s.mustJSON(t, member, "GET", "/api/v1/workspaces/"+s.ws, nil, http.StatusOK, &ws)
	if ws.Role != mcpgate.RoleMember {
		t.Fatalf("invited user's role = %q, want member", ws.Role)
	}

	bodies := map[string]any{
		"PATCH":             map[string]any{"role": "admin"},
		"POST invitations":  map[string]any{"email": "x@example.com", "role": "admin"},
		"PUT connections":   map[string]any{"api_key": "e2b_99887766554433221100"},
		"PUT tools":         map[string]any{"enabled": true, "needs_confirmation": false},
		"PUT guardrails":    map[string]any{"max_running": 1, "allowed_templates": []string{"base"}},
		"PUT notifications": map[string]any{"email": false, "webhook_url": ""},
	}
	params := map[string]string{"ws": s.ws, "user": member.id, "id": inv.ID, "connector": "e2b", "name": e2b.ToolKillSandbox}
	for _, rt := range adminRoutes {
		method, pattern, _ := strings.Cut(rt, " ")
		path := pattern
		for k, v := range params {
			path = strings.ReplaceAll(path, "{"+k+"}", v)
		}
		t.Run(rt, func(t *testing.T) {
			var body []byte
			for k, v := range bodies {
				m, suffix, _ := strings.Cut(k, " ")
				if m == method && strings.Contains(pattern, "/"+suffix) {
					body, _ = json.Marshal(v)
				}
			}
			before := rowCounts(t, s.db)
			w := s.serve(member, method, path, "application/json", body)
			if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `"forbidden"`) {
				t.Errorf("member %s %s = %d %s, want 403 forbidden", method, path, w.Code, w.Body)
			}
			if after := rowCounts(t, s.db); !mapsEqual(before, after) {
				t.Errorf("row counts changed: %v -> %v", before, after)
			}
		})
	}
	// The member's own id for the PATCH: a member cannot promote themself.
	var members struct{ Members []mcpgate.Member }
	s.mustJSON(t, s.owner, "GET", "/api/v1/workspaces/"+s.ws+"/members", nil, http.StatusOK, &members)
	for _, m := range members.Members {
		if m.Email == "member@example.com" && m.Role != mcpgate.RoleMember {
			t.Errorf("member's role is now %q", m.Role)
		}
	}
}
