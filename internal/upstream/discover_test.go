package upstream

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ptr(b bool) *bool { return &b }

// TestDiscover_GoSDKServer discovers a go-sdk server, stateful (2025-11-25
// with a session) and stateless (2026-07-28): every capability, every page
// (the server pages by 3), and the annotations as declared.
func TestDiscover_GoSDKServer(t *testing.T) {
	for _, tt := range []struct {
		name      string
		stateless bool
		version   string
	}{
		{name: "stateful", version: "2025-11-25"},
		{name: "stateless", stateless: true, version: "2026-07-28"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			f := &fixture{stateless: tt.stateless}
			ts := f.serve(t)
			p := newPool(t, Options{})
			c, err := p.Discover(context.Background(), Target{URL: ts.URL})
			if err != nil {
				t.Fatalf("Discover() err = %v", err)
			}
			if c.ProtocolVersion != tt.version {
				t.Errorf("ProtocolVersion = %q, want %q", c.ProtocolVersion, tt.version)
			}
			var names []string
			byName := map[string]Tool{}
			for _, tool := range c.Tools {
				names = append(names, tool.Name)
				byName[tool.Name] = tool
			}
			want := []string{"bare", "big", "count", "delete", "fail", "media", "meta", "read", "silent", "sum", "wait", "write"}
			if diff := cmp.Diff(want, sortStrings(names)); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			if len(c.Prompts) != 1 || len(c.Resources) != 1 || len(c.ResourceTemplates) != 1 {
				t.Errorf("prompts, resources, templates = %d, %d, %d; want 1 each", len(c.Prompts), len(c.Resources), len(c.ResourceTemplates))
			}
			var init map[string]json.RawMessage
			if json.Unmarshal(c.Init, &init) != nil || init["capabilities"] == nil {
				t.Errorf("Init = %s, want the raw initialize result with capabilities", c.Init)
			}
			// go-sdk v1.8.0 always sends readOnlyHint and idempotentHint
			// (plain bools) once a tool has annotations, and omits a nil
			// destructiveHint/openWorldHint: those stay unset.
			checks := []struct {
				tool                               string
				readOnly, destructive, openWorld   *bool
				effReadOnly, effDestr, effOpenWrld bool
			}{
				{tool: "bare", effDestr: true, effOpenWrld: true},
				{tool: "read", readOnly: ptr(true), openWorld: ptr(false), effReadOnly: true, effDestr: true},
				{tool: "delete", readOnly: ptr(false), destructive: ptr(true), effDestr: true, effOpenWrld: true},
				{tool: "write", readOnly: ptr(false), destructive: ptr(false), effOpenWrld: true},
			}
			for _, ck := range checks {
				a := byName[ck.tool].Annotations
				if diff := cmp.Diff([]*bool{ck.readOnly, ck.destructive, ck.openWorld}, []*bool{a.ReadOnly, a.Destructive, a.OpenWorld}); diff != "" {
					t.Errorf("%s declared hints (-want +got):\n%s", ck.tool, diff)
				}
				if a.ReadOnlyHint() != ck.effReadOnly || a.DestructiveHint() != ck.effDestr || a.OpenWorldHint() != ck.effOpenWrld {
					t.Errorf("%s effective hints = %v %v %v", ck.tool, a.ReadOnlyHint(), a.DestructiveHint(), a.OpenWorldHint())
				}
			}
			if byName["sum"].OutputSchema == nil || byName["bare"].OutputSchema != nil {
				t.Errorf("output schemas: sum %s, bare %s; want one on sum only", byName["sum"].OutputSchema, byName["bare"].OutputSchema)
			}
			if p.Sessions() != 0 {
				t.Errorf("Sessions() = %d after Discover, want 0 (discovery uses a session of its own)", p.Sessions())
			}
		})
	}
}
