package web

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
)

func TestAccount_Page(t *testing.T) {
	f := newFake(mcpgate.RoleOwner)
	f.wsName = evil
	h := mustHandler(t, f)
	res, body := get(t, h, "/app/account", testUser)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /app/account = %d; body:\n%s", res.StatusCode, body)
	}
	for _, want := range []string{
		`data-api-method="PUT" data-api-path="/api/v1/me/password"`, `name="current_password"`, `name="new_password"`,
		`data-api-method="POST" data-api-path="/api/v1/workspaces"`, `href="/app/w/ws1"`,
		`class="sidenav"`, // framed in the personal workspace
	} {
		if !strings.Contains(body, want) {
			t.Errorf("account page lacks %s", want)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Errorf("account page renders a workspace name as markup")
	}
	// The confirmation field has no name: it is checked in the page, never sent.
	if strings.Contains(body, `id="new-password-again" name=`) {
		t.Errorf("the repeated password is sent to the API")
	}
	if res, _ := get(t, h, "/app/account", nil); res.StatusCode != http.StatusSeeOther {
		t.Errorf("logged-out GET /app/account = %d, want a redirect to login", res.StatusCode)
	}
}

// The user menu leads to account settings; the workspace menu to creating a
// workspace.
func TestMenus_AccountAndNewWorkspace(t *testing.T) {
	h := mustHandler(t, newFake(mcpgate.RoleMember))
	for _, p := range appPages {
		_, body := get(t, h, p, testUser)
		if !strings.Contains(body, `href="/app/account"`) || !strings.Contains(body, `href="/app/account#new-workspace"`) {
			t.Errorf("%s: menus lack account settings or create a workspace", p)
		}
	}
}
