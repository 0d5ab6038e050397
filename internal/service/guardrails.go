package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/store"
)

// Guardrails implements mcpgate.GuardrailService.
func (s *Tools) Guardrails(ctx context.Context, a *mcpgate.Actor) (*mcpgate.Guardrails, error) {
	wp, err := s.workspace(ctx, a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	g := wp.guardrails
	g.AllowedTemplates = slices.Clone(g.AllowedTemplates)
	if g.AllowedTemplates == nil {
		g.AllowedTemplates = []string{}
	}
	return &g, nil
}

// SetGuardrails implements mcpgate.GuardrailService.
func (s *Tools) SetGuardrails(ctx context.Context, a *mcpgate.Actor, g mcpgate.Guardrails) (*mcpgate.Guardrails, error) {
	if err := s.requireAdminChange(ctx, a); err != nil {
		return nil, err
	}
	g, err := g.Normalize()
	if err != nil {
		return nil, err
	}
	if err := s.db.SetGuardrails(ctx, a.WorkspaceID, a.UserID, g); err != nil {
		return nil, err
	}
	s.invalidate(InvalidatePolicy, a.WorkspaceID)
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionGuardrailsUpdated, map[string]any{
		"max_timeout_seconds": g.MaxTimeoutSeconds, "max_running": g.MaxRunning, "allowed_templates": g.AllowedTemplates}))
	return &g, nil
}

// assess runs a tool's guard (read-only, upstream) and enforces the
// workspace's guardrails on what it found, before anything runs, under h
// (see weigh). A refusal is audited here.
func (s *Tools) assess(ctx context.Context, h *store.Held, a *mcpgate.Actor, t *connectors.Tool, wp *workspacePolicy, args map[string]any) (connectors.Assessment, error) {
	c, _ := s.opts.Registry.ConnectorOf(t.Name)
	cred, err := s.credential(ctx, a, c)
	if err != nil {
		s.auditCall(ctx, a, t, args, 0, s.now(), err)
		return connectors.Assessment{}, err
	}
	callCtx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	as, err := t.Guard(callCtx, cred, args)
	if err != nil {
		s.auditCall(ctx, a, t, args, connectors.UpstreamStatus(err), s.now(), err)
		return connectors.Assessment{}, err
	}
	if err := s.checkGuardrails(a, wp.guardrails, as); err != nil {
		s.refuseGuardrail(ctx, a, t, args, err)
		return connectors.Assessment{}, err
	}
	if err := s.checkRunning(callCtx, h, a, c, cred, wp.guardrails, as); err != nil {
		if mcpgate.ErrorCode(err) == mcpgate.EForbidden {
			s.refuseGuardrail(ctx, a, t, args, err)
		} else {
			s.auditCall(ctx, a, t, args, connectors.UpstreamStatus(err), s.now(), err)
		}
		return connectors.Assessment{}, err
	}
	return as, nil
}

// settingsURL is where an owner or admin changes a workspace's settings.
func (s *Tools) settingsURL(workspaceID string) string {
	return s.opts.PublicURL + "/app/w/" + workspaceID + "/settings"
}

// checkGuardrails compares what a call asks for with the workspace's
// limits on lifetime and templates.
func (s *Tools) checkGuardrails(a *mcpgate.Actor, g mcpgate.Guardrails, as connectors.Assessment) error {
	if limit := time.Duration(g.MaxTimeoutSeconds) * time.Second; limit > 0 && as.Lifetime > limit {
		return mcpgate.Errorf(mcpgate.EForbidden, "Not done: this workspace lets AI clients ask for at most %d seconds, and this call "+
			"asked for %d. Ask for %d seconds or less. %s", g.MaxTimeoutSeconds, int(as.Lifetime/time.Second), g.MaxTimeoutSeconds, s.where(a))
	}
	if len(g.AllowedTemplates) > 0 && len(as.Templates) > 0 &&
		!slices.ContainsFunc(as.Templates, func(n string) bool { return slices.Contains(g.AllowedTemplates, n) }) {
		return mcpgate.Errorf(mcpgate.EForbidden, "Not done: this workspace allows only these templates: %s; %q is not one of them. %s",
			strings.Join(g.AllowedTemplates, ", "), as.Templates[0], s.where(a))
	}
	return nil
}

// where says who changes a guardrail, and where.
func (s *Tools) where(a *mcpgate.Actor) string {
	return fmt.Sprintf("A workspace owner or admin can change this limit in the dashboard under Settings → Guardrails (%s).",
		s.settingsURL(a.WorkspaceID))
}

// checkRunning enforces the most resources running at once on a call that
// starts one. The count and the start must be one step, or parallel starts
// (on any replicas) all count the same number and all pass: so the
// workspace's running lock is taken before counting, and h holds it until
// the call has run. Every call that starts one takes it, after any lock of
// the resource it changes (the one order of locks, see lockChanged). It is
// the only check that calls the upstream, so it comes last.
func (s *Tools) checkRunning(ctx context.Context, h *store.Held, a *mcpgate.Actor, c connectors.Connector, cred mcpgate.Secret,
	g mcpgate.Guardrails, as connectors.Assessment) error {
	if g.MaxRunning <= 0 || !as.Starts {
		return nil
	}
	counter, ok := c.(connectors.RunningCounter)
	if !ok {
		return nil
	}
	if err := h.Lock(ctx, lockKey("running", a.WorkspaceID, c.Name())); err != nil {
		return lockError(err, "Not done: other calls are starting something in this workspace right now, and its limit on how "+
			"many run at once counts them one at a time; try again in a moment.")
	}
	n, err := counter.Running(ctx, cred)
	if err != nil {
		// Fail closed: the limit cannot be checked, so nothing starts.
		return mcpgate.WrapError(mcpgate.EUnavailable, err, "Not done: the gateway could not count what is running "+
			"to check this workspace's limit; try again shortly")
	}
	if n >= g.MaxRunning {
		return mcpgate.Errorf(mcpgate.EForbidden, "Not done: %d are running and this workspace lets AI clients run at most %d at "+
			"once. Pause or end one first. %s", n, g.MaxRunning, s.where(a))
	}
	return nil
}

// refuseGuardrail audits a guardrail refusal as its own action, so that
// admins can filter for them, and counts it as a denied call.
func (s *Tools) refuseGuardrail(ctx context.Context, a *mcpgate.Actor, t *connectors.Tool, args map[string]any, err error) {
	ev := mcpgate.NewAdminEvent(a, mcpgate.ActionGuardrailRefused, map[string]any{"tool": t.Name, "arguments": mcpgate.RedactArguments(args)})
	ev.Outcome, ev.Message = mcpgate.OutcomeDenied, mcpgate.ErrorMessage(err)
	s.record(ctx, ev)
	s.metrics.ToolCall(t.Name, mcpgate.OutcomeDenied, 0, 0)
}

// followRefusal says why a call that does what a disabled tool does is
// refused, and who can change it.
func (s *Tools) followRefusal(t *connectors.Tool, as connectors.Assessment, a *mcpgate.Actor) error {
	return mcpgate.Errorf(mcpgate.EForbidden, "Not done: %s That is the same as %s, which is turned off in this workspace, so %s "+
		"may not do it either. Ask for a later end time instead, or ask a workspace owner or admin to turn %s on in the "+
		"dashboard under Settings → Tools (%s).", strings.TrimSpace(as.Reason), as.Follows, t.Name, as.Follows, s.settingsURL(a.WorkspaceID))
}
