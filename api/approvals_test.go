package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/connectors/e2b"
)

// TestToolApproval_API: PUT tools/{name} takes approval, still takes the
// deprecated needs_confirmation as its alias (approval wins when both are
// sent), answers with approval alone, and refuses an unknown mode.
func TestToolApproval_API(t *testing.T) {
	s := newStack(t)
	path := "/api/v1/workspaces/" + s.ws + "/tools/" + e2b.ToolCreateSandbox
	var info mcpgate.ToolInfo
	s.mustJSON(t, s.owner, "PUT", path, map[string]any{"approval": "human"}, http.StatusOK, &info)
	if info.Approval != mcpgate.ApprovalHuman {
		t.Errorf("approval human = %+v", info)
	}
	s.mustJSON(t, s.owner, "PUT", path, map[string]any{"needs_confirmation": false}, http.StatusOK, &info)
	if info.Approval != mcpgate.ApprovalNone {
		t.Errorf("needs_confirmation false = %+v, want none", info)
	}
	s.mustJSON(t, s.owner, "PUT", path, map[string]any{"needs_confirmation": true}, http.StatusOK, &info)
	if info.Approval != mcpgate.ApprovalModel {
		t.Errorf("needs_confirmation true = %+v, want model", info)
	}
	s.mustJSON(t, s.owner, "PUT", path, map[string]any{"needs_confirmation": false, "approval": "human"}, http.StatusOK, &info)
	if info.Approval != mcpgate.ApprovalHuman {
		t.Errorf("approval human with needs_confirmation false = %+v, want human", info)
	}
	for _, p := range []string{path, "/api/v1/workspaces/" + s.ws + "/tools"} {
		if w := s.serve(s.owner, "GET", p, "", nil); strings.Contains(w.Body.String(), "needs_confirmation") {
			t.Errorf("GET %s answers the legacy needs_confirmation: %s", p, w.Body)
		}
	}
	w := s.serve(s.owner, "PUT", path, "application/json", []byte(`{"approval":"sometimes"}`))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "none, model or human") {
		t.Errorf("unknown approval = %d %s, want 400", w.Code, w.Body)
	}
	var list struct {
		Tools []mcpgate.ToolInfo `json:"tools"`
	}
	s.mustJSON(t, s.owner, "GET", "/api/v1/workspaces/"+s.ws+"/tools", nil, http.StatusOK, &list)
	for _, tl := range list.Tools {
		if tl.Name == e2b.ToolKillSandbox && tl.Approval != mcpgate.ApprovalHuman {
			t.Errorf("kill's default approval = %q, want human", tl.Approval)
		}
	}
}

// TestApprovals_API: the listing is an empty list, not null; an unknown or
// malformed id is 404; a bad state is 400; guardrails round-trip.
func TestApprovals_API(t *testing.T) {
	s := newStack(t)
	base := "/api/v1/workspaces/" + s.ws
	for state, want := range map[string]int{"pending": http.StatusOK, "": http.StatusOK, "later": http.StatusBadRequest} {
		r := httptest.NewRequest("GET", "http://localhost:8080"+base+"/approvals?state="+state, nil)
		r.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: s.owner.session})
		w := httptest.NewRecorder()
		s.h.ServeHTTP(w, r)
		if w.Code != want || (want == http.StatusOK && strings.TrimSpace(w.Body.String()) != `{"approvals":[]}`) {
			t.Errorf("list state=%q = %d %s, want %d", state, w.Code, w.Body, want)
		}
	}
	for _, id := range []string{"7f6c2a51-33a4-4c5e-9a53-8d3b8e0c1f00", "not-a-uuid"} {
		s.mustJSON(t, s.owner, "GET", base+"/approvals/"+id, nil, http.StatusNotFound, nil)
		s.mustJSON(t, s.owner, "POST", base+"/approvals/"+id+"/approve", nil, http.StatusNotFound, nil)
		s.mustJSON(t, s.owner, "POST", base+"/approvals/"+id+"/deny", nil, http.StatusNotFound, nil)
	}
	var g mcpgate.Guardrails
	s.mustJSON(t, s.owner, "PUT", base+"/guardrails", map[string]any{"max_timeout_seconds": 900, "allowed_templates": []string{"base", " base"}},
		http.StatusOK, &g)
	if g.MaxTimeoutSeconds != 900 || len(g.AllowedTemplates) != 1 {
		t.Errorf("PUT guardrails = %+v", g)
	}
	s.mustJSON(t, s.owner, "GET", base+"/guardrails", nil, http.StatusOK, &g)
	if g.MaxTimeoutSeconds != 900 || g.MaxRunning != 0 {
		t.Errorf("GET guardrails = %+v", g)
	}
	s.mustJSON(t, s.owner, "PUT", base+"/guardrails", map[string]any{"max_timeout": 1}, http.StatusBadRequest, nil)
}
