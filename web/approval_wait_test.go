package web

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
)

// Only an owner gets the field for the approval wait, bounded as the
// service bounds it and sent as a number; an admin and a member see it.
func TestSettings_ApprovalWait(t *testing.T) {
	for _, tt := range []struct {
		role      mcpgate.Role
		wantField bool
	}{{mcpgate.RoleOwner, true}, {mcpgate.RoleAdmin, false}, {mcpgate.RoleMember, false}} {
		_, body := get(t, mustHandler(t, newFake(tt.role)), "/app/w/ws1/settings", testUser)
		field := `name="approval_wait_seconds" type="number" min="0" max="55" step="1" required data-type="number" value="0"`
		if got := strings.Contains(body, field); got != tt.wantField {
			t.Errorf("%s: settings page has the approval wait field = %v, want %v", tt.role, got, tt.wantField)
		}
		if tt.wantField && !strings.Contains(body, `id="approval-wait-form"`) {
			t.Errorf("%s: the field is not in its PATCH form", tt.role)
		}
		if !tt.wantField && !strings.Contains(body, `id="approval-wait-status"`) {
			t.Errorf("%s: settings page does not show the approval wait", tt.role)
		}
	}
}
