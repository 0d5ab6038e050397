package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// mcpHandler adapts a connector tool to the SDK.
func (g *Gateway) mcpHandler(t *connectors.Tool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if err := g.limitCall(actorFrom(ctx)); err != nil {
			return toolErrorResult(err), nil
		}
		return g.callTool(ctx, req, t.Name, false)
	}
}

// upstreamHandler relays calls of an upstream server's tool, published
// under name.
func (g *Gateway) upstreamHandler(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if err := g.limitCall(actorFrom(ctx)); err != nil {
			return toolErrorResult(err), nil
		}
		return g.callTool(ctx, req, name, true)
	}
}

// callTool runs one tools/call through the tool service, which decides
// everything; this adds only the MCP side of a confirmation (a token or an
// input request) and turns the outcome into a result: a connector's output
// as structured content, an upstream tool's result (relay) as it came. A
// caller that gave a progress token gets the upstream's progress.
func (g *Gateway) callTool(ctx context.Context, req *sdk.CallToolRequest, tool string, relay bool) (*sdk.CallToolResult, error) {
	ctx, done := g.untilStop(ctx)
	defer done()
	if relay && req.Session != nil {
		ctx = mcpgate.NewContextWithRelay(ctx, callRelay(ctx, req))
	}
	a := actorFrom(ctx)
	if a == nil {
		return errorResult("not authenticated"), nil
	}
	raw, token, err := splitConfirmation(req.Params.Arguments)
	if err != nil {
		return errorResult(mcpgate.ErrorMessage(err)), nil
	}
	raw, approvalID, err := splitArg(raw, approvalArg)
	if err != nil {
		return errorResult(mcpgate.ErrorMessage(err)), nil
	}
	if id, res, ok := g.approvalRetry(ctx, req, a, tool); ok {
		if res != nil {
			return res, nil
		}
		approvalID = id
	}
	call := mcpgate.ToolCall{Tool: tool, Arguments: raw, ApprovalID: approvalID}
	var args map[string]any
	var resumed *inputStateClaims
	if relay {
		if args, resumed, err = g.inputRetry(ctx, req, a, tool, raw, &call); err != nil {
			return toolErrorResult(err), nil
		}
	}
	// run makes the call; one whose upstream asks its 2026-07-28 caller
	// mid-call is held (heldcall.go), and asked is then the answer.
	holdable := relay && holds(mcpgate.RelayFromContext(ctx))
	run := func(call mcpgate.ToolCall) (out json.RawMessage, asked *sdk.CallToolResult, err error) {
		if holdable && args == nil {
			args, _ = callArgs(raw) // arguments it cannot read: the tool service says why
		}
		if !holdable || args == nil || !g.heldSlots.take(a.CredentialID()) {
			out, err = g.opts.Tools.CallTool(ctx, a, call)
			return out, nil, err
		}
		return g.callHeld(ctx, a, call, g.inputClaims(a, tool, args, call, ""))
	}
	var out json.RawMessage
	var asked *sdk.CallToolResult
	if resumed != nil && resumed.Held != "" {
		// A retry that answers a held call's request: the call was
		// weighed when it was made, and goes on.
		out, asked, err = g.resumeHeld(ctx, a, resumed, req.Params.InputResponses)
	} else {
		out, asked, err = run(call)
	}
	if need := (*mcpgate.ApprovalRequiredError)(nil); errors.As(err, &need) {
		if res := g.awaitApproval(ctx, req, a, need); res != nil {
			return res, nil
		}
		// Decided while the call waited: it is made again with the
		// approval, as a retry with approval_id would be, and its
		// result is this call's.
		call.ApprovalID = need.Approval.ID
		out, asked, err = run(call)
	}
	if confirm := (*mcpgate.ConfirmationRequiredError)(nil); errors.As(err, &confirm) {
		if res := g.confirm(ctx, req, a, confirm, token); res != nil {
			return res, nil
		}
		call.Confirmed = true
		out, asked, err = run(call)
	}
	if asked != nil {
		return asked, nil
	}
	if err != nil {
		return toolErrorResult(stoppingError(ctx, err)), nil
	}
	if relay {
		res := relayedResult(out)
		if len(res.InputRequests) > 0 {
			// The upstream asks the caller for input (only a caller that
			// retries is passed such a result): its state goes out sealed.
			if args == nil {
				args, _ = callArgs(raw)
			}
			res.Content = nil
			res.RequestState = g.sealInputState(a, tool, args, call, res.RequestState)
		}
		return res, nil
	}
	return structuredResult(out), nil
}

