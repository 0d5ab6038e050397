package e2b_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/connectors/e2b"
)

// TestSeam_noToolNamesOutsideTheConnector: the generic layers (the services,
// the MCP endpoint, the API and the dashboard, templates and script
// included) never name one of this connector's tools; what they need of it
// comes through the connectors interfaces. Tests may name them.
func TestSeam_noToolNamesOutsideTheConnector(t *testing.T) {
	var names []string
	for _, tl := range e2b.New(e2b.Options{}).Tools() {
		names = append(names, tl.Name)
	}
	for _, dir := range []string{"../../mcp", "../../web", "../../api", "../../internal/service"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "testdata") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, n := range names {
				if strings.Contains(string(b), n) {
					t.Errorf("%s names the E2B tool %s", path, n)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
