package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// Upstream servers' tools join the workspace's tools: they are listed,
// switched, weighed (scope, approval, confirmation) and audited by the same
// code as a connector's. Each is represented on that path by a
// connectors.Tool made from its declared hints, which carries no handler:
// its calls go to the server through the upstream pool instead.

// upstreamTool is one tool of a server as the cached policy holds it.
type upstreamTool struct {
	// tool stands for it on the call path (name, title, hints).
	tool *connectors.Tool
	// info is what the workspace sees of it, its policy applied.
	info mcpgate.ToolInfo
	// server and name route a call: the server's name in the workspace
	// and the tool's own name there.
	server, name string
}

// upstreamServer is what a call needs of a server: where it is, and its
// credential, sealed (opened for each call, never cached in plain text).
type upstreamServer struct {
	url     string
	headers store.SealedHeaders
	// oauth says the server signs in with OAuth: its calls get the bearer
	// of the grant (the others need nothing more than headers).
	oauth bool
	// down is set while the server is down: its tools stay known (a call
	// by name is told why it cannot run) but are in no tool set.
	down *serverDown
	// serverRelays are the server's requests to the client it may have
	// relayed (servers_relays.go).
	serverRelays
}

// serverDown is since when, and why, a server is down.
type serverDown struct {
	since  time.Time
	reason string
}

// serverUp reports whether u's server is up: a tool of a server that is
// down is left out of every tool set.
func (wp *workspacePolicy) serverUp(u *upstreamTool) bool {
	srv, ok := wp.servers[u.server]
	return ok && srv.down == nil
}

// loadUpstream reads a workspace's servers' tools into wp: the tools
// published (listed, not quarantined, named, of an enabled server) with
// their policy, and the servers' URLs and sealed credentials.
func (s *Tools) loadUpstream(ctx context.Context, wp *workspacePolicy) error {
	routes, err := s.db.FindServerTools(ctx, wp.id, "")
	if err != nil {
		return err
	}
	if len(routes) == 0 {
		return nil
	}
	servers, err := s.db.FindServers(ctx, wp.id)
	if err != nil {
		return err
	}
	sealed, err := s.db.FindSealedServerHeaders(ctx, wp.id)
	if err != nil {
		return err
	}
	wp.servers = map[string]upstreamServer{}
	for _, srv := range servers {
		if srv.Enabled {
			wp.servers[srv.Name] = upstreamServer{url: srv.URL, headers: sealed[srv.Name], down: downOf(&srv), oauth: srv.OAuth,
				serverRelays: relaysOf(&srv)}
		}
	}
	wp.upstream = map[string]*upstreamTool{}
	for _, r := range routes {
		if _, ok := wp.servers[r.Server]; !ok || !r.ServerEnabled || !r.Listed || r.Quarantined || r.ExposedName == "" {
			continue
		}
		if _, taken := wp.policy[r.ExposedName]; taken {
			continue // a connector's tool: names are assigned so this never happens
		}
		u, err := newUpstreamTool(r)
		if err != nil {
			s.log.WarnContext(ctx, "stored upstream tool definition unreadable", "server", r.Server, "tool", r.Name, "err", err)
			continue
		}
		wp.upstream[r.ExposedName] = u
		wp.upstreamOrder = append(wp.upstreamOrder, r.ExposedName)
		p := mcpgate.ToolPolicy{Tool: r.ExposedName, Enabled: r.Enabled, Approval: r.Approval}
		if !p.Approval.Valid() {
			p.Approval = mcpgate.ApprovalHuman // what a person must decide when the row says nothing readable
		}
		wp.policy[r.ExposedName] = p
	}
	return nil
}

// downOf is since when and why a stored server is down, nil while up.
func downOf(srv *store.UpstreamServer) *serverDown {
	if srv.Health != mcpgate.HealthError {
		return nil
	}
	since := srv.UpdatedAt
	if srv.DownSince != nil {
		since = *srv.DownSince
	}
	return &serverDown{since: since, reason: srv.LastError}
}

