package e2b_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgate/mcpgate/connectors/e2b"
)

var update = flag.Bool("update", false, "rewrite testdata/tools.golden.json")

// TestTools_golden pins the public contract: names, titles, descriptions,
// annotations, policy defaults, input and output schemas. A change shows up as a
// reviewed diff; rewrite with go test ./connectors/e2b -update.
func TestTools_golden(t *testing.T) {
	type toolJSON struct {
		Name                     string `json:"name"`
		Title                    string `json:"title"`
		Description              string `json:"description"`
		Annotations              any    `json:"annotations"`
		CostsMoney               bool   `json:"costs_money"`
		DefaultEnabled           bool   `json:"default_enabled"`
		DefaultNeedsConfirmation bool   `json:"default_needs_confirmation"`
		InputSchema              any    `json:"input_schema"`
		OutputSchema             any    `json:"output_schema"`
	}
	var list []toolJSON
	for _, tl := range e2b.New(e2b.Options{}).Tools() {
		a := tl.Annotations
		list = append(list, toolJSON{Name: tl.Name, Title: tl.Title, Description: tl.Description,
			Annotations: map[string]bool{"readOnlyHint": a.ReadOnly, "destructiveHint": a.Destructive,
				"idempotentHint": a.Idempotent, "openWorldHint": a.OpenWorld},
			CostsMoney: tl.CostsMoney, DefaultEnabled: tl.DefaultEnabled,
			DefaultNeedsConfirmation: tl.DefaultNeedsConfirmation, InputSchema: tl.InputSchema, OutputSchema: tl.OutputSchema})
	}
	got, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "tools.golden.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("tool list differs from %s (-want +got):\n%s", path, cmp.Diff(string(want), string(got)))
	}
}
