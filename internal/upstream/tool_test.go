package upstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustTool(t *testing.T, raw string) Tool {
	t.Helper()
	tool, err := ParseTool(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("ParseTool(%s) err = %v", raw, err)
	}
	return tool
}

func mustPin(t *testing.T, tool Tool) string {
	t.Helper()
	p, err := Pin(tool)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseTool_DeclaredVersusUnset(t *testing.T) {
	tool := mustTool(t, `{"name":"x","annotations":{"readOnlyHint":true,"destructiveHint":"false","openWorldHint":null},"icons":[{"src":"a"}]}`)
	a := tool.Annotations
	if a.ReadOnly == nil || !*a.ReadOnly {
		t.Errorf("readOnlyHint = %v, want declared true", a.ReadOnly)
	}
	if a.Destructive != nil || !a.DestructiveHint() {
		t.Errorf("destructiveHint given as a string = %v, want unset (destructive)", a.Destructive)
	}
	if a.OpenWorld != nil || !a.OpenWorldHint() || a.Idempotent != nil || a.IdempotentHint() {
		t.Errorf("openWorld %v idempotent %v, want unset with the spec's defaults", a.OpenWorld, a.Idempotent)
	}
	if !strings.Contains(string(tool.Raw), `"icons"`) {
		t.Errorf("Raw = %s, want members the gateway does not model kept", tool.Raw)
	}
	none := mustTool(t, `{"name":"y"}`)
	if none.Annotations.ReadOnlyHint() || !none.Annotations.DestructiveHint() || none.Annotations.Raw != nil {
		t.Errorf("no annotations = %+v, want unset: not read-only, destructive", none.Annotations)
	}
}

func TestParseTool_Refuses(t *testing.T) {
	for _, raw := range []string{
		`{"name":"x","name":"y"}`, // a member twice: parsers disagree on which wins
		`{"name":"x","annotations":{"readOnlyHint":false,"readOnlyHint":true}}`,
		`{"description":"no name"}`,
		`["name"]`,
		`{"name":""}`,
		`{"name":"x"`,
	} {
		if _, err := ParseTool(json.RawMessage(raw)); err == nil {
			t.Errorf("ParseTool(%s) accepted", raw)
		}
	}
}

func TestPin_Canonical(t *testing.T) {
	a := mustTool(t, `{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1.0}}},"annotations":{"readOnlyHint":true},"_meta":{"x":1}}`)
	b := mustTool(t, "{ \"annotations\" : {\"readOnlyHint\":true},\n \"inputSchema\":{\"properties\":{\"n\":{\"maximum\":1,\"type\":\"number\"}},\"type\":\"object\"}, \"description\":\"\\u0064\",\"name\":\"t\", \"outputSchema\": null, \"_meta\":{\"x\":1.0}}")
	if pa, pb := mustPin(t, a), mustPin(t, b); pa != pb {
		t.Errorf("Pin differs for the same definition in another order, spacing and number spelling:\n%s\n%s", pa, pb)
	}
	if p := mustPin(t, a); !strings.HasPrefix(p, "v2:") || len(p) != len("v2:")+64 {
		t.Errorf("Pin = %q, want v2: and a hex SHA-256", p)
	}
	// The documented canonical form, byte for byte.
	canon, err := canonicalDefinition(b.Raw)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"_meta":{"x":1},"annotations":{"readOnlyHint":true},"description":"d","inputSchema":{"properties":{"n":{"maximum":1,"type":"number"}},"type":"object"},"name":"t"}`
	if string(canon) != want {
		t.Errorf("canonical form = %s, want %s", canon, want)
	}
	for _, changed := range []string{
		`{"name":"t","description":"d2","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1}}},"annotations":{"readOnlyHint":true}}`,
		`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":2}}},"annotations":{"readOnlyHint":true}}`,
		`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1}}},"annotations":{"readOnlyHint":false}}`,
		`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1}}}}`,
		`{"name":"t","title":"T","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1}}},"annotations":{"readOnlyHint":true}}`,
		`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1}}},"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`,
		// Every member counts: _meta, icons, execution and unknown ones.
		`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1}}},"annotations":{"readOnlyHint":true},"_meta":{"x":1,"ui":{"resourceUri":"ui://evil"}}}`,
		`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1}}},"annotations":{"readOnlyHint":true},"_meta":{"x":1},"icons":[{"src":"https://evil.example/i.svg"}]}`,
		`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1}}},"annotations":{"readOnlyHint":true},"_meta":{"x":1},"execution":{"taskSupport":"required"}}`,
		`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1}}},"annotations":{"readOnlyHint":true},"_meta":{"x":1},"x-future":true}`,
	} {
		if mustPin(t, mustTool(t, changed)) == mustPin(t, a) {
			t.Errorf("Pin unchanged for %s", changed)
		}
	}
}

