package mcp_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/mcp"
)

var update = flag.Bool("update", false, "rewrite testdata/tools_list.golden.json")

// TestToolsList_golden pins what MCP clients actually receive from
// tools/list in a new workspace, for a full and a read-only key: names,
// titles, descriptions, annotations, input and output schemas, and the
// server's instructions. Rewrite with go test ./mcp -run golden -update and
// review the diff.
func TestToolsList_golden(t *testing.T) {
	fx := mcp.NewFixture(t, mcp.FixtureOptions{Registry: connectors.NewRegistry(e2b.New(e2b.Options{}))})
	got := map[string]any{}
	for _, scope := range []mcpgate.Scope{mcpgate.ScopeFull, mcpgate.ScopeReadOnly} {
		key, _ := fx.AddKey(t, scope)
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "golden", Version: "v0"}, nil).Connect(t.Context(),
			&sdk.StreamableClientTransport{Endpoint: fx.URL + "/mcp", HTTPClient: &http.Client{Transport: mcp.BearerTransport{Key: key}}, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("Connect() err = %v", err)
		}
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatalf("ListTools() err = %v", err)
		}
		// Through JSON, as a client sees it.
		b, _ := json.Marshal(res.Tools)
		var tools any
		_ = json.Unmarshal(b, &tools)
		got[string(scope)] = tools
		if scope == mcpgate.ScopeFull {
			got["instructions"] = cs.InitializeResult().Instructions
			got["server"] = cs.InitializeResult().ServerInfo
		}
		_ = cs.Close()
	}
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	path := filepath.Join("testdata", "tools_list.golden.json")
	if *update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (rewrite it with -update): %v", err)
	}
	if !bytes.Equal(b, want) {
		var w, g any
		_ = json.Unmarshal(want, &w)
		_ = json.Unmarshal(b, &g)
		t.Errorf("tools/list differs from %s (-want +got):\n%s\nrewrite with go test ./mcp -run golden -update if intended", path, cmp.Diff(w, g))
	}
}
