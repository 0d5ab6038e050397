package mcp

import (
	"context"
	"maps"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

const instructions = `This server manages the E2B cloud sandboxes of one team, through mcpgate.
Read-only tools (list, get, logs, metrics, templates, find idle) are safe to call.
Creating, resuming and extending sandboxes costs money, and killing one is irreversible:
describe what you are about to do and ask the user before calling those.
Some calls need a human's confirmation: such a call first returns a confirmation_token
instead of acting; show the user what would happen, and only after they agree call the
same tool again with the same arguments plus that confirmation_token.`

// server returns the workspace's MCP server for a key scope, building it on
// first use. Servers are cached because go-sdk calls getServer on every HTTP
// request; a policy change drops the whole workspace entry.
func (g *Gateway) server(ctx context.Context, workspaceID string, scope mcpgate.Scope) (*sdk.Server, error) {
	wt, err := g.workspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if s := wt.byScope[scope]; s != nil {
		return s, nil
	}
	s := g.buildServer(wt, scope)
	wt.byScope[scope] = s
	return s, nil
}

func (g *Gateway) buildServer(wt *workspaceTools, scope mcpgate.Scope) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "mcpgate", Title: "mcpgate (E2B sandboxes)", Version: g.opts.Version},
		&sdk.ServerOptions{Instructions: instructions, Logger: g.log})
	for _, t := range g.opts.Registry.Tools() {
		p := wt.policy[t.Name]
		if !visible(t, p, scope) {
			continue
		}
		s.AddTool(sdkTool(t, p.NeedsConfirmation), g.mcpHandler(t))
	}
	s.AddReceivingMiddleware(g.refuseHidden(wt, scope))
	addPrompts(s, wt, scope)
	return s
}

// sdkTool publishes a tool. A tool that needs confirmation in this workspace
// gets an extra optional confirmation_token argument in its schema.
func sdkTool(t *connectors.Tool, needsConfirmation bool) *sdk.Tool {
	schema := t.InputSchema
	if needsConfirmation {
		cp := *schema
		cp.Properties = maps.Clone(schema.Properties)
		cp.Properties[confirmationArg] = &jsonschema.Schema{Type: "string",
			Description: "The confirmation_token returned by the first call, once the user has agreed. Omit it on the first call."}
		schema = &cp
	}
	destructive, openWorld := t.Annotations.Destructive, t.Annotations.OpenWorld
	return &sdk.Tool{
		Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: schema, OutputSchema: map[bool]any{false: t.OutputSchema}[needsConfirmation], // a confirmation step answers with another shape
		Annotations: &sdk.ToolAnnotations{Title: t.Title, ReadOnlyHint: t.Annotations.ReadOnly,
			DestructiveHint: &destructive, IdempotentHint: t.Annotations.Idempotent, OpenWorldHint: &openWorld},
	}
}

// refuseHidden answers a call of a tool that exists but that this workspace
// disabled, or that the key's scope does not allow, with a tool error saying
// why and who can change it, rather than the SDK's bare "unknown tool".
func (g *Gateway) refuseHidden(wt *workspaceTools, scope mcpgate.Scope) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			call, ok := req.(*sdk.CallToolRequest)
			if !ok || call.Params == nil {
				return next(ctx, method, req)
			}
			t, known := g.opts.Registry.Tool(call.Params.Name)
			if !known {
				return next(ctx, method, req)
			}
			p := wt.policy[t.Name]
			var msg string
			switch {
			case !p.Enabled:
				msg = "The tool " + t.Name + " is turned off in this workspace. A workspace owner or admin can turn it on " +
					"in the dashboard under Settings → Tools (" + g.opts.PublicURL + "/app/w/" + wt.id + "/settings)."
			case !visible(t, p, scope):
				msg = "This MCP key is read-only, and " + t.Name + " changes sandboxes. Use a key with full scope " +
					"(create one in the dashboard) to call it."
			default:
				return next(ctx, method, req)
			}
			if id := identityFrom(ctx); id != nil {
				g.record(ctx, mcpgate.AuditEvent{WorkspaceID: id.WorkspaceID, ActorID: id.UserID, KeyID: id.KeyID,
					Kind: "tool_call", Action: t.Name, Outcome: mcpgate.OutcomeDenied, Message: msg, Source: "mcp"})
			}
			g.metrics.ToolCall(t.Name, mcpgate.OutcomeDenied, 0, 0)
			return errorResult(msg), nil
		}
	}
}

func errorResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}
