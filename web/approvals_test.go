package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
)

// The fake's approval and guardrail services: one request "ap1" by u1,
// another "ap2" the viewer may not see.

func (f *fakeData) approvalsOrDefault() []mcpgate.ApprovalRequest {
	if f.approvals == nil {
		f.approvals = []mcpgate.ApprovalRequest{{ID: "ap1", WorkspaceID: "ws1", KeyID: "k1", RequestedBy: "u1",
			RequesterEmail: "a@example.com", Tool: "e2b_kill_sandbox", ToolTitle: "Kill a sandbox",
			Arguments: map[string]any{"sandbox_id": "sbx1"}, Summary: "Kill sandbox sbx1 for good.", State: mcpgate.ApprovalPending,
			CreatedAt: testNow.Add(-time.Minute), ExpiresAt: testNow.Add(9 * time.Minute), URL: "https://gw.example.com/app/w/ws1/approvals/ap1"}}
	}
	return f.approvals
}

func (f *fakeData) Approvals(context.Context, *mcpgate.Actor, mcpgate.ApprovalState) ([]mcpgate.ApprovalRequest, error) {
	return f.approvalsOrDefault(), nil
}

func (f *fakeData) Approval(_ context.Context, _ *mcpgate.Actor, id string) (*mcpgate.ApprovalRequest, error) {
	if id == "ap2" {
		return nil, mcpgate.Errorf(mcpgate.EForbidden, "not yours")
	}
	for _, ap := range f.approvalsOrDefault() {
		if ap.ID == id {
			return &ap, nil
		}
	}
	return nil, mcpgate.Errorf(mcpgate.ENotFound, "no such approval")
}

func (f *fakeData) Approve(context.Context, *mcpgate.Actor, string) (*mcpgate.ApprovalRequest, error) {
	panic("the pages never decide")
}

func (f *fakeData) Deny(context.Context, *mcpgate.Actor, string) (*mcpgate.ApprovalRequest, error) {
	panic("the pages never decide")
}

func (f *fakeData) PendingApprovals(context.Context, *mcpgate.Actor) (int, error) {
	n := 0
	for _, ap := range f.approvalsOrDefault() {
		if ap.State == mcpgate.ApprovalPending {
			n++
		}
	}
	return n, nil
}

func (f *fakeData) Guardrails(context.Context, *mcpgate.Actor) (*mcpgate.Guardrails, error) {
	g := f.guardrails
	return &g, nil
}

func (f *fakeData) SetGuardrails(context.Context, *mcpgate.Actor, mcpgate.Guardrails) (*mcpgate.Guardrails, error) {
	panic("the pages never write")
}

func TestApprovalPages(t *testing.T) {
	f := newFake(mcpgate.RoleMember)
	f.approvalsOrDefault()
	f.approvals[0].Summary = "Kill sandbox sbx1 " + evil
	h := mustHandler(t, f)

	res, body := get(t, h, "/app/w/ws1/approvals/ap1", testUser)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("approval page = %d", res.StatusCode)
	}
	for _, want := range []string{`data-api-path="/api/v1/workspaces/ws1/approvals/ap1/approve"`,
		`data-api-path="/api/v1/workspaces/ws1/approvals/ap1/deny"`, `id="pending-count"`, "Kill sandbox sbx1 &lt;script&gt;",
		"sbx1", "a@example.com"} {
		if !strings.Contains(body, want) {
			t.Errorf("approval page lacks %q", want)
		}
	}
	if strings.Contains(body, evil) {
		t.Error("the summary is not escaped")
	}
	res, body = get(t, h, "/app/w/ws1/approvals", testUser)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `href="/app/w/ws1/approvals/ap1"`) {
		t.Errorf("approvals list = %d, want a link to ap1", res.StatusCode)
	}
	if res, _ := get(t, h, "/app/w/ws1/approvals/ap2", testUser); res.StatusCode != http.StatusForbidden {
		t.Errorf("someone else's approval = %d, want 403", res.StatusCode)
	}
	if res, body := get(t, h, "/app/w/ws1/approvals/nope", testUser); res.StatusCode != http.StatusNotFound || strings.Contains(body, "Acme") {
		t.Errorf("unknown approval = %d, want a 404 without the workspace", res.StatusCode)
	}
	if res, _ := get(t, h, "/app/w/other/approvals/ap1", testUser); res.StatusCode != http.StatusNotFound {
		t.Errorf("approval in another workspace = %d, want 404", res.StatusCode)
	}
	// Decided: no buttons.
	f.approvals[0].State = mcpgate.ApprovalDenied
	_, body = get(t, h, "/app/w/ws1/approvals/ap1", testUser)
	if strings.Contains(body, "approve-button") || strings.Contains(body, `id="pending-count"`) {
		t.Error("a denied request still offers the buttons or counts as pending")
	}
}

// The approval page names the credential that asked: the key by the name
// its owner gave it (escaped), an OAuth grant by its app's name.
func TestApprovalPage_NamesTheCredential(t *testing.T) {
	f := newFake(mcpgate.RoleMember)
	f.keys = []mcpgate.APIKey{{ID: "k0", Name: "another key"}, {ID: "k1", Name: "Laptop " + evil}}
	h := mustHandler(t, f)
	_, body := get(t, h, "/app/w/ws1/approvals/ap1", testUser)
	for _, want := range []string{"With MCP key", "<strong>Laptop &lt;script&gt;", "k1"} {
		if !strings.Contains(body, want) {
			t.Errorf("approval page by a key lacks %q", want)
		}
	}
	if strings.Contains(body, "another key") || strings.Contains(body, evil) {
		t.Error("the approval page names another key, or the name unescaped")
	}
	f.approvals[0].KeyID, f.approvals[0].GrantID, f.approvals[0].ClientName = "", "g1", "Claude"
	_, body = get(t, h, "/app/w/ws1/approvals/ap1", testUser)
	if !strings.Contains(body, `id="approval-credential">Claude</dd>`) || strings.Contains(body, "With MCP key") {
		t.Errorf("approval page by a grant does not name its app as the credential")
	}
}

func TestSettings_ApprovalAndGuardrails(t *testing.T) {
	f := newFake(mcpgate.RoleOwner)
	f.tools[1].Approval = mcpgate.ApprovalHuman
	f.guardrails = mcpgate.Guardrails{MaxTimeoutSeconds: 3600, MaxRunning: 5, AllowedTemplates: []string{"base", "python"}}
	_, body := get(t, mustHandler(t, f), "/app/w/ws1/settings", testUser)
	for _, want := range []string{`name="approval"`, `<option value="human" selected>`, `id="approval-modes"`,
		`data-api-path="/api/v1/workspaces/ws1/guardrails"`, `value="3600"`, `value="base, python"`} {
		if !strings.Contains(body, want) {
			t.Errorf("settings lack %q", want)
		}
	}
	f.role = mcpgate.RoleMember
	_, body = get(t, mustHandler(t, f), "/app/w/ws1/settings", testUser)
	if strings.Contains(body, "guardrails-form") || !strings.Contains(body, "3600 s") {
		t.Error("a member sees the guardrails form, or not the limits")
	}
}
