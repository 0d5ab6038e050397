package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/store"
)

// workspacePolicy is a workspace's effective tool policy and, built lazily,
// its tool sets (one per key scope). It is immutable once built, apart from
// the sets, and replaced whole on invalidation.
type workspacePolicy struct {
	id     string
	policy map[string]mcpgate.ToolPolicy // every tool, defaults applied
	// guardrails are the workspace's limits, loaded and invalidated with
	// the policy.
	guardrails mcpgate.Guardrails
	// upstream are the servers' published tools by exposed name (their
	// policy is in policy too), in the servers' and tools' order; servers
	// the enabled servers, for their calls.
	upstream      map[string]*upstreamTool
	upstreamOrder []string
	servers       map[string]upstreamServer
	mu            sync.Mutex
	sets          map[mcpgate.Scope]*mcpgate.ToolSet
}

// effectivePolicy applies a workspace's stored settings over the tools'
// defaults.
func effectivePolicy(tools []*connectors.Tool, stored map[string]mcpgate.ToolPolicy) map[string]mcpgate.ToolPolicy {
	out := make(map[string]mcpgate.ToolPolicy, len(tools))
	for _, t := range tools {
		p, ok := stored[t.Name]
		if !ok {
			p = mcpgate.ToolPolicy{Tool: t.Name, Enabled: t.DefaultEnabled, Approval: t.DefaultApprovalMode()}
		}
		if !p.Approval.Valid() {
			p.Approval = mcpgate.ApprovalNone
		}
		out[t.Name] = p
	}
	return out
}

// workspace returns the workspace's cached policy, loading it on a miss
// (the cache applies the trust rules: see internal/trustcache).
func (s *Tools) workspace(ctx context.Context, workspaceID string) (*workspacePolicy, error) {
	wp, err := s.policies.Get(ctx, workspaceID, func(ctx context.Context) (*workspacePolicy, error) {
		stored, err := s.db.ToolPolicies(ctx, workspaceID)
		if err != nil {
			return nil, err
		}
		guardrails, err := s.db.Guardrails(ctx, workspaceID)
		if err != nil {
			return nil, err
		}
		wp := &workspacePolicy{id: workspaceID, policy: effectivePolicy(s.opts.Registry.Tools(), stored), guardrails: guardrails,
			sets: map[mcpgate.Scope]*mcpgate.ToolSet{}}
		if err := s.loadUpstream(ctx, wp); err != nil {
			return nil, err
		}
		return wp, nil
	})
	if err != nil {
		return nil, &mcpgate.Error{Code: mcpgate.EUnavailable, RetryAfter: 5, Err: fmt.Errorf("load tool policy: %w", err),
			Message: "the gateway cannot read this workspace's settings right now; try again in a few seconds"}
	}
	return wp, nil
}

func (s *Tools) toolInfo(t *connectors.Tool, p mcpgate.ToolPolicy) mcpgate.ToolInfo {
	c, _ := s.opts.Registry.ConnectorOf(t.Name)
	return mcpgate.ToolInfo{Name: t.Name, Connector: c.Name(), Title: t.Title, Description: t.Description,
		Enabled: p.Enabled, Approval: p.Approval, CostsMoney: t.CostsMoney,
		ReadOnly: t.Annotations.ReadOnly, Destructive: t.Annotations.Destructive, OffByDefault: !t.DefaultEnabled,
		Annotations: map[string]any{"readOnlyHint": t.Annotations.ReadOnly, "destructiveHint": t.Annotations.Destructive,
			"idempotentHint": t.Annotations.Idempotent, "openWorldHint": t.Annotations.OpenWorld, "title": t.Title}}
}