// inputRetry opens the sealed request state of a retry that answers an
// upstream's input requests, if this is one, into call: the upstream's
// own state, the caller's answers, and whether the first call had been
// confirmed. It returns the call's arguments as decoded for the binding,
// and the envelope's claims (a held call's, which call is not given, or
// nil for a first call).
func (g *Gateway) inputRetry(ctx context.Context, req *sdk.CallToolRequest, a *mcpgate.Actor, tool string, raw json.RawMessage,
	call *mcpgate.ToolCall) (map[string]any, *inputStateClaims, error) {
	if !isInputState(req.Params.RequestState) {
		return nil, nil, nil
	}
	args, err := callArgs(raw)
	if err != nil {
		return nil, nil, err
	}
	c, err := g.openInputState(req.Params.RequestState, a, tool, args)
	if err != nil {
		return nil, nil, err
	}
	if _, answered := req.Params.InputResponses[heldInputID]; c.Held != "" && !answered {
		return nil, nil, errNoHeldAnswer // told before the envelope is spent: the client retries with it
	}
	if err := g.spendInputState(ctx, c); err != nil {
		return nil, nil, err
	}
	if c.Held != "" {
		return args, c, nil
	}
	call.RequestState, call.Confirmed = c.State, call.Confirmed || c.Confirmed
	if call.ApprovalID == "" {
		call.ContinuesApproval = c.Approval
	}
	if len(req.Params.InputResponses) > 0 {
		if call.InputResponses, err = json.Marshal(req.Params.InputResponses); err != nil {
			return nil, nil, mcpgate.Errorf(mcpgate.EInvalid, "the inputResponses could not be read")
		}
	}
	return args, c, nil
}

// callArgs decodes a call's arguments for a binding (argsHash), numbers as
// written.
func callArgs(raw json.RawMessage) (map[string]any, error) {
	args := map[string]any{}
	if len(raw) == 0 || string(raw) == "null" {
		return args, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "arguments must be a JSON object")
	}
	return args, nil
}

// callRelay sends what the upstream sends during a call on the call's
// stream: its progress under the caller's token, when the caller gave one,
// and its log messages, which go-sdk filters by the level the caller
// asked for (the session's on the protocols before 2026-07-28, which for
// a stateless session is go-sdk's default, info; the request's _meta
// level on 2026-07-28, none meaning no messages). The data is the
// upstream's JSON, unchanged.
//
// Requests of the upstream to the client: on a server's endpoint at a
// 2025 protocol, sent on the call's stream (streamrelay.go), with the
// capabilities the client's session id carries; at 2026-07-28 none are
// sent (the caller retries with its input, InputRetry), and the
// capabilities are the request's _meta's; on /mcp none.
func callRelay(ctx context.Context, req *sdk.CallToolRequest) mcpgate.Relay {
	var r mcpgate.Relay
	if req.ProtocolVersion() >= newProtocol {
		r.InputRetry = true
		if c := req.ClientCapabilities(); c != nil {
			if b, err := json.Marshal(c); err == nil {
				r.Capabilities = parseClientCapabilities(b)
			}
			// go-sdk's v1 struct always writes roots; RootsV2 says whether
			// the client declared them.
			//lint:ignore SA1019 roots are relayed while the protocol still has them
			r.Capabilities.Roots = c.RootsV2 != nil
		}
	} else {
		streamRelay(ctx, &r)
	}
	if tok := req.Params.GetProgressToken(); tok != nil {
		r.Progress = func(p mcpgate.Progress) {
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok,
				Progress: p.Progress, Total: p.Total, Message: p.Message})
		}
	}
	r.Log = func(m mcpgate.LogMessage) {
		//lint:ignore SA1019 the upstream's logging is relayed while the protocol still has it
		_ = req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: sdk.LoggingLevel(m.Level), Logger: m.Logger,
			Data: json.RawMessage(m.Data)})
	}
	return r
}

