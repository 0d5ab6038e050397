package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// CallTool runs a tool for the dashboard; see Call.
func (g *Gateway) CallTool(ctx context.Context, workspaceID, userID, tool string, args json.RawMessage, confirmed bool) (json.RawMessage, error) {
	return g.Call(ctx, Call{WorkspaceID: workspaceID, UserID: userID, Tool: tool, Arguments: args, Source: "dashboard", Confirmed: confirmed})
}

// Call is one tool call on behalf of a workspace member.
type Call struct {
	WorkspaceID string
	UserID      string
	KeyID       string // empty for dashboard calls
	Tool        string
	Arguments   json.RawMessage
	// Source is "mcp" or "dashboard", for the audit log.
	Source string
	// Confirmed says a human has confirmed this exact call in the dashboard
	// (a confirmation dialog); MCP calls prove it with a token instead.
	Confirmed bool
}

// ErrConfirmationRequired is returned by Call for a call that needs a
// human's confirmation and was not confirmed.
var ErrConfirmationRequired = mcpgate.Errorf(mcpgate.EConflict, "this action needs confirmation")

// Call runs a tool outside MCP (the dashboard): the workspace's policy applies
// (disabled tools are refused), a tool that needs confirmation runs only when
// call.Confirmed, and the call is audited like an MCP call. It returns the
// tool's structured output as JSON.
func (g *Gateway) Call(ctx context.Context, call Call) (json.RawMessage, error) {
	t, ok := g.opts.Registry.Tool(call.Tool)
	if !ok {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "no tool named %q", call.Tool)
	}
	wt, err := g.workspace(ctx, call.WorkspaceID)
	if err != nil {
		return nil, err
	}
	p := wt.policy[t.Name]
	id := &Identity{WorkspaceID: call.WorkspaceID, UserID: call.UserID, KeyID: call.KeyID, Scope: mcpgate.ScopeFull}
	if !p.Enabled {
		err := mcpgate.Errorf(mcpgate.EForbidden, "%s is turned off in this workspace; an owner or admin can turn it on in Settings", t.Title)
		g.record(ctx, mcpgate.AuditEvent{WorkspaceID: id.WorkspaceID, ActorID: id.UserID, Kind: "tool_call",
			Action: t.Name, Outcome: mcpgate.OutcomeDenied, Message: mcpgate.ErrorMessage(err), Source: call.Source})
		return nil, err
	}
	args, err := t.Decode(call.Arguments)
	if err != nil {
		g.audit(ctx, id, t, nil, call.Source, 0, time.Now(), err)
		return nil, err
	}
	if p.NeedsConfirmation && !call.Confirmed {
		return nil, ErrConfirmationRequired
	}
	out, err := g.run(ctx, id, t, args, call.Source)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// run opens the workspace's credential, calls the tool under its deadline,
// and audits the call. args are already decoded and validated.
func (g *Gateway) run(ctx context.Context, id *Identity, t *connectors.Tool, args map[string]any, source string) (any, error) {
	start := time.Now()
	if g.opts.Audit != nil && g.opts.Audit.Saturated() {
		// Fail closed: every call must be auditable, and the audit log has
		// been unable to write for too long.
		g.metrics.ToolCall(t.Name, mcpgate.OutcomeError, 0, 0)
		return nil, mcpgate.Errorf(mcpgate.EUnavailable, "the gateway cannot record calls in its audit log right now, "+
			"so nothing was done; try again shortly")
	}
	c, _ := g.opts.Registry.ConnectorOf(t.Name)
	cred, err := g.opts.Backend.OpenCredential(ctx, id.WorkspaceID, c.Name())
	if err != nil {
		if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
			err = mcpgate.Errorf(mcpgate.EInvalid, "No %s API key is connected to this workspace yet. Ask a workspace owner "+
				"or admin to connect one on the dashboard: %s/app/w/%s/connections", strings.ToUpper(c.Name()), g.opts.PublicURL, id.WorkspaceID)
		} else {
			err = mcpgate.WrapError(mcpgate.EUnavailable, err, "the gateway cannot read this workspace's credential right now; try again shortly")
		}
		g.audit(ctx, id, t, args, source, 0, start, err)
		return nil, err
	}
	timeout := g.opts.CallTimeout
	if t.Name == "e2b_find_idle_sandboxes" {
		timeout *= 2
	}
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	upstreamStart := time.Now()
	out, err := t.CallDecoded(callCtx, cred, args)
	upstream := time.Since(upstreamStart)
	cancel()
	if err != nil && errors.Is(err, context.DeadlineExceeded) && mcpgate.ErrorCode(err) == mcpgate.EInternal {
		err = mcpgate.WrapError(mcpgate.EUnavailable, err, "the call took too long and was stopped; try again")
	}
	status := connectors.UpstreamStatus(err)
	if err == nil {
		status = 200
	} else if status == 401 {
		// Tell the dashboard the stored key stopped working. Off the call
		// path: the caller already has its answer.
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = g.opts.Backend.MarkAuthFailure(ctx, id.WorkspaceID, c.Name())
		}()
	}
	if status >= 400 {
		g.metrics.UpstreamError(status)
	}
	g.audit(ctx, id, t, args, source, status, start, err)
	outcome := mcpgate.OutcomeOK
	if err != nil {
		outcome = mcpgate.OutcomeError
	}
	total := time.Since(start)
	g.metrics.ToolCall(t.Name, outcome, total-upstream, upstream)
	return out, err
}