// Tools implements mcpgate.ToolService.
func (s *Tools) Tools(ctx context.Context, a *mcpgate.Actor) ([]mcpgate.ToolInfo, error) {
	wp, err := s.workspace(ctx, a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	var out []mcpgate.ToolInfo
	for _, t := range s.opts.Registry.Tools() {
		out = append(out, s.toolInfo(t, wp.policy[t.Name]))
	}
	for _, name := range wp.upstreamOrder {
		u := wp.upstream[name]
		out = append(out, s.infoOf(wp, u.tool, wp.policy[name]))
	}
	return out, nil
}

// callable reports whether a key of the given scope may see and call a tool:
// the workspace has it enabled, and it is read-only or the scope is full.
func callable(t *connectors.Tool, p mcpgate.ToolPolicy, scope mcpgate.Scope) bool {
	return p.Enabled && (scope == mcpgate.ScopeFull || t.Annotations.ReadOnly)
}

// ToolSet implements mcpgate.ToolService. The set is built once per policy
// version and scope, so that the MCP endpoint can cache its server on it.
func (s *Tools) ToolSet(ctx context.Context, a *mcpgate.Actor) (*mcpgate.ToolSet, error) {
	wp, err := s.workspace(ctx, a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	wp.mu.Lock()
	defer wp.mu.Unlock()
	if set := wp.sets[a.Scope]; set != nil {
		return set, nil
	}
	set := &mcpgate.ToolSet{WorkspaceID: wp.id, Scope: a.Scope, All: map[string]mcpgate.ToolInfo{}}
	for _, t := range s.opts.Registry.Tools() {
		info := s.toolInfo(t, wp.policy[t.Name])
		set.All[t.Name] = info
		if callable(t, wp.policy[t.Name], a.Scope) {
			set.Tools = append(set.Tools, info)
		}
	}
	for _, name := range wp.upstreamOrder {
		u := wp.upstream[name]
		info := s.infoOf(wp, u.tool, wp.policy[name])
		set.All[name] = info
		if callable(u.tool, wp.policy[name], a.Scope) && wp.serverUp(u) {
			set.Tools = append(set.Tools, info)
		}
	}
	wp.sets[a.Scope] = set
	return set, nil
}

// UpdateTool implements mcpgate.ToolService.
func (s *Tools) UpdateTool(ctx context.Context, a *mcpgate.Actor, name string, u mcpgate.ToolUpdate) (*mcpgate.ToolInfo, error) {
	if err := s.requireAdminChange(ctx, a); err != nil {
		return nil, err
	}
	t, ok := s.opts.Registry.Tool(name)
	if !ok {
		return s.updateUpstreamTool(ctx, a, name, u)
	}
	before, err := s.workspace(ctx, a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	prev := before.policy[name]
	p := prev
	if u.Enabled != nil {
		p.Enabled = *u.Enabled
	}
	if u.Approval != nil {
		if !u.Approval.Valid() {
			return nil, mcpgate.Errorf(mcpgate.EInvalid, "approval must be none, model or human")
		}
		p.Approval = *u.Approval
	}
	if err := s.db.SetToolPolicy(ctx, a.WorkspaceID, a.UserID, p); err != nil {
		return nil, err
	}
	s.invalidate(InvalidatePolicy, a.WorkspaceID)
	s.record(ctx, mcpgate.NewAdminEvent(a, toolUpdateAction(prev.Enabled, p.Enabled), map[string]any{"tool": name, "enabled": p.Enabled, "approval": string(p.Approval)}))
	info := s.toolInfo(t, p)
	return &info, nil
}

// toolUpdateAction is the audit action of a tool's policy change: enabled or
// disabled when the switch moved, updated otherwise (connectors' and
// upstream servers' tools alike).
func toolUpdateAction(wasEnabled, enabled bool) mcpgate.AdminAction {
	switch {
	case !wasEnabled && enabled:
		return mcpgate.ActionToolEnabled
	case wasEnabled && !enabled:
		return mcpgate.ActionToolDisabled
	}
	return mcpgate.ActionToolUpdated
}

// CallTool implements mcpgate.ToolService.
func (s *Tools) CallTool(ctx context.Context, a *mcpgate.Actor, call mcpgate.ToolCall) (json.RawMessage, error) {
	t, ok := s.opts.Registry.Tool(call.Tool)
	wp, err := s.workspace(ctx, a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	if !ok {
		if u := wp.upstream[call.Tool]; u != nil {
			return s.callUpstream(ctx, a, wp, u, call)
		}
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "no tool named %q", call.Tool)
	}
	p := wp.policy[t.Name]
	if !callable(t, p, a.Scope) {
		err := s.refusal(t, p, a)
		ev := mcpgate.NewToolEvent(a, t.Name, nil)
		ev.Outcome, ev.Message = mcpgate.OutcomeDenied, mcpgate.ErrorMessage(err)
		s.record(ctx, ev)
		s.metrics.ToolCall(t.Name, mcpgate.OutcomeDenied, 0, 0)
		return nil, err
	}
	args, err := t.Decode(call.Arguments)
	if err != nil {
		s.auditCall(ctx, a, t, nil, 0, s.now(), err)
		s.metrics.ToolCall(t.Name, mcpgate.OutcomeError, 0, 0)
		return nil, err
	}
	var out any
	var ask *approvalAsk
	err = s.locks.Do(ctx, a.UserID, func(ctx context.Context, h *store.Held) error {
		var err error
		if err = s.lockChanged(ctx, h, a, t, args); err != nil {
			return err
		}
		ask, err = s.weigh(ctx, h, a, t, wp, call, args)
		if err != nil || ask != nil {
			return err
		}
		out, err = s.run(ctx, a, t, args)
		return err
	})
	if err != nil {
		return nil, err
	}
	if ask != nil {
		// Asked outside the locks: asking reads the upstream for a summary
		// and changes nothing there; the call with the approval is weighed
		// again, under them, when it comes back.
		ap, err := s.approvals.requestApproval(ctx, a, t, args, ask.follows, ask.reason)
		if err != nil {
			return nil, err
		}
		return nil, &mcpgate.ApprovalRequiredError{Tool: s.toolInfo(t, p), Approval: ap}
	}
	b, err := connectors.MarshalOutput(out) // null members left out, as the output schema says
	if err != nil {
		return nil, mcpgate.WrapError(mcpgate.EInternal, err, "the tool's output could not be encoded")
	}
	return b, nil
}

// approvalAsk is a call that may run only once a person approves it: what
// it follows, and why.
type approvalAsk struct{ follows, reason string }

// weigh weighs a call (its guard, the guardrails, the policies it must
// meet) and answers whether it may run now: nil and nil when it may, an
// approvalAsk when a person must approve it first, an error (a refusal, or
// the confirmation it needs) otherwise. It runs under the call's locks, so
// that the call that runs is the call that was weighed; an approval's id
// is spent here, after the weighing it must match.
func (s *Tools) weigh(ctx context.Context, h *store.Held, a *mcpgate.Actor, t *connectors.Tool, wp *workspacePolicy,
	call mcpgate.ToolCall, args map[string]any) (*approvalAsk, error) {
	p := wp.policy[t.Name]
	approval := p.Approval
	var as connectors.Assessment
	if t.Guard != nil {
		var err error
		if as, err = s.assess(ctx, h, a, t, wp, args); err != nil {
			return nil, err
		}
		if as.Follows != "" {
			// The call does what another tool does (a timeout that ends a
			// sandbox early is a kill): it needs that tool to be on, and
			// meets the stricter of the two approvals.
			fp := wp.policy[as.Follows]
			if !fp.Enabled {
				err := s.followRefusal(t, as, a)
				s.deny(ctx, a, t, args, err)
				return nil, err
			}
			approval = approval.Stricter(fp.Approval)
		}
	}
	switch approval {
	case mcpgate.ApprovalModel:
		if !call.Confirmed {
			return nil, &mcpgate.ConfirmationRequiredError{Tool: s.infoOf(wp, t, p), Arguments: args, Summary: withReason(describe(t, args), as.Reason)}
		}
	case mcpgate.ApprovalHuman:
		switch {
		case call.ContinuesApproval != "":
			return nil, s.approvals.continueApproval(ctx, a, t, args, as.Follows, call.ContinuesApproval)
		case call.ApprovalID != "":
			return nil, s.approvals.useApproval(ctx, a, t, args, as.Follows, as.Reason, call.ApprovalID)
		case a.IsPerson() && call.Confirmed:
			// A person signed in to the dashboard confirmed it there: they
			// are the human the policy asks for, if the workspace's rules
			// for deciders let them be (see requireDecider).
			if err := s.approvals.confirmInDashboard(ctx, a, t, args); err != nil {
				return nil, err
			}
		case a.IsPerson():
			return nil, &mcpgate.ConfirmationRequiredError{Tool: s.infoOf(wp, t, p), Arguments: args, Summary: withReason(describe(t, args), as.Reason)}
		default:
			return &approvalAsk{follows: as.Follows, reason: as.Reason}, nil
		}
	}
	return nil, nil
}

// lockChanged takes the lock of the one resource the call changes, if it
// changes one (Spec.Changes), in the call's workspace: the calls that
// change one resource are weighed and run one at a time, on every replica.
// Read-only calls and creates take none.
func (s *Tools) lockChanged(ctx context.Context, h *store.Held, a *mcpgate.Actor, t *connectors.Tool, args map[string]any) error {
	if t.Changes == nil {
		return nil
	}
	r := t.Changes(args)
	c, _ := s.opts.Registry.ConnectorOf(t.Name)
	err := h.Lock(ctx, lockKey("resource", a.WorkspaceID, c.Name(), r.Kind, r.ID))
	return s.lockRefusal(ctx, a, t, args, err, "another change to this "+r.Kind+" is in progress")
}

// lockKey names a lock: what it orders, then in which workspace, of which
// connector, of what. The first three parts never hold a "|", so locks of
// different kinds, workspaces or connectors never share a key.
func lockKey(parts ...string) string { return strings.Join(parts, "|") }

// lockRefusal turns a lock that could not be taken into the call's answer
// (see lockError), audited.
func (s *Tools) lockRefusal(ctx context.Context, a *mcpgate.Actor, t *connectors.Tool, args map[string]any, err error, busy string) error {
	if err == nil {
		return nil
	}
	err = lockError(err, "Not done: "+busy+" through the gateway; try again in a moment.")
	s.auditCall(ctx, a, t, args, 0, s.now(), err)
	s.metrics.ToolCall(t.Name, mcpgate.OutcomeError, 0, 0)
	return err
}

// lockError is the answer to a lock that could not be taken: busy (a
// retryable conflict) when someone else held it for the whole wait; the
// store's own words when the gateway's share of connections was in use
// (they say whose); unavailable otherwise. Nothing was done in any case.
func lockError(err error, busy string) error {
	switch {
	case errors.Is(err, store.ErrLockBusy):
		return &mcpgate.Error{Code: mcpgate.EConflict, RetryAfter: 1, Err: err, Message: busy}
	case mcpgate.ErrorCode(err) == mcpgate.EInternal:
		return mcpgate.WrapError(mcpgate.EUnavailable, err, "the gateway cannot order changes right now; nothing was done, try again shortly")
	}
	return err
}

// refusal says why a tool the workspace has is not callable by the actor,
// and who can change it.
func (s *Tools) refusal(t *connectors.Tool, p mcpgate.ToolPolicy, a *mcpgate.Actor) error {
	if !p.Enabled {
		return mcpgate.Errorf(mcpgate.EForbidden, "The tool %s is turned off in this workspace. A workspace owner or admin can turn it on "+
			"in the dashboard under Settings → Tools (%s/app/w/%s/settings).", t.Name, s.opts.PublicURL, a.WorkspaceID)
	}
	if a.GrantID != "" {
		// An OAuth app holds a grant, not a key: it gets more access by
		// asking the person again (the MCP endpoint's step-up answer).
		return mcpgate.Errorf(mcpgate.EForbidden, "This app's grant is read-only, and %s changes things rather than reading them. "+
			"Sign in again from the app and choose Full access to call it.", t.Name)
	}
	return mcpgate.Errorf(mcpgate.EForbidden, "This MCP key is read-only, and %s changes things rather than reading them. "+
		"Use a key with full scope (create one in the dashboard) to call it.", t.Name)
}

// run opens the workspace's credential, calls the tool under its deadline,
// and audits the call. args are already decoded and validated.
func (s *Tools) run(ctx context.Context, a *mcpgate.Actor, t *connectors.Tool, args map[string]any) (any, error) {
	start := time.Now()
	if s.audit.Saturated() {
		// Fail closed: every call must be auditable, and the audit log has
		// been unable to write for too long.
		s.metrics.ToolCall(t.Name, mcpgate.OutcomeError, 0, 0)
		return nil, mcpgate.Errorf(mcpgate.EUnavailable, "the gateway cannot record calls in its audit log right now, "+
			"so nothing was done; try again shortly")
	}
	c, _ := s.opts.Registry.ConnectorOf(t.Name)
	cred, err := s.credential(ctx, a, c)
	if err != nil {
		s.auditCall(ctx, a, t, args, 0, start, err)
		s.metrics.ToolCall(t.Name, mcpgate.OutcomeError, 0, 0)
		return nil, err
	}
	timeout := s.opts.CallTimeout
	if t.Timeout > 0 {
		timeout = t.Timeout
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
			_ = s.db.MarkAuthFailure(ctx, a.WorkspaceID, c.Name())
		}()
	}
	if status >= 400 {
		s.metrics.UpstreamError(status)
	}
	s.auditCall(ctx, a, t, args, status, start, err)
	outcome := mcpgate.OutcomeOK
	if err != nil {
		outcome = mcpgate.OutcomeError
	}
	total := time.Since(start)
	s.metrics.ToolCall(t.Name, outcome, total-upstream, upstream)
	return out, err
}

// credential opens the workspace's credential for a connector, with an
// error that says what to do when there is none.
func (s *Tools) credential(ctx context.Context, a *mcpgate.Actor, c connectors.Connector) (mcpgate.Secret, error) {
	cred, err := s.creds.Open(ctx, s.opts.Keyring, a.WorkspaceID, c.Name())
	if err != nil {
		if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
			return "", mcpgate.Errorf(mcpgate.EInvalid, "No %s API key is connected to this workspace yet. Ask a workspace owner "+
				"or admin to connect one on the dashboard: %s/app/w/%s/connections", strings.ToUpper(c.Name()), s.opts.PublicURL, a.WorkspaceID)
		}
		return "", &mcpgate.Error{Code: mcpgate.EUnavailable, RetryAfter: 5, Err: err,
			Message: "the gateway cannot read this workspace's credential right now; try again in a few seconds"}
	}
	return cred, nil
}

// deny audits and counts a call the gateway refused before it ran.
func (s *Tools) deny(ctx context.Context, a *mcpgate.Actor, t *connectors.Tool, args map[string]any, err error) {
	ev := mcpgate.NewToolEvent(a, t.Name, args)
	ev.Outcome, ev.Message = mcpgate.OutcomeDenied, mcpgate.ErrorMessage(err)
	s.record(ctx, ev)
	s.metrics.ToolCall(t.Name, mcpgate.OutcomeDenied, 0, 0)
}

// withReason appends why a stricter policy applies to a summary.
func withReason(summary, reason string) string {
	if reason == "" {
		return summary
	}
	return summary + " " + reason
}

// auditCall records one tool call.
func (s *Tools) auditCall(ctx context.Context, a *mcpgate.Actor, t *connectors.Tool, args map[string]any, status int, start time.Time, err error) {
	ev := mcpgate.NewToolEvent(a, t.Name, args)
	ev.UpstreamStatus = status
	ev.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		ev.Outcome = mcpgate.OutcomeError
		ev.Message = mcpgate.ErrorMessage(err)
		if mcpgate.ErrorCode(err) == mcpgate.EInternal {
			s.log.ErrorContext(ctx, "tool call failed", "tool", t.Name, "workspace_id", a.WorkspaceID, "err", err)
		}
	}
	s.record(ctx, ev)
}

// describe says in one sentence what a call would do.
func describe(t *connectors.Tool, args map[string]any) string {
	var parts []string
	for k, v := range mcpgate.RedactArguments(args) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	out := t.Title
	if len(parts) > 0 {
		out += " (" + strings.Join(slices.Sorted(slices.Values(parts)), ", ") + ")"
	}
	switch {
	case t.Annotations.Destructive:
		out += ". This cannot be undone."
	case t.CostsMoney:
		out += ". This costs money."
	}
	return out
}