// relayedResult is an upstream's tools/call result as go-sdk sends it on:
// content of every type the protocol has, isError and _meta decoded, and
// the structured content kept as the raw JSON it came as. The upstream's
// own serverInfo in _meta is dropped: the server answering the caller is
// the gateway, which names itself there (go-sdk keeps one already set).
// A result the protocol's types cannot hold is a tool error saying so.
func relayedResult(raw json.RawMessage) *sdk.CallToolResult {
	var res sdk.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return errorResult("the server's result could not be read as an MCP tool result: " + err.Error())
	}
	var sc struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if json.Unmarshal(raw, &sc) == nil && len(sc.StructuredContent) > 0 && string(sc.StructuredContent) != "null" {
		res.StructuredContent = sc.StructuredContent
	}
	if res.Content == nil {
		res.Content = []sdk.Content{}
	}
	delete(res.Meta, sdk.MetaKeyServerInfo)
	if len(res.Meta) == 0 {
		res.Meta = nil
	}
	return &res
}

// toolErrorResult is a failed call as a result the model can read, with the
// seconds to wait when there is one.
func toolErrorResult(err error) *sdk.CallToolResult {
	res := errorResult(mcpgate.ErrorMessage(err))
	if s := mcpgate.ErrorRetryAfter(err); s > 0 {
		res.Meta = sdk.Meta{"retryAfterSeconds": s}
	}
	return res
}

// structuredResult returns a tool's JSON output as structured content with
// the same JSON as text, for clients that read only text.
func structuredResult(out json.RawMessage) *sdk.CallToolResult {
	return &sdk.CallToolResult{StructuredContent: out, Content: []sdk.Content{&sdk.TextContent{Text: string(out)}}}
}

// splitConfirmation removes confirmation_token from the raw arguments.
func splitConfirmation(raw json.RawMessage) (json.RawMessage, string, error) {
	return splitArg(raw, confirmationArg)
}

// splitArg removes one of the gateway's own string arguments
// (confirmation_token, approval_id) from the raw arguments.
func splitArg(raw json.RawMessage, name string) (json.RawMessage, string, error) {
	m, err := ownArgs(raw, name)
	if err != nil {
		return nil, "", err
	}
	tokRaw, ok := m[name]
	if !ok {
		return raw, "", nil
	}
	var tok string
	if err := json.Unmarshal(tokRaw, &tok); err != nil {
		return nil, "", mcpgate.Errorf(mcpgate.EInvalid, "%s must be a string", name)
	}
	delete(m, name)
	b, _ := json.Marshal(m)
	return b, tok, nil
}

// hasOwnArg reports whether splitArg would find something to do in raw for
// name: the argument itself at the top level, or arguments that are not an
// object although they mention it. A value that merely contains the name
// (a text about approvals) is not the argument.
func hasOwnArg(raw json.RawMessage, name string) bool {
	m, err := ownArgs(raw, name)
	_, ok := m[name]
	return err != nil || ok
}

// ownArgs decodes raw as an object when it mentions name (the common call
// does not, and pays only for the scan), else returns nil.
func ownArgs(raw json.RawMessage, name string) (map[string]json.RawMessage, error) {
	if !strings.Contains(string(raw), name) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "arguments must be a JSON object")
	}
	return m, nil
}
