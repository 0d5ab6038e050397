package mcp

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// confirmationInstructions are the gateway's own part of the server
// instructions: how its confirmation works, whatever the connector.
const confirmationInstructions = `Some calls need a human's confirmation: such a call first returns a confirmation_token
instead of acting; show the user what would happen, and only after they agree call the
same tool again with the same arguments plus that confirmation_token.`

// serverText returns the server's title and instructions from the
// registered connectors.
func (g *Gateway) serverText() (title, instructions string) {
	var titles, parts []string
	for _, name := range g.opts.Registry.Names() {
		c, _ := g.opts.Registry.Connector(name)
		if in, ok := c.(connectors.Instructor); ok {
			titles = append(titles, in.Title())
			parts = append(parts, in.Instructions())
		}
	}
	title = "mcpgate"
	if len(titles) > 0 {
		title += " (" + strings.Join(titles, ", ") + ")"
	}
	return title, strings.Join(append(parts, confirmationInstructions, approvalInstructions), "\n")
}

func (g *Gateway) buildServer(set *mcpgate.ToolSet) *sdk.Server {
	title, instructions := g.serverText()
	s := sdk.NewServer(&sdk.Implementation{Name: "mcpgate", Title: title, Version: g.opts.Version},
		&sdk.ServerOptions{Instructions: instructions, Logger: g.sdkLog})
	callable := map[string]bool{}
	for _, info := range set.Tools {
		t, ok := g.opts.Registry.Tool(info.Name)
		if !ok {
			continue
		}
		callable[t.Name] = true
		own, follows := info.Approval, mcpgate.ApprovalNone
		if f, ok := set.All[t.Follows]; ok && t.Follows != "" && f.Enabled {
			// The call may have to meet the other tool's approval, so its
			// schema offers what that approval needs.
			follows = f.Approval
		}
		s.AddTool(sdkTool(t, own == mcpgate.ApprovalModel || follows == mcpgate.ApprovalModel,
			own == mcpgate.ApprovalHuman || follows == mcpgate.ApprovalHuman), g.mcpHandler(t))
	}
	s.AddReceivingMiddleware(g.refuseHidden(set))
	g.addPrompts(s, callable)
	return s
}

// sdkTool publishes a tool. A tool that may need confirmation in this
// workspace gets an extra optional confirmation_token argument in its
// schema, and one that may need a person's approval an approval_id. Either
// gets no output schema: its first call answers with the confirmation or
// approval step, whose shape is not the tool's output, and strict clients
// reject a result that does not match a published schema.
func sdkTool(t *connectors.Tool, needsConfirmation, needsApproval bool) *sdk.Tool {
	schema := t.InputSchema
	if needsConfirmation || needsApproval {
		cp := *schema
		cp.Properties = maps.Clone(schema.Properties)
		if needsConfirmation {
			cp.Properties[confirmationArg] = &jsonschema.Schema{Type: "string",
				Description: "The confirmation_token returned by the first call, once the user has agreed. Omit it on the first call."}
		}
		if needsApproval {
			cp.Properties[approvalArg] = &jsonschema.Schema{Type: "string",
				Description: "The approval_id returned by the first call, once a person has approved it in the dashboard. Omit it on the first call."}
		}
		schema = &cp
	}
	destructive, openWorld := t.Annotations.Destructive, t.Annotations.OpenWorld
	tool := &sdk.Tool{
		Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{Title: t.Title, ReadOnlyHint: t.Annotations.ReadOnly,
			DestructiveHint: &destructive, IdempotentHint: t.Annotations.Idempotent, OpenWorldHint: &openWorld},
	}
	if !needsConfirmation && !needsApproval && t.OutputSchema != nil {
		tool.OutputSchema = t.OutputSchema
	}
	return tool
}

// addPrompts offers each connector's prompts to callers who may call every
// tool the prompt uses.
func (g *Gateway) addPrompts(s *sdk.Server, callable map[string]bool) {
	for _, name := range g.opts.Registry.Names() {
		c, _ := g.opts.Registry.Connector(name)
		p, ok := c.(connectors.Prompter)
		if !ok {
			continue
		}
		for _, pr := range p.Prompts() {
			if !slices.ContainsFunc(pr.Requires, func(tool string) bool { return !callable[tool] }) {
				result := &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: pr.Text}}}}
				s.AddPrompt(&sdk.Prompt{Name: pr.Name, Title: pr.Title, Description: pr.Description},
					func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) { return result, nil })
			}
		}
	}
}

// refuseHidden answers a call of a tool that exists but that this caller may
// not call (the workspace disabled it, or the key's scope does not allow it)
// with the tool service's refusal, which says why and who can change it,
// rather than the SDK's bare "unknown tool".
func (g *Gateway) refuseHidden(set *mcpgate.ToolSet) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			call, ok := req.(*sdk.CallToolRequest)
			if !ok || call.Params == nil {
				return next(ctx, method, req)
			}
			if _, known := set.All[call.Params.Name]; !known || slices.ContainsFunc(set.Tools, func(t mcpgate.ToolInfo) bool {
				return t.Name == call.Params.Name
			}) {
				return next(ctx, method, req)
			}
			// The tool service refuses it, audits the refusal and says why.
			return g.callTool(ctx, call, call.Params.Name)
		}
	}
}

func errorResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}
