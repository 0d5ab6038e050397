package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
)

// A read-only OAuth grant is told it holds a grant, not a key (it once said
// "This MCP key is read-only"), and how an app gets more access.
func TestReadOnlyGrantWording(t *testing.T) {
	f := newSvcFixture(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name      string
		keyID     string
		grantID   string
		want, not string
	}{
		{name: "key", keyID: "key1", want: "This MCP key is read-only", not: "grant"},
		{name: "grant", grantID: "grant1", want: "This app's grant is read-only", not: "MCP key"},
	} {
		a := *f.member
		a.Role, a.KeyID, a.GrantID, a.Source, a.Scope = "", tt.keyID, tt.grantID, mcpgate.SourceMCP, mcpgate.ScopeReadOnly
		_, err := f.svc.Tools.CallTool(ctx, &a, mcpgate.ToolCall{Tool: "notes_add", Arguments: json.RawMessage(`{"text":"x"}`)})
		msg := mcpgate.ErrorMessage(err)
		if mcpgate.ErrorCode(err) != mcpgate.EForbidden || !strings.Contains(msg, tt.want) || strings.Contains(msg, tt.not) {
			t.Errorf("%s: read-only call of notes_add = %v, want forbidden saying %q", tt.name, err, tt.want)
		}
	}
}
