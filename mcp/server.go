package mcp

import (
	"context"
	"encoding/json"
	"fmt"
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
		&sdk.ServerOptions{Instructions: instructions, Logger: g.sdkLog, Capabilities: gatewayCapabilities()})
	callable := map[string]bool{}
	for _, info := range set.Tools {
		if info.Server != "" {
			g.addUpstreamTool(s, info)
			continue
		}
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
			return g.callTool(ctx, call, call.Params.Name, set.All[call.Params.Name].Server != "")
		}
	}
}

func errorResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}

// addUpstreamTool publishes an upstream server's tool under its exposed
// name with its definition as the server gave it: schemas as raw JSON,
// title, description, icons and _meta as they came, and the annotations
// as declared (go-sdk writes readOnlyHint and idempotentHint even when
// false, their default). As for a connector's tool, one that may need a
// confirmation or an approval gets the gateway's own argument added and
// no output schema. A definition go-sdk would refuse is left out, logged.
func (g *Gateway) addUpstreamTool(s *sdk.Server, info mcpgate.ToolInfo) {
	tool, err := upstreamSDKTool(info)
	if err == nil {
		err = addToolChecked(s, tool, g.upstreamHandler(info.Name))
	}
	if err != nil {
		g.log.Warn("upstream tool not published", "server", info.Server, "tool", info.ServerTool, "err", err)
	}
}

// addToolChecked is AddTool, which panics on a definition it refuses (an
// input schema that is not an object, bad header annotations): an
// upstream's definition must not take the endpoint down.
func addToolChecked(s *sdk.Server, t *sdk.Tool, h sdk.ToolHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	s.AddTool(t, h)
	return nil
}

// upstreamSDKTool is the published form of an upstream tool.
func upstreamSDKTool(info mcpgate.ToolInfo) (*sdk.Tool, error) {
	var def struct {
		Title        string               `json:"title"`
		Description  string               `json:"description"`
		InputSchema  json.RawMessage      `json:"inputSchema"`
		OutputSchema json.RawMessage      `json:"outputSchema"`
		Annotations  *sdk.ToolAnnotations `json:"annotations"`
		Icons        []sdk.Icon           `json:"icons"`
		Meta         sdk.Meta             `json:"_meta"`
	}
	if err := json.Unmarshal(info.Definition, &def); err != nil {
		return nil, fmt.Errorf("read definition: %w", err)
	}
	needsConfirmation := info.Approval == mcpgate.ApprovalModel
	needsApproval := info.Approval == mcpgate.ApprovalHuman
	input := def.InputSchema
	if needsConfirmation || needsApproval {
		var err error
		if input, err = withOwnArgs(input, needsConfirmation, needsApproval); err != nil {
			return nil, err
		}
	}
	t := &sdk.Tool{Name: info.Name, Title: def.Title, Description: def.Description, InputSchema: input,
		Annotations: def.Annotations, Icons: def.Icons, Meta: def.Meta}
	if !needsConfirmation && !needsApproval && len(def.OutputSchema) > 0 && string(def.OutputSchema) != "null" {
		t.OutputSchema = def.OutputSchema
	}
	return t, nil
}

// withOwnArgs adds the gateway's confirmation_token and approval_id to a
// raw input schema's properties, leaving every other member as it is.
func withOwnArgs(schema json.RawMessage, confirmation, approval bool) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(schema, &m); err != nil || m == nil {
		return nil, fmt.Errorf("the input schema is not an object")
	}
	props := map[string]json.RawMessage{}
	if raw, ok := m["properties"]; ok {
		if err := json.Unmarshal(raw, &props); err != nil || props == nil {
			return nil, fmt.Errorf("the input schema's properties are not an object")
		}
	}
	if confirmation {
		props[confirmationArg] = json.RawMessage(`{"type":"string","description":"The confirmation_token returned by the first call, once the user has agreed. Omit it on the first call."}`)
	}
	if approval {
		props[approvalArg] = json.RawMessage(`{"type":"string","description":"The approval_id returned by the first call, once a person has approved it in the dashboard. Omit it on the first call."}`)
	}
	b, err := json.Marshal(props)
	if err != nil {
		return nil, err
	}
	m["properties"] = b
	return json.Marshal(m)
}
