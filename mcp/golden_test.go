package mcp_test

import (
	"encoding/json"
	"net/http"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/golden"
	"github.com/mcpgate/mcpgate/mcp"
)

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
	golden.JSON(t, "tools_list.golden.json", got)
}
