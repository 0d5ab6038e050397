package mcp

import "github.com/mcpgate/mcpgate"

// limitCall takes one token of the actor's per-key limit for a tool call
// that is about to run. Only tool calls count: notifications, lists, pings
// and the handshake are cheap and never reach an upstream, and counting them
// starved clients that send several of them per call. A refused call is a
// tool error with retryAfterSeconds, which the model can read and act on,
// rather than an HTTP 429 that most clients treat as a broken session.
func (g *Gateway) limitCall(a *mcpgate.Actor) error {
	if a == nil {
		return nil
	}
	// A key's (or OAuth grant's) calls share its bucket.
	now := g.now()
	if ok, wait := g.limiters.Allow(a.CredentialID(), now); !ok {
		g.refuse(a, "key", now)
		return retryAfter(mcpgate.Errorf(mcpgate.ETooMany, "this key is sending too many tool calls; slow down"), wait)
	}
	return g.limitShared(a)
}
