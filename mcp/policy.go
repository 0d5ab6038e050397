package mcp

import (
	"context"
	"fmt"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// workspaceTools is a workspace's effective policy and, built lazily, its
// MCP servers (one per key scope). It is immutable once built, apart from the
// servers, and replaced whole on invalidation.
type workspaceTools struct {
	id      string
	policy  map[string]mcpgate.ToolPolicy // every tool, defaults applied
	fetched time.Time
	mu      sync.Mutex
	byScope map[mcpgate.Scope]*sdk.Server
}

// effectivePolicy applies a workspace's stored settings over the tools'
// defaults.
func effectivePolicy(tools []*connectors.Tool, stored map[string]mcpgate.ToolPolicy) map[string]mcpgate.ToolPolicy {
	out := make(map[string]mcpgate.ToolPolicy, len(tools))
	for _, t := range tools {
		p, ok := stored[t.Name]
		if !ok {
			p = mcpgate.ToolPolicy{Tool: t.Name, Enabled: t.DefaultEnabled, NeedsConfirmation: t.DefaultNeedsConfirmation}
		}
		out[t.Name] = p
	}
	return out
}

// workspace returns the workspace's cached tools, loading them on a miss.
func (g *Gateway) workspace(ctx context.Context, workspaceID string) (*workspaceTools, error) {
	if v, ok := g.policies.Load(workspaceID); ok {
		wt := v.(*workspaceTools)
		if g.now().Sub(wt.fetched) < g.opts.CacheTTL {
			return wt, nil
		}
	}
	gen := g.gen.Load()
	stored, err := g.opts.Backend.ToolPolicies(ctx, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("load tool policy: %w", err)
	}
	wt := &workspaceTools{id: workspaceID, policy: effectivePolicy(g.opts.Registry.Tools(), stored),
		fetched: g.now(), byScope: map[mcpgate.Scope]*sdk.Server{}}
	g.storeIfCurrent(&g.policies, workspaceID, wt, gen)
	return wt, nil
}

// Tools lists every tool with the workspace's settings, for the API and the
// dashboard.
func (g *Gateway) Tools(ctx context.Context, workspaceID string) ([]mcpgate.ToolInfo, error) {
	wt, err := g.workspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	var out []mcpgate.ToolInfo
	for _, t := range g.opts.Registry.Tools() {
		p := wt.policy[t.Name]
		c, _ := g.opts.Registry.ConnectorOf(t.Name)
		out = append(out, mcpgate.ToolInfo{Name: t.Name, Connector: c.Name(), Title: t.Title, Description: t.Description,
			Enabled: p.Enabled, NeedsConfirmation: p.NeedsConfirmation, CostsMoney: t.CostsMoney,
			ReadOnly: t.Annotations.ReadOnly, Destructive: t.Annotations.Destructive,
			Annotations: map[string]any{"readOnlyHint": t.Annotations.ReadOnly, "destructiveHint": t.Annotations.Destructive,
				"idempotentHint": t.Annotations.Idempotent, "openWorldHint": t.Annotations.OpenWorld, "title": t.Title}})
	}
	return out, nil
}

// SetTool changes a workspace's setting for one tool and records it. The
// caller has checked that the user may (owner or admin).
func (g *Gateway) SetTool(ctx context.Context, workspaceID, userID, name string, enabled, needsConfirmation bool) (*mcpgate.ToolInfo, error) {
	if _, ok := g.opts.Registry.Tool(name); !ok {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "no tool named %q", name)
	}
	before, err := g.workspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	p := mcpgate.ToolPolicy{Tool: name, Enabled: enabled, NeedsConfirmation: needsConfirmation}
	if err := g.opts.Backend.SetToolPolicy(ctx, workspaceID, userID, p); err != nil {
		return nil, err
	}
	g.Invalidate("policy", workspaceID)
	prev := before.policy[name]
	action := "tool.updated"
	switch {
	case !prev.Enabled && enabled:
		action = "tool.enabled"
	case prev.Enabled && !enabled:
		action = "tool.disabled"
	}
	g.record(ctx, mcpgate.AuditEvent{WorkspaceID: workspaceID, ActorID: userID, Kind: "admin", Action: action,
		Arguments: map[string]any{"tool": name, "enabled": enabled, "needs_confirmation": needsConfirmation},
		Outcome:   mcpgate.OutcomeOK, Source: "dashboard"})
	tools, err := g.Tools(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	for _, t := range tools {
		if t.Name == name {
			return &t, nil
		}
	}
	return nil, mcpgate.Errorf(mcpgate.ENotFound, "no tool named %q", name)
}

func (g *Gateway) record(ctx context.Context, ev mcpgate.AuditEvent) {
	if g.opts.Audit != nil {
		g.opts.Audit.Record(ctx, ev)
	}
}

// visible reports whether a key of the given scope may see and call a tool
// the workspace has enabled.
func visible(t *connectors.Tool, p mcpgate.ToolPolicy, scope mcpgate.Scope) bool {
	return p.Enabled && (scope == mcpgate.ScopeFull || t.Annotations.ReadOnly)
}
