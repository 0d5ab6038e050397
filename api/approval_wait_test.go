package api_test

import (
	"net/http"
	"testing"

	"github.com/mcpgate/mcpgate"
)

// TestApprovalWait_API: PATCH /workspaces/{ws} takes approval_wait_seconds
// from an owner, shows it in GET to every member, refuses a value out of
// range (or not a whole number) with invalid and nothing changed, and
// answers another workspace's person 404.
func TestApprovalWait_API(t *testing.T) {
	s := newStack(t)
	base := "/api/v1/workspaces/" + s.ws
	admin := s.member(t, "admin@example.com", mcpgate.RoleAdmin)
	member := s.member(t, "member@example.com", mcpgate.RoleMember)
	var got mcpgate.Workspace
	s.mustJSON(t, s.owner, "GET", base, nil, http.StatusOK, &got)
	if got.ApprovalWaitSeconds != 0 {
		t.Fatalf("default approval_wait_seconds = %d, want 0", got.ApprovalWaitSeconds)
	}
	s.mustJSON(t, s.owner, "PATCH", base, map[string]any{"approval_wait_seconds": 25}, http.StatusOK, &got)
	if got.ApprovalWaitSeconds != 25 {
		t.Fatalf("PATCH approval_wait_seconds = %+v", got)
	}
	s.mustJSON(t, member, "GET", base, nil, http.StatusOK, &got)
	if got.ApprovalWaitSeconds != 25 {
		t.Fatalf("a member sees approval_wait_seconds = %d, want 25", got.ApprovalWaitSeconds)
	}
	for _, body := range []map[string]any{
		{"approval_wait_seconds": -1},
		{"approval_wait_seconds": 56},
		{"approval_wait_seconds": 56, "approval_four_eyes": true},
	} {
		var e struct {
			Error struct {
				Code    mcpgate.Code `json:"code"`
				Message string       `json:"message"`
			} `json:"error"`
		}
		s.mustJSON(t, s.owner, "PATCH", base, body, http.StatusBadRequest, &e)
		if e.Error.Code != mcpgate.EInvalid || e.Error.Message == "" {
			t.Errorf("PATCH %v = %+v, want invalid with a message", body, e)
		}
	}
	s.mustJSON(t, s.owner, "PATCH", base, map[string]any{"approval_wait_seconds": 2.5}, http.StatusBadRequest, nil)
	s.mustJSON(t, s.owner, "PATCH", base, map[string]any{"approval_wait_seconds": "10"}, http.StatusBadRequest, nil)
	s.mustJSON(t, admin, "PATCH", base, map[string]any{"approval_wait_seconds": 10}, http.StatusForbidden, nil)
	s.mustJSON(t, s.owner, "GET", base, nil, http.StatusOK, &got)
	if got.ApprovalWaitSeconds != 25 || got.ApprovalFourEyes {
		t.Fatalf("after refused changes = %+v, want wait 25 and four eyes off", got)
	}
	other := s.signup(t, "other@example.com", "")
	s.mustJSON(t, other, "PATCH", base, map[string]any{"approval_wait_seconds": 10}, http.StatusNotFound, nil)
}
