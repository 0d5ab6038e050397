package e2b_test

import (
	"os"
	"path/filepath"
	"regexp"
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
	eachSource(t, []string{"../../mcp", "../../web", "../../api", "../../internal/service"}, func(path, text string) {
		for _, n := range names {
			if strings.Contains(text, n) {
				t.Errorf("%s names the E2B tool %s", path, n)
			}
		}
	})
}

// upstreamWord is how a generic layer would name E2B: the name, its key
// prefix, its connection route, its simulator.
var upstreamWord = regexp.MustCompile(`(?i)e2b`)

// TestSeam_genericLayersNameNoUpstream: the dashboard (code, templates and
// script), the API and the MCP endpoint never name E2B, not even its
// connection route (/connections/e2b) or its key's shape; what the
// dashboard says of a connector it reads from the connector's description
// at run time (connectors.Info), so a second connector changes none of
// their lines. Tests may name it.
func TestSeam_genericLayersNameNoUpstream(t *testing.T) {
	for _, s := range []string{"Connect your E2B team", `data-api-path="/connections/e2b"`, "e2b_…", "X-E2B-Simulator"} {
		if !upstreamWord.MatchString(s) {
			t.Fatalf("the fence lets %q through", s)
		}
	}
	eachSource(t, []string{"../../web", "../../api", "../../mcp"}, func(path, text string) {
		for i, line := range strings.Split(text, "\n") {
			if upstreamWord.MatchString(line) {
				t.Errorf("%s:%d names E2B: %s", path, i+1, strings.TrimSpace(line))
			}
		}
	})
}

// eachSource calls check with every file under dirs but tests and test
// data: code, templates and scripts.
func eachSource(t *testing.T, dirs []string, check func(path, text string)) {
	t.Helper()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "testdata") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			check(path, string(b))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