// newUpstreamTool makes the call path's view of a stored tool. The hints
// are the declared ones, with the specification's defaults for those not
// declared: a tool that does not say it is read-only is not, and one that
// does not say it is harmless may destroy.
func newUpstreamTool(r store.ServerToolRoute) (*upstreamTool, error) {
	def, err := upstream.ParseTool(r.Definition)
	if err != nil {
		return nil, err
	}
	a := def.Annotations
	title := def.Title
	if title == "" {
		title = a.Title
	}
	readOnly := a.ReadOnlyHint()
	destructive := !readOnly && a.DestructiveHint()
	if title == "" {
		title = r.Name // describe, the dashboard and approval pages name a call by it
	}
	t := &connectors.Tool{Spec: connectors.Spec{Name: r.ExposedName, Title: title, Description: def.Description,
		Annotations: connectors.Annotations{ReadOnly: readOnly, Destructive: destructive, Idempotent: a.IdempotentHint(),
			OpenWorld: a.OpenWorldHint()}}}
	declared := map[string]any{}
	if len(a.Raw) > 0 {
		_ = json.Unmarshal(a.Raw, &declared)
	}
	info := mcpgate.ToolInfo{Name: r.ExposedName, Title: title, Description: def.Description, Enabled: r.Enabled,
		Approval: r.Approval, ReadOnly: readOnly, Destructive: destructive, Annotations: declared,
		Server: r.Server, ServerTool: r.Name, Definition: def.Raw}
	return &upstreamTool{tool: t, info: info, server: r.Server, name: r.Name}, nil
}

// infoOf is a tool as the workspace sees it under policy p, whether a
// connector's or a server's.
func (s *Tools) infoOf(wp *workspacePolicy, t *connectors.Tool, p mcpgate.ToolPolicy) mcpgate.ToolInfo {
	if u := wp.upstream[t.Name]; u != nil && u.tool == t {
		info := u.info
		info.Enabled, info.Approval = p.Enabled, p.Approval
		return info
	}
	return s.toolInfo(t, p)
}

// updateUpstreamTool is UpdateTool for a server's tool, named by its
// exposed name: the catalog row is the one stored state, changed as the
// server service changes it (turning a tool on pins its definition).
func (s *Tools) updateUpstreamTool(ctx context.Context, a *mcpgate.Actor, name string, u mcpgate.ToolUpdate) (*mcpgate.ToolInfo, error) {
	routes, err := s.db.FindServerTools(ctx, a.WorkspaceID, "")
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(routes, func(r store.ServerToolRoute) bool { return r.ExposedName == name })
	if i < 0 {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "no tool named %q", name)
	}
	route := routes[i]
	if u.Approval != nil && !u.Approval.Valid() {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "approval must be none, model or human")
	}
	var before, after store.UpstreamTool
	err = changeServerTool(ctx, s.db, s.opts.Keyring, a, route.Server, route.Name, func(t *store.UpstreamTool) error {
		if t.ExposedName != name {
			return mcpgate.Errorf(mcpgate.EConflict, "the server's tools were changed meanwhile; reload and try again")
		}
		before = *t
		if err := applyToolUpdate(t, u); err != nil {
			return err
		}
		after = *t
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.invalidate(InvalidatePolicy, a.WorkspaceID)
	action := toolUpdateAction(before.Enabled, after.Enabled)
	args := map[string]any{"tool": name, "server": route.Server, "server_tool": route.Name, "enabled": after.Enabled,
		"approval": string(after.Approval)}
	if after.Pin != "" && after.Pin != before.Pin {
		args["pin"] = after.Pin
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, action, args))
	route.UpstreamTool = after
	ut, err := newUpstreamTool(route)
	if err != nil {
		return nil, err
	}
	return &ut.info, nil
}

