package service

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// Endpoints implements mcpgate.ServerEndpointService: each upstream
// server's own MCP endpoint, on the servers' store, vault and pool, and the
// tool service whose tool set says which of the server's tools a caller
// may call (it also runs the calls: the endpoint calls them through it, by
// their exposed names).
//
// Relayed requests are reads (prompts, resources, completions) or set the
// caller's own session's log level, so every key scope may make them, a
// read-only one included. Reads of content, prompts/get and
// resources/read, are audited as a tool call that reads is, one row each
// (action "<server>:<method>", the prompt's name and arguments or the
// resource's URI, redacted); lists and completions are not, as the
// workspace endpoint's tools/list is not.
type Endpoints struct {
	servers *Servers
	tools   mcpgate.ToolService
}

var _ mcpgate.ServerEndpointService = (*Endpoints)(nil)

// NewEndpoints returns the servers' endpoint service.
func NewEndpoints(servers *Servers, tools mcpgate.ToolService) *Endpoints {
	return &Endpoints{servers: servers, tools: tools}
}

// errNoEndpoint is the one answer for a server the caller cannot reach:
// none of that name, turned off, or another workspace's.
var errNoEndpoint = mcpgate.Errorf(mcpgate.ENotFound, "this workspace has no upstream server of that name turned on")

// server returns the workspace's enabled server of the name.
func (e *Endpoints) server(ctx context.Context, a *mcpgate.Actor, name string) (*store.UpstreamServer, error) {
	if a == nil {
		return nil, mcpgate.Errorf(mcpgate.EUnauthorized, "not authenticated")
	}
	row, err := e.servers.db.FindServer(ctx, a.WorkspaceID, name)
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound || (err == nil && !row.Enabled) {
		return nil, errNoEndpoint
	}
	return row, err
}

// ServerEndpoint implements mcpgate.ServerEndpointService.
func (e *Endpoints) ServerEndpoint(ctx context.Context, a *mcpgate.Actor, name string) (*mcpgate.ServerEndpoint, error) {
	row, err := e.server(ctx, a, name)
	if err != nil {
		return nil, err
	}
	routes, err := e.servers.db.FindServerTools(ctx, a.WorkspaceID, name)
	if err != nil {
		return nil, err
	}
	set, err := e.tools.ToolSet(ctx, a)
	if err != nil {
		return nil, err
	}
	callable := make(map[string]bool, len(set.Tools))
	for _, t := range set.Tools {
		callable[t.Name] = true
	}
	out := &mcpgate.ServerEndpoint{Server: row.Name, Init: row.Init}
	for _, r := range routes {
		// The tool set decides (policy and scope); the catalog's own
		// state is checked too, so that a tool set that lags a discovery
		// never lists a quarantined definition.
		if r.Server != name || r.Quarantined || !r.Listed || r.ExposedName == "" {
			continue
		}
		if !r.Enabled || !callable[r.ExposedName] || row.Health == mcpgate.HealthError {
			if _, known := set.All[r.ExposedName]; known {
				if out.Hidden == nil {
					out.Hidden = map[string]string{}
				}
				out.Hidden[r.Name] = r.ExposedName
			}
			continue
		}
		out.Tools = append(out.Tools, mcpgate.EndpointTool{Name: r.Name, ExposedName: r.ExposedName,
			Approval: set.All[r.ExposedName].Approval, Definition: r.Definition})
	}
	return out, nil
}

// auditedReads are the relayed methods audited as reads of content.
var auditedReads = map[string]bool{upstream.MethodPromptsGet: true, upstream.MethodResourcesRead: true}

// RelayToServer implements mcpgate.ServerEndpointService. The session with
// the upstream is the caller's own (workspace, server and person), and the
// only headers sent are the workspace's sealed credential, opened for this
// one exchange.
func (e *Endpoints) RelayToServer(ctx context.Context, a *mcpgate.Actor, name, method string, params json.RawMessage) (json.RawMessage, error) {
	row, err := e.server(ctx, a, name)
	if err != nil {
		return nil, err
	}
	headers, err := e.servers.db.OpenServerHeaders(ctx, e.servers.keyring, a.WorkspaceID, name)
	if err != nil {
		return nil, err
	}
	start := e.servers.now()
	key := UpstreamKey{WorkspaceID: a.WorkspaceID, Server: name, UserID: a.UserID}
	raw, err := e.servers.pool.Relay(ctx, key, upstream.Target{URL: row.URL, Headers: headers}, method, params)
	if e.servers.health.Outcome(ctx, a.WorkspaceID, name, err, ctx.Err() != nil) {
		e.servers.changed(a.WorkspaceID)
	}
	var rpcErr *upstream.RPCError
	if errors.As(err, &rpcErr) {
		err = &mcpgate.UpstreamRPCError{Code: rpcErr.Code, Message: rpcErr.Message, Data: rpcErr.Data}
	}
	if auditedReads[method] {
		e.auditRead(ctx, a, name, method, params, e.servers.now().Sub(start), err)
	}
	return raw, err
}

// auditRead records one read of a prompt or resource.
func (e *Endpoints) auditRead(ctx context.Context, a *mcpgate.Actor, server, method string, params json.RawMessage, took time.Duration, err error) {
	var p struct {
		Name      string         `json:"name,omitempty"`
		Arguments map[string]any `json:"arguments,omitempty"`
		URI       string         `json:"uri,omitempty"`
	}
	_ = json.Unmarshal(params, &p)
	args := map[string]any{"server": server}
	if p.Name != "" {
		args["name"] = p.Name
	}
	if len(p.Arguments) > 0 {
		args["arguments"] = p.Arguments
	}
	if p.URI != "" {
		args["uri"] = p.URI
	}
	ev := mcpgate.NewToolEvent(a, server+":"+method, args)
	ev.DurationMS = float64(took) / float64(time.Millisecond)
	if err != nil {
		ev.Outcome, ev.Message = mcpgate.OutcomeError, mcpgate.ErrorMessage(err)
		var rpcErr *mcpgate.UpstreamRPCError
		if errors.As(err, &rpcErr) {
			ev.Message = cutText(rpcErr.Message, 256) // the upstream's words, bounded
		}
	}
	e.servers.record(ctx, ev)
}
