package e2b_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

// mcpServer is the smallest go-sdk server that serves connector tools: the
// gateway's mcp package does this with policy, confirmation and audit.
func mcpServer(tools []*connectors.Tool, key mcpgate.Secret) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "e2b-test", Version: "v0"}, nil)
	for _, tl := range tools {
		a := tl.Annotations
		s.AddTool(&mcp.Tool{Name: tl.Name, Title: tl.Title, Description: tl.Description, InputSchema: tl.InputSchema,
			OutputSchema: tl.OutputSchema,
			Annotations: &mcp.ToolAnnotations{Title: tl.Title, ReadOnlyHint: a.ReadOnly, IdempotentHint: a.Idempotent,
				DestructiveHint: jsonschema.Ptr(a.Destructive), OpenWorldHint: jsonschema.Ptr(a.OpenWorld)}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				out, err := tl.Call(ctx, key, req.Params.Arguments)
				if err != nil {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: mcpgate.ErrorMessage(err)}}}, nil
				}
				b, err := connectors.MarshalOutput(out)
				if err != nil {
					return nil, err
				}
				return &mcp.CallToolResult{StructuredContent: json.RawMessage(b), Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
			})
	}
	return s
}

// TestMCP calls every tool from a plain go-sdk client over streamable HTTP.
func TestMCP(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	server := mcpServer(e.conn.Tools(), testKey)
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: h.URL, HTTPClient: h.Client(), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 14 {
		t.Fatalf("tools/list = %d tools, want 14", len(list.Tools))
	}
	// The output schemas as a client receives them, to validate every
	// structured result against.
	outSchemas := map[string]*jsonschema.Resolved{}
	for _, tl := range list.Tools {
		if a := tl.Annotations; a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: annotations not all explicit: %+v", tl.Name, a)
		}
		b, err := json.Marshal(tl.OutputSchema)
		var s jsonschema.Schema
		if err != nil || tl.OutputSchema == nil || json.Unmarshal(b, &s) != nil || s.Type != "object" {
			t.Fatalf("%s: outputSchema = %s, want an object schema", tl.Name, b)
		}
		if outSchemas[tl.Name], err = s.Resolve(nil); err != nil {
			t.Fatalf("%s: outputSchema does not resolve: %v", tl.Name, err)
		}
	}

	call := func(name string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("CallTool(%s) err = %v", name, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		e.mu.Lock()
		e.texts = append(e.texts, text) // scanned for secrets at cleanup
		e.mu.Unlock()
		if res.IsError {
			t.Fatalf("CallTool(%s) = error %q", name, text)
		}
		m, ok := res.StructuredContent.(map[string]any)
		if !ok {
			t.Fatalf("CallTool(%s) structured content = %T", name, res.StructuredContent)
		}
		if err := outSchemas[name].Validate(m); err != nil {
			t.Errorf("CallTool(%s) structured content does not match the published outputSchema: %v", name, err)
		}
		return m
	}

	tmpl := call(e2b.ToolListTemplates, nil)["data"].([]any)[2].(map[string]any)["template_id"]
	call(e2b.ToolListDefaultTemplates, nil)
	call(e2b.ToolListTemplateBuilds, map[string]any{"template_id": tmpl})
	id := call(e2b.ToolCreateSandbox, map[string]any{"timeout": 3600, "metadata": map[string]any{"user": "abc"}})["sandbox_id"]
	e.clock.Advance(11 * time.Minute)
	call(e2b.ToolListSandboxes, map[string]any{"metadata": "user=abc"})
	call(e2b.ToolGetSandbox, map[string]any{"sandbox_id": id})
	call(e2b.ToolGetSandboxLogs, map[string]any{"sandbox_id": id, "limit": 5})
	call(e2b.ToolGetSandboxMetrics, map[string]any{"sandbox_id": id})
	call(e2b.ToolFindIdleSandboxes, map[string]any{"window_minutes": 10})
	call(e2b.ToolSetSandboxTimeout, map[string]any{"sandbox_id": id, "timeout": 600})
	call(e2b.ToolPauseSandbox, map[string]any{"sandbox_id": id, "memory": false})
	call(e2b.ToolResumeSandbox, map[string]any{"sandbox_id": id})
	call(e2b.ToolListSnapshots, nil)
	if out := call(e2b.ToolKillSandbox, map[string]any{"sandbox_id": id}); out["killed"] != true {
		t.Errorf("kill = %v", out)
	}

	// Errors reach the model as readable tool errors, not protocol errors.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: e2b.ToolGetSandbox, Arguments: map[string]any{"sandbox_id": id}})
	if err != nil || !res.IsError {
		t.Fatalf("get of a killed sandbox = %v, %v; want a tool error", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: e2b.ToolListSandboxes, Arguments: map[string]any{"limit": 101}})
	if err != nil || !res.IsError {
		t.Fatalf("limit 101 = %v, %v; want a tool error", res, err)
	}
}
