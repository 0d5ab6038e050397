package service

import (
	"context"
	"encoding/json"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// Connectors implements mcpgate.ResourceService.
func (s *Resources) Connectors() []mcpgate.ConnectorInfo {
	var out []mcpgate.ConnectorInfo
	for _, name := range s.opts.Registry.Names() {
		c, _ := s.opts.Registry.Connector(name)
		out = append(out, connectors.Info(c))
	}
	return out
}

func (s *Resources) browser(name string) (connectors.Browser, error) {
	c, err := s.connector(name)
	if err != nil {
		return nil, err
	}
	b, ok := c.(connectors.Browser)
	if !ok {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "the dashboard cannot show what %s manages", name)
	}
	return b, nil
}

// caller runs the connector's tools as the actor, through CallTool: the
// dashboard's reads are policed and audited like any call.
func (s *Resources) caller(a *mcpgate.Actor) connectors.Caller {
	return func(ctx context.Context, tool string, args map[string]any) (json.RawMessage, error) {
		raw, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		return s.tools.CallTool(ctx, a, mcpgate.ToolCall{Tool: tool, Arguments: raw})
	}
}

// Resources implements mcpgate.ResourceService.
func (s *Resources) Resources(ctx context.Context, a *mcpgate.Actor, connector, page string) (*mcpgate.ResourcePage, error) {
	b, err := s.browser(connector)
	if err != nil {
		return nil, err
	}
	return b.ListResources(ctx, s.caller(a), page)
}

// Resource implements mcpgate.ResourceService. Actions whose tool the
// workspace has turned off, or the actor's scope does not allow, are marked
// so; the page says so instead of offering them.
func (s *Resources) Resource(ctx context.Context, a *mcpgate.Actor, connector, id string) (*mcpgate.ResourceDetail, error) {
	b, err := s.browser(connector)
	if err != nil {
		return nil, err
	}
	d, err := b.GetResource(ctx, s.caller(a), id, s.now())
	if err != nil {
		return nil, err
	}
	set, err := s.tools.ToolSet(ctx, a)
	if err != nil {
		return nil, err
	}
	for i := range d.Actions {
		d.Actions[i].Enabled = false
		for _, t := range set.Tools {
			if t.Name == d.Actions[i].Tool {
				d.Actions[i].Enabled = true
			}
		}
	}
	return d, nil
}
