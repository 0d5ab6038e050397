package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors/e2b"
)

// enrol turns two-factor sign-in on for u through the API, on the real
// clock (the stack's services have no other).
func (s *stack) enrol(t *testing.T, u stackUser) {
	t.Helper()
	var en struct{ Secret string }
	s.mustJSON(t, u, "POST", "/api/v1/me/totp", map[string]string{"current_password": "correct horse battery staple"}, http.StatusCreated, &en)
	code, err := totp.GenerateCode(en.Secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.mustJSON(t, u, "POST", "/api/v1/me/totp/confirm", map[string]string{"code": code}, http.StatusOK, nil)
}

// member invites email into the stack's workspace with role and signs them
// up with the invitation.
func (s *stack) member(t *testing.T, email string, role mcpgate.Role) stackUser {
	t.Helper()
	var inv struct{ Token string }
	s.mustJSON(t, s.owner, "POST", "/api/v1/workspaces/"+s.ws+"/invitations", map[string]any{"email": email, "role": role},
		http.StatusCreated, &inv)
	return s.signup(t, email, inv.Token)
}

// errorCode is the code of an error answer.
func errorCode(t *testing.T, body []byte) mcpgate.Code {
	t.Helper()
	var e struct {
		Error struct{ Code mcpgate.Code } `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return e.Error.Code
}

// TestDecisionRules_API is the reviewer's reproduction: with
// "require two-factor" on, an admin without it killed a sandbox with one
// confirmed dashboard call and demoted themselves to member (200 both).
// Then the four-eyes setting: PATCH, shown, owners only, enforced.
func TestDecisionRules_API(t *testing.T) {
	s := newStack(t)
	base := "/api/v1/workspaces/" + s.ws
	admin := s.member(t, "admin@example.com", mcpgate.RoleAdmin)
	member := s.member(t, "member@example.com", mcpgate.RoleMember)
	s.mustJSON(t, s.owner, "PUT", base+"/tools/"+e2b.ToolKillSandbox, map[string]any{"enabled": true}, http.StatusOK, nil)
	var sb struct {
		SandboxID string `json:"sandbox_id"`
	}
	s.mustJSON(t, s.owner, "POST", base+"/tools/"+e2b.ToolCreateSandbox+"/call", map[string]any{"arguments": map[string]any{}},
		http.StatusOK, &sb)
	if sb.SandboxID == "" {
		t.Fatal("no sandbox created")
	}
	s.enrol(t, s.owner)
	s.mustJSON(t, s.owner, "PATCH", base, map[string]bool{"require_two_factor": true}, http.StatusOK, nil)

	kill := func(u stackUser) *httptestResponse {
		b, _ := json.Marshal(map[string]any{"arguments": map[string]string{"sandbox_id": sb.SandboxID}, "confirmed": true})
		w := s.serve(u, "POST", base+"/tools/"+e2b.ToolKillSandbox+"/call", "application/json", b)
		return &httptestResponse{code: w.Code, body: w.Body.Bytes()}
	}
	for name, u := range map[string]stackUser{"admin": admin, "member": member} {
		if r := kill(u); r.code != http.StatusForbidden || errorCode(t, r.body) != mcpgate.ETOTPEnrolment {
			t.Fatalf("%s without TOTP killing from the dashboard = %d %s, want 403 totp_enrolment_required", name, r.code, r.body)
		}
	}
	b, _ := json.Marshal(map[string]string{"role": "member"})
	if w := s.serve(admin, "PATCH", base+"/members/"+admin.id, "application/json", b); w.Code != http.StatusForbidden ||
		errorCode(t, w.Body.Bytes()) != mcpgate.ETOTPEnrolment {
		t.Fatalf("admin without TOTP demoting themselves = %d %s, want 403 totp_enrolment_required", w.Code, w.Body)
	}
	var members struct {
		Members []mcpgate.Member `json:"members"`
	}
	s.mustJSON(t, s.owner, "GET", base+"/members", nil, http.StatusOK, &members)
	for _, m := range members.Members {
		if m.UserID == admin.id && m.Role != mcpgate.RoleAdmin {
			t.Fatalf("the refused demotion changed the role to %q", m.Role)
		}
	}
	var got mcpgate.Workspace
	s.mustJSON(t, s.owner, "GET", "/api/v1/workspaces/"+s.ws, nil, http.StatusOK, &got)
	if got.ApprovalFourEyes {
		t.Fatal("four eyes is on by default")
	}

	// Four eyes: only an owner sets it; every member sees it; the owner's
	// own confirmed call is then refused (they would approve themselves).
	on := map[string]bool{"approval_four_eyes": true}
	s.mustJSON(t, admin, "PATCH", base, on, http.StatusForbidden, nil)
	s.mustJSON(t, s.owner, "PATCH", base, on, http.StatusOK, &got)
	if !got.ApprovalFourEyes || !got.RequireTwoFactor {
		t.Fatalf("PATCH approval_four_eyes = %+v", got)
	}
	s.mustJSON(t, member, "GET", base, nil, http.StatusOK, &got)
	if !got.ApprovalFourEyes {
		t.Fatal("GET /workspaces/{ws} does not show four eyes to a member")
	}
	if r := kill(s.owner); r.code != http.StatusForbidden || errorCode(t, r.body) != mcpgate.EForbidden {
		t.Fatalf("owner killing from the dashboard under four eyes = %d %s, want 403 forbidden", r.code, r.body)
	}
	s.mustJSON(t, s.owner, "PATCH", base, map[string]any{"approval_four_eyes": "yes"}, http.StatusBadRequest, nil)
	s.mustJSON(t, s.owner, "PATCH", base, map[string]bool{"approval_four_eyes": false}, http.StatusOK, &got)
	if r := kill(s.owner); r.code != http.StatusOK {
		t.Fatalf("enrolled owner killing from the dashboard = %d %s, want 200", r.code, r.body)
	}
	// Another workspace answers 404 to the setting.
	other := s.signup(t, "other@example.com", "")
	s.mustJSON(t, other, "PATCH", base, on, http.StatusNotFound, nil)
}

type httptestResponse struct {
	code int
	body []byte
}
