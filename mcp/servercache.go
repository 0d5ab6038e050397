package mcp

// The cache of what the gateway builds per tool set, which both paths use:
// the SDK path's server (go-sdk asks for one on every HTTP request) and the
// fast path's tools and tools/list answers. It lives on the set itself
// (mcpgate.Derive), so a policy change, which makes a new set, makes a new
// entry and the old one goes with the old set.

import (
	"context"
	"encoding/json"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// setState is what the gateway derives from one tool set (one workspace,
// scope and policy version): the SDK server, and for the fast path the tools
// it may run itself and the tools/list answers, computed by the SDK once per
// protocol version.
type setState struct {
	srv  *sdk.Server
	fast map[string]*connectors.Tool
	// relay are the tools of fast whose result is an upstream's, relayed
	// (their entry in fast is nil).
	relay      map[string]bool
	serverInfo []byte // the SDK's _meta serverInfo for this server, as JSON
	lists      sync.Map
}

// server returns the MCP server for an actor's tool set, building it on
// first use. Servers are cached on the set because go-sdk calls getServer on
// every HTTP request; a policy change makes a new set, so a new server.
func (g *Gateway) server(ctx context.Context, a *mcpgate.Actor) (*sdk.Server, error) {
	_, st, err := g.state(ctx, a)
	if err != nil {
		return nil, err
	}
	return st.srv, nil
}

// state returns the actor's tool set and what the gateway derived from it.
func (g *Gateway) state(ctx context.Context, a *mcpgate.Actor) (*mcpgate.ToolSet, *setState, error) {
	set, err := g.opts.Tools.ToolSet(ctx, a)
	if err != nil {
		return nil, nil, err
	}
	return set, mcpgate.Derive(set, g.buildState), nil
}

func (g *Gateway) buildState(set *mcpgate.ToolSet) *setState {
	srv := g.buildServer(set)
	title, _ := g.serverText()
	info, _ := json.Marshal(&sdk.Implementation{Name: "mcpgate", Title: title, Version: g.opts.Version})
	fast, relay := g.fastTools(set)
	return &setState{srv: srv, fast: fast, relay: relay, serverInfo: info}
}
