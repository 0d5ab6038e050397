package upstream

import (
	"context"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolListChanged is the handler of a session's notifications/tools/
// list_changed: the pool's OnToolListChanged is told the session's target
// (a copy: the caller may keep it). With no OnToolListChanged the handler
// is nil, and go-sdk opens no subscriptions/listen stream for it. The
// notice says only that something changed: the gateway discovers the
// server again rather than trust a list the notice does not carry.
func (p *Pool[K]) toolListChanged(target Target) func(context.Context, *mcp.ToolListChangedRequest) {
	fn := p.opts.OnToolListChanged
	if fn == nil {
		return nil
	}
	t := Target{URL: target.URL, Headers: maps.Clone(target.Headers)}
	return func(context.Context, *mcp.ToolListChangedRequest) { fn(t) }
}