// audit records one tool call.
func (g *Gateway) audit(ctx context.Context, id *Identity, t *connectors.Tool, args map[string]any, source string, status int, start time.Time, err error) {
	ev := mcpgate.AuditEvent{WorkspaceID: id.WorkspaceID, ActorID: id.UserID, KeyID: id.KeyID, Kind: "tool_call",
		Action: t.Name, Arguments: Redact(args), Outcome: mcpgate.OutcomeOK, UpstreamStatus: status,
		DurationMS: float64(time.Since(start).Microseconds()) / 1000, Source: source}
	if err != nil {
		ev.Outcome = mcpgate.OutcomeError
		ev.Message = mcpgate.ErrorMessage(err)
		if mcpgate.ErrorCode(err) == mcpgate.EInternal {
			g.log.ErrorContext(ctx, "tool call failed", "tool", t.Name, "workspace_id", id.WorkspaceID, "err", err)
		}
	}
	g.record(ctx, ev)
}

// sensitiveArg reports whether an argument's value must not be stored:
// environment variables and anything named like a credential.
func sensitiveArg(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"env", "secret", "token", "password", "key", "auth", "credential"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// Redact returns a copy of tool arguments safe for the audit log: values of
// sensitive arguments are replaced (the keys are kept, so the log still says
// which were given), and long strings are cut.
func Redact(args map[string]any) map[string]any {
	if len(args) == 0 {
		return nil
	}
	out := make(map[string]any, len(args))
	for k, v := range args {
		if k == confirmationArg {
			continue
		}
		if sensitiveArg(k) {
			if m, ok := v.(map[string]any); ok {
				r := make(map[string]any, len(m))
				for mk := range m {
					r[mk] = "[redacted]"
				}
				out[k] = r
			} else {
				out[k] = "[redacted]"
			}
			continue
		}
		if s, ok := v.(string); ok && len(s) > 256 {
			v = s[:256] + "…"
		}
		out[k] = v
	}
	return out
}

// mcpHandler adapts a connector tool to the SDK, adding confirmation.
func (g *Gateway) mcpHandler(t *connectors.Tool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		id := identityFrom(ctx)
		if id == nil {
			return errorResult("not authenticated"), nil
		}
		raw, token, err := splitConfirmation(req.Params.Arguments)
		if err != nil {
			return errorResult(mcpgate.ErrorMessage(err)), nil
		}
		args, err := t.Decode(raw)
		if err != nil {
			g.audit(ctx, id, t, nil, "mcp", 0, time.Now(), err)
			g.metrics.ToolCall(t.Name, mcpgate.OutcomeError, 0, 0)
			return errorResult(mcpgate.ErrorMessage(err)), nil
		}
		wt, err := g.workspace(ctx, id.WorkspaceID)
		if err != nil {
			return errorResult("the gateway cannot read this workspace's settings right now; try again shortly"), nil
		}
		if wt.policy[t.Name].NeedsConfirmation {
			if res := g.confirm(ctx, req, id, t, args, token); res != nil {
				return res, nil
			}
		}
		out, err := g.run(ctx, id, t, args, "mcp")
		if err != nil {
			res := errorResult(mcpgate.ErrorMessage(err))
			if s := mcpgate.ErrorRetryAfter(err); s > 0 {
				res.Meta = sdk.Meta{"retryAfterSeconds": s}
			}
			return res, nil
		}
		return structuredResult(out)
	}
}

// structuredResult returns output as structured content with the same JSON
// as text, for clients that read only text.
func structuredResult(out any) (*sdk.CallToolResult, error) {
	b, err := json.Marshal(out)
	if err != nil {
		return errorResult("internal error: the tool's output could not be encoded"), nil
	}
	return &sdk.CallToolResult{StructuredContent: json.RawMessage(b), Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}, nil
}

// splitConfirmation removes confirmation_token from the raw arguments.
func splitConfirmation(raw json.RawMessage) (json.RawMessage, string, error) {
	if !strings.Contains(string(raw), confirmationArg) {
		return raw, "", nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, "", mcpgate.Errorf(mcpgate.EInvalid, "arguments must be a JSON object")
	}
	tokRaw, ok := m[confirmationArg]
	if !ok {
		return raw, "", nil
	}
	var tok string
	if err := json.Unmarshal(tokRaw, &tok); err != nil {
		return nil, "", mcpgate.Errorf(mcpgate.EInvalid, "confirmation_token must be a string")
	}
	delete(m, confirmationArg)
	b, _ := json.Marshal(m)
	return b, tok, nil
}