func TestDiffCatalogs(t *testing.T) {
	old := []Tool{
		mustTool(t, `{"name":"keep","description":"same"}`),
		mustTool(t, `{"name":"gone"}`),
		mustTool(t, `{"name":"desc","description":"a","inputSchema":{"type":"object"}}`),
		mustTool(t, `{"name":"ro","annotations":{"readOnlyHint":false}}`),
		mustTool(t, `{"name":"destr"}`),
		mustTool(t, `{"name":"world","annotations":{"openWorldHint":true,"destructiveHint":false}}`),
		mustTool(t, `{"name":"tighter","annotations":{"readOnlyHint":true}}`),
		mustTool(t, `{"name":"meta","_meta":{"a":1}}`),
	}
	new := []Tool{
		mustTool(t, `{"description":"same","name":"keep"}`),
		mustTool(t, `{"name":"desc","description":"b","inputSchema":{"type":"object","required":["x"]}}`),
		mustTool(t, `{"name":"ro","annotations":{"readOnlyHint":true}}`),
		mustTool(t, `{"name":"destr","annotations":{"destructiveHint":false}}`),
		mustTool(t, `{"name":"world","annotations":{"openWorldHint":false,"destructiveHint":false}}`),
		mustTool(t, `{"name":"tighter","annotations":{"readOnlyHint":false}}`),
		mustTool(t, `{"name":"fresh"}`),
		mustTool(t, `{"name":"meta","_meta":{"a":2},"icons":[]}`),
	}
	d, err := DiffCatalogs(old, new)
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	want := CatalogDiff{
		Added:   []string{"fresh"},
		Removed: []string{"gone"},
		Changed: []ToolChange{
			{Tool: "desc", Fields: []string{"description", "inputSchema"}},
			{Tool: "destr", Fields: []string{"annotations"}},
			{Tool: "meta", Fields: []string{"_meta", "icons"}},
			{Tool: "ro", Fields: []string{"annotations"}},
			{Tool: "tighter", Fields: []string{"annotations"}},
			{Tool: "world", Fields: []string{"annotations"}},
		},
		Loosened: []HintChange{
			{Tool: "destr", Hint: "destructiveHint", Before: nil, After: &no},
			{Tool: "ro", Hint: "readOnlyHint", Before: &no, After: &yes},
			{Tool: "world", Hint: "openWorldHint", Before: &yes, After: &no},
		},
	}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("DiffCatalogs (-want +got):\n%s", diff)
	}
	if same, _ := DiffCatalogs(old, old); !same.Empty() {
		t.Errorf("DiffCatalogs(old, old) = %+v, want empty", same)
	}
}

// A tool name is a stored key and a URL path segment: only the
// specification's names pass, so none can hold "/", "#", control or bidi
// characters, be a dot segment, or run to 60 KiB.
func TestParseTool_RefusesNamesOutsideThePattern(t *testing.T) {
	long := strings.Repeat("n", 60<<10)
	for _, name := range []string{long, strings.Repeat("n", 129), "a/b", "../../tools/x#", "rm\u202eexe", "x\u0007", "a b", ".", ".."} {
		raw, _ := json.Marshal(map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"}})
		if tool, err := ParseTool(raw); err == nil {
			t.Errorf("ParseTool accepted the name %q (%d bytes)", cutName(tool.Name), len(tool.Name))
		}
	}
	for _, name := range []string{"a", strings.Repeat("n", 128), "get_file.v2-beta", "..a"} {
		raw, _ := json.Marshal(map[string]any{"name": name})
		if _, err := ParseTool(raw); err != nil {
			t.Errorf("ParseTool(%q) err = %v, want nil", name, err)
		}
	}
}

// The pin's canonical form writes numbers as float64 (RFC 8785), so a
// definition holding a number float64 cannot carry is refused: otherwise a
// maximum moved from 2^53+1 to 2^53 would be no change to the pin, while an
// exact validator (Python's jsonschema, Postgres numeric) reads another
// schema.
func TestParseTool_RefusesNumbersAPinCannotTellApart(t *testing.T) {
	def := func(n string) json.RawMessage {
		return json.RawMessage(`{"name":"pay","inputSchema":{"type":"object","properties":{"cents":{"type":"integer","maximum":` + n + `}}}}`)
	}
	for _, n := range []string{"9007199254740993", "1e400", "-1e400", "1e-400", "0.1000000000000000000000000001", "123456789012345678901234567890"} {
		if _, err := ParseTool(def(n)); err == nil || !strings.Contains(err.Error(), "exactly") {
			t.Errorf("ParseTool(maximum %s) err = %v, want refused", n, err)
		}
	}
	for _, n := range []string{"9007199254740992", "0.1", "1.0", "1e2", "-0", "0.0e10", "5e-324", "1.7976931348623157e308", "-12.5"} {
		if _, err := ParseTool(def(n)); err != nil {
			t.Errorf("ParseTool(maximum %s) err = %v, want nil", n, err)
		}
	}
}
