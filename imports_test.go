package mcpgate_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mcpgate/mcpgate"

// importsMarker starts the line of a package comment that lists the
// module's packages the package may import, comma-separated and ending with
// a period ("none." for none), the root package as "mcpgate".
const importsMarker = "Imports from this module:"

// TestPackageDocs_DeclareImports keeps every package comment's list of the
// module's packages it imports true, so that the map a reader trusts cannot
// drift from the code: a package that imports one it does not declare, or
// declares one it no longer imports, fails. Test files are not counted; they
// may import test helpers.
func TestPackageDocs_DeclareImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \",\"}}\t{{join .Imports \",\"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Split(line, "\t")
		path, dir, files, imports := fields[0], fields[1], fields[2], fields[3]
		if files == "" {
			continue // only tests: nothing imported by the module's code
		}
		declared, err := declaredImports(dir, strings.Split(files, ","))
		if err != nil {
			t.Errorf("%s: %v", short(path), err)
			continue
		}
		var actual []string
		for _, imp := range strings.Split(imports, ",") {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				actual = append(actual, short(imp))
			}
		}
		slices.Sort(actual)
		for _, imp := range actual {
			if !slices.Contains(declared, imp) {
				t.Errorf("%s imports %s, which its package comment does not declare (%q line)", short(path), imp, importsMarker)
			}
		}
		for _, imp := range declared {
			if !slices.Contains(actual, imp) {
				t.Errorf("%s declares %s in its package comment but does not import it", short(path), imp)
			}
		}
		checked++
	}
	if checked < 30 {
		t.Fatalf("checked %d packages; want the module's", checked)
	}
}

// short names a package of the module as its package comments do.
func short(path string) string {
	if path == module {
		return "mcpgate"
	}
	return strings.TrimPrefix(path, module+"/")
}

// declaredImports reads the marker line (and its continuation lines, up to
// the period) from the package comment among files.
func declaredImports(dir string, files []string) ([]string, error) {
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if f.Doc == nil {
			continue
		}
		text := f.Doc.Text()
		i := strings.Index(text, importsMarker)
		if i < 0 {
			continue
		}
		list, _, ok := strings.Cut(text[i+len(importsMarker):], ".")
		if !ok {
			return nil, fmt.Errorf("%s: the %q list does not end with a period", name, importsMarker)
		}
		list = strings.Join(strings.Fields(list), " ")
		if list == "none" {
			return nil, nil
		}
		var out []string
		for _, item := range strings.Split(list, ",") {
			out = append(out, strings.TrimSpace(item))
		}
		slices.Sort(out)
		return out, nil
	}
	return nil, fmt.Errorf("no package comment has an %q line", importsMarker)
}
