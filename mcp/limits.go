package mcp

import "github.com/mcpgate/mcpgate"

// limitShared takes a token from the limits shared beyond one credential:
// per person (all of their keys and grants together: twenty keys must not
// mean twenty times the rate) and per workspace (all of its people). Like
// the per-key limit it counts tool calls only (limitCall), and a refusal is
// a tool error with retry_after, which every MCP client shows.
func (g *Gateway) limitShared(a *mcpgate.Actor) error {
	now := g.now()
	for _, l := range []struct {
		set  *limiterSet
		name string
		msg  string
	}{
		{&g.userLimits, a.UserID, "your keys together are sending too many tool calls; slow down"},
		{&g.workspaceLimits, a.WorkspaceID, "this workspace is sending too many tool calls; slow down"},
	} {
		if l.name == "" {
			continue
		}
		if ok, wait := l.set.allow(l.name, now); !ok {
			g.metrics.RateLimited()
			return retryAfter(mcpgate.Errorf(mcpgate.ETooMany, "%s", l.msg), wait)
		}
	}
	return nil
}
