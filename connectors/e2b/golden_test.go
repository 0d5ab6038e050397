package e2b_test

import (
	"testing"

	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/golden"
)

// TestTools_golden pins the public contract: names, titles, descriptions,
// annotations, policy defaults, input and output schemas. A change shows up as a
// reviewed diff; rewrite with go test ./connectors/e2b -update.
func TestTools_golden(t *testing.T) {
	type toolJSON struct {
		Name            string `json:"name"`
		Title           string `json:"title"`
		Description     string `json:"description"`
		Annotations     any    `json:"annotations"`
		CostsMoney      bool   `json:"costs_money"`
		DefaultEnabled  bool   `json:"default_enabled"`
		DefaultApproval string `json:"default_approval"`
		InputSchema     any    `json:"input_schema"`
		OutputSchema    any    `json:"output_schema"`
	}
	var list []toolJSON
	for _, tl := range e2b.New(e2b.Options{}).Tools() {
		a := tl.Annotations
		list = append(list, toolJSON{Name: tl.Name, Title: tl.Title, Description: tl.Description,
			Annotations: map[string]bool{"readOnlyHint": a.ReadOnly, "destructiveHint": a.Destructive,
				"idempotentHint": a.Idempotent, "openWorldHint": a.OpenWorld},
			CostsMoney: tl.CostsMoney, DefaultEnabled: tl.DefaultEnabled,
			DefaultApproval: string(tl.DefaultApprovalMode()), InputSchema: tl.InputSchema, OutputSchema: tl.OutputSchema})
	}
	golden.JSON(t, "tools.golden.json", list)
}