// callUpstream is CallTool for a server's tool: refused, weighed and asked
// for approval exactly as a connector's tool is, then relayed.
func (s *Tools) callUpstream(ctx context.Context, a *mcpgate.Actor, wp *workspacePolicy, u *upstreamTool, call mcpgate.ToolCall) (json.RawMessage, error) {
	t := u.tool
	p := wp.policy[t.Name]
	if down := wp.servers[u.server].down; down != nil && p.Enabled {
		err := errServerDown(u.server, down.since, down.reason, s.opts.UpstreamHealth.ProbeEvery())
		s.auditUpstream(ctx, a, u, nil, 0, s.now(), mcpgate.OutcomeError, err)
		s.metrics.ToolCall(upstreamMetric, mcpgate.OutcomeError, 0, 0)
		return nil, err
	}
	if !callable(t, p, a.Scope) {
		err := s.refusal(t, p, a)
		s.auditUpstream(ctx, a, u, nil, 0, s.now(), mcpgate.OutcomeDenied, err)
		s.metrics.ToolCall(upstreamMetric, mcpgate.OutcomeDenied, 0, 0)
		return nil, err
	}
	raw := call.Arguments
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{}`)
	}
	args, err := decodeArguments(raw)
	if err != nil {
		err := mcpgate.Errorf(mcpgate.EInvalid, "the arguments of %s must be a JSON object", t.Name)
		s.auditUpstream(ctx, a, u, nil, 0, s.now(), mcpgate.OutcomeError, err)
		s.metrics.ToolCall(upstreamMetric, mcpgate.OutcomeError, 0, 0)
		return nil, err
	}
	// What is sent is what was weighed: the arguments as decoded, written
	// again. Relaying the caller's text would let a member given twice be
	// read one way by the approval (the last one) and another by a server
	// that keeps the first.
	if raw, err = json.Marshal(args); err != nil {
		return nil, mcpgate.WrapError(mcpgate.EInvalid, err, "the arguments could not be encoded")
	}
	var out json.RawMessage
	var ask *approvalAsk
	err = s.locks.Do(ctx, a.UserID, func(ctx context.Context, h *store.Held) error {
		var err error
		ask, err = s.weigh(ctx, h, a, t, wp, call, args)
		if err != nil || ask != nil {
			return err
		}
		out, err = s.runUpstream(ctx, a, wp, u, raw, args, call)
		return err
	})
	if err != nil {
		return nil, err
	}
	if ask != nil {
		ap, err := s.approvals.requestApproval(ctx, a, t, args, ask.follows, ask.reason)
		if err != nil {
			return nil, err
		}
		return nil, &mcpgate.ApprovalRequiredError{Tool: s.infoOf(wp, t, p), Approval: ap}
	}
	return out, nil
}

// upstreamMetric is the tool label of every upstream call: the names are
// the workspaces' own, too many for a metric's label.
const upstreamMetric = "upstream"

// runUpstream opens the server's credential and relays the call under the
// gateway's deadline and answer cap, on a session of the workspace,
// server and person (and client session, on the endpoint of a server of
// client scope), and audits it.
func (s *Tools) runUpstream(ctx context.Context, a *mcpgate.Actor, wp *workspacePolicy, u *upstreamTool, raw json.RawMessage,
	args map[string]any, retry mcpgate.ToolCall) (json.RawMessage, error) {
	start := time.Now()
	if s.audit.Saturated() {
		s.metrics.ToolCall(upstreamMetric, mcpgate.OutcomeError, 0, 0)
		return nil, mcpgate.Errorf(mcpgate.EUnavailable, "the gateway cannot record calls in its audit log right now, "+
			"so nothing was done; try again shortly")
	}
	fail := func(err error) (json.RawMessage, error) {
		s.auditUpstream(ctx, a, u, args, 0, start, mcpgate.OutcomeError, err)
		s.metrics.ToolCall(upstreamMetric, mcpgate.OutcomeError, 0, 0)
		return nil, err
	}
	srv, ok := wp.servers[u.server]
	if !ok || s.opts.Upstreams == nil {
		return fail(mcpgate.Errorf(mcpgate.EUnavailable, "this gateway cannot reach upstream servers"))
	}
	headers, err := srv.headers.Open(ctx, s.opts.Keyring, a.WorkspaceID)
	if err != nil {
		return fail(&mcpgate.Error{Code: mcpgate.EUnavailable, RetryAfter: 5, Err: err,
			Message: "the gateway cannot read this server's credential right now; try again in a few seconds"})
	}
	timeout := s.opts.CallTimeout
	callCtx, cancel := hopContext(ctx, timeout)
	req := upstream.CallRequest{Tool: u.name, Arguments: raw, Limits: upstream.Limits{CallTimeout: timeout,
		MaxAnswerBytes: s.opts.UpstreamAnswerBytes}, RequestState: retry.RequestState, InputResponses: retry.InputResponses}
	relay := mcpgate.RelayFromContext(ctx)
	caps := relayCapabilities(relay, srv.relays)
	redact := upstream.Redactor(upstream.Target{URL: srv.url, Headers: headers})
	if caps != (upstream.Capabilities{}) {
		req.OnRequest = s.clientRequests(a, u, srv, caps.ClientCapabilities, relay, redact)
	}
	if len(retry.InputResponses) > 0 {
		s.auditInputResponses(ctx, a, u, retry.InputResponses)
	}
	if fn := relay.Progress; fn != nil {
		req.OnProgress = func(p upstream.Progress) {
			fn(mcpgate.Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
		}
	}
	if fn := relay.Log; fn != nil {
		req.OnLog = func(m upstream.LogMessage) {
			fn(mcpgate.LogMessage{Level: m.Level, Logger: m.Logger, Data: m.Data})
		}
	}
	upstreamStart := time.Now()
	key := UpstreamKey{WorkspaceID: a.WorkspaceID, Server: u.server, UserID: a.UserID,
		ClientSession: mcpgate.ClientSessionFromContext(ctx, u.server), Capabilities: caps}
	var res *upstream.CallResult
	target := upstream.Target{URL: srv.url, Headers: headers, Capabilities: caps}
	err = s.upstreamCredentials().doFor(callCtx, a, u.server, srv.oauth, target, func(t upstream.Target) error {
		var err error
		res, err = s.opts.Upstreams.Call(callCtx, key, t, req)
		return err
	})
	took := time.Since(upstreamStart)
	cancel()
	if s.opts.UpstreamHealth.Outcome(ctx, a.WorkspaceID, u.server, err, ctx.Err() != nil) {
		s.invalidate(InvalidatePolicy, a.WorkspaceID)
	}
	if err != nil {
		var rpc *upstream.RPCError
		if !errors.As(err, &rpc) && ctx.Err() == nil {
			// The hop's detail (credential values already replaced) is for
			// the operator; the caller gets its reason.
			s.log.WarnContext(ctx, "upstream call failed", "server", u.server, "workspace_id", a.WorkspaceID, "err", err)
		}
		err = s.upstreamError(ctx, u, err)
		var ue *upstream.Error
		status := 0
		if errors.As(err, &ue) {
			status = ue.Status
		}
		if status >= 400 {
			s.metrics.UpstreamError(status)
		}
		s.auditUpstream(ctx, a, u, args, status, start, mcpgate.OutcomeError, err)
		s.metrics.ToolCall(upstreamMetric, mcpgate.OutcomeError, time.Since(start)-took, took)
		return nil, err
	}
	if caps.PassInputRequests {
		if msg := s.auditInputRequests(ctx, a, u, srv, caps.ClientCapabilities, res.Raw, redact); msg != "" {
			err := mcpgate.Errorf(mcpgate.EForbidden, "the server asked for input the gateway does not pass on: %s", msg)
			s.auditUpstream(ctx, a, u, args, 200, start, mcpgate.OutcomeDenied, err)
			s.metrics.ToolCall(upstreamMetric, mcpgate.OutcomeDenied, time.Since(start)-took, took)
			return nil, err
		}
	}
	outcome := mcpgate.OutcomeOK
	var toolErr error
	if res.IsError {
		// The server ran the call and says it failed: the caller gets the
		// result as it is; the audit log keeps that it failed, not what the
		// server wrote (it may quote the arguments).
		outcome, toolErr = mcpgate.OutcomeError, mcpgate.Errorf(mcpgate.EUpstream, "the tool answered with an error result")
	}
	s.auditUpstream(ctx, a, u, args, 200, start, outcome, toolErr)
	s.metrics.ToolCall(upstreamMetric, outcome, time.Since(start)-took, took)
	return res.Raw, nil
}

// upstreamError is what the caller is told of a failed relay: the server's
// own JSON-RPC message as a tool error, the hop's reason otherwise. Neither
// holds a credential value (the pool replaces them).
func (s *Tools) upstreamError(ctx context.Context, u *upstreamTool, err error) error {
	var rpc *upstream.RPCError
	var hop *upstream.Error
	var cred *CredentialError
	switch {
	case errors.As(err, &cred):
		return err // who must connect, and where
	case errors.As(err, &rpc):
		return &mcpgate.Error{Code: mcpgate.EUpstream, Err: err,
			Message: "the server " + u.server + " refused the call: " + cutText(rpc.Message, 500)}
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return mcpgate.WrapError(mcpgate.EUnavailable, err, "the call took too long and was stopped; try again")
	case errors.As(err, &hop):
		code := mcpgate.ErrorCode(err)
		if hop.Kind == upstream.KindTimeout {
			code = mcpgate.EUnavailable
		}
		return &mcpgate.Error{Code: code, Err: err, Message: "the server " + u.server + " could not answer the call: " + hop.Message}
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return mcpgate.WrapError(mcpgate.EUpstream, err, "the server "+u.server+" could not answer the call")
}

// auditUpstream records one call of a server's tool under its exposed
// name; the message names the server and the tool's own name there.
func (s *Tools) auditUpstream(ctx context.Context, a *mcpgate.Actor, u *upstreamTool, args map[string]any, status int,
	start time.Time, outcome mcpgate.Outcome, err error) {
	ev := mcpgate.NewToolEvent(a, u.tool.Name, args)
	ev.UpstreamStatus = status
	ev.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	ev.Outcome = outcome
	ev.Message = "server " + u.server + ", tool " + u.name
	if err != nil {
		ev.Message += ": " + mcpgate.ErrorMessage(err)
		if mcpgate.ErrorCode(err) == mcpgate.EInternal {
			s.log.ErrorContext(ctx, "upstream tool call failed", "server", u.server, "workspace_id", a.WorkspaceID, "err", err)
		}
	}
	s.record(ctx, ev)
}

// hopContext is the context of a relayed call: the caller's cancellation
// and the gateway's deadline, none of the caller's values. A call that
// comes in through go-sdk's server carries that request's protocol state
// in its context, which go-sdk's client would read as its own and
// negotiate the upstream session with (a 2026-07-28 caller made the
// gateway initialize an older server at that version, refused).
func hopContext(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := context.AfterFunc(parent, func() { cancel(context.Cause(parent)) })
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	return ctx, func() {
		stop()
		cancelTimeout()
		cancel(nil)
	}
}

// decodeArguments reads a call's arguments, a JSON object, keeping numbers
// as written (an id past 2^53 is not rounded on its way to the server).
func decodeArguments(raw json.RawMessage) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return nil, err
	}
	if args == nil {
		return nil, errors.New("arguments are null")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the arguments")
	}
	return args, nil
}
