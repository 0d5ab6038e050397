package service

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/trustcache"
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
//
// What a request reads of its server (the row, the tool catalog and the
// credential, sealed) is cached per workspace and server, under the trust
// of the services' other caches: dropped when the workspace's servers
// change (kind InvalidatePolicy, which every change of a server or its
// catalog notifies at commit: at once on the replica that made it, on the
// others when the notification arrives), used without a reload only for the
// TTL and only while the invalidation listener is connected, standing in
// through a database outage for the grace. A server not found is never
// cached, and the credential is opened for each relay, never kept open.
type Endpoints struct {
	servers *Servers
	tools   mcpgate.ToolService
	cache   *trustcache.Cache[*endpointEntry] // workspace + "\x00" + server name
}

// endpointEntry is what the endpoint reads of one server of a workspace.
type endpointEntry struct {
	workspace string
	row       *store.UpstreamServer
	routes    []store.ServerToolRoute
	headers   store.SealedHeaders
}

var _ mcpgate.ServerEndpointService = (*Endpoints)(nil)

// NewEndpoints returns the servers' endpoint service; trust is the
// services' cache trust (Set.CacheTrust), nil for the TTL and grace of
// the defaults with the listener taken as connected (tests). This
// replica's own changes of servers drop the cache at once (the servers'
// change hook is chained), ahead of their notification.
func NewEndpoints(servers *Servers, tools mcpgate.ToolService, trust trustcache.Trust) *Endpoints {
	if trust == nil {
		t := &cacheTrust{ttl: 30 * time.Second, grace: DefaultOutageGrace, now: servers.now}
		t.listening.Store(true)
		trust = t
	}
	e := &Endpoints{servers: servers, tools: tools, cache: trustcache.New[*endpointEntry](trustcache.Options{Trust: trust, Now: servers.now})}
	next := servers.onChange
	servers.onChange = func(kind, workspaceID string) {
		e.Invalidate(kind, workspaceID)
		if next != nil {
			next(kind, workspaceID)
		}
	}
	return e
}

// Invalidate drops cached servers: a workspace's on a change of its
// servers (InvalidatePolicy), every workspace's for "" (notifications may
// have been missed) or a kind it does not know. Keys, grants and
// credentials of connectors never change a server.
func (e *Endpoints) Invalidate(kind, workspaceID string) {
	switch kind {
	case InvalidateKeys, InvalidateConn, store.InvalidateGrants:
		return
	case InvalidatePolicy:
	default:
		workspaceID = ""
	}
	e.cache.Invalidate(func(en *endpointEntry) bool { return workspaceID == "" || en.workspace == workspaceID })
}

// errNoEndpoint is the one answer for a server the caller cannot reach:
// none of that name, turned off, or another workspace's.
var errNoEndpoint = mcpgate.Errorf(mcpgate.ENotFound, "this workspace has no upstream server of that name turned on")

// server returns the workspace's enabled server of the name, from the
// cache or read.
func (e *Endpoints) server(ctx context.Context, a *mcpgate.Actor, name string) (*endpointEntry, error) {
	if a == nil {
		return nil, mcpgate.Errorf(mcpgate.EUnauthorized, "not authenticated")
	}
	ws := a.WorkspaceID
	en, err := e.cache.Get(ctx, ws+"\x00"+name, func(ctx context.Context) (*endpointEntry, error) {
		return e.load(ctx, ws, name)
	})
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound || (err == nil && !en.row.Enabled) {
		return nil, errNoEndpoint
	}
	return en, err
}

// load reads one server of a workspace: its row, its catalog and its
// credential, sealed.
func (e *Endpoints) load(ctx context.Context, workspaceID, name string) (*endpointEntry, error) {
	row, err := e.servers.db.FindServer(ctx, workspaceID, name)
	if err != nil {
		return nil, err
	}
	en := &endpointEntry{workspace: workspaceID, row: row}
	if !row.Enabled {
		return en, nil // nothing else of it is served
	}
	if en.routes, err = e.servers.db.FindServerTools(ctx, workspaceID, name); err != nil {
		return nil, err
	}
	sealed, err := e.servers.db.FindSealedServerHeaders(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	en.headers = sealed[name]
	return en, nil
}

// ServerEndpoint implements mcpgate.ServerEndpointService.
func (e *Endpoints) ServerEndpoint(ctx context.Context, a *mcpgate.Actor, name string) (*mcpgate.ServerEndpoint, error) {
	en, err := e.server(ctx, a, name)
	if err != nil {
		return nil, err
	}
	row, routes := en.row, en.routes
	set, err := e.tools.ToolSet(ctx, a)
	if err != nil {
		return nil, err
	}
	callable := make(map[string]bool, len(set.Tools))
	for _, t := range set.Tools {
		callable[t.Name] = true
	}
	out := &mcpgate.ServerEndpoint{Server: row.Name, Init: row.Init, ClientSessions: row.SessionScope == mcpgate.ScopeClient,
		Prompts: row.Prompts, Resources: row.Resources, ResourceTemplates: row.ResourceTemplates}
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
	en, err := e.server(ctx, a, name)
	if err != nil {
		return nil, err
	}
	headers, err := en.headers.Open(ctx, e.servers.keyring, a.WorkspaceID)
	if err != nil {
		// A ciphertext the keyring no longer opens (resealed under a new
		// key since it was read) is read again once, as the credential
		// cache does.
		e.cache.Delete(a.WorkspaceID + "\x00" + name)
		if en, err = e.server(ctx, a, name); err != nil {
			return nil, err
		}
		if headers, err = en.headers.Open(ctx, e.servers.keyring, a.WorkspaceID); err != nil {
			return nil, err
		}
	}
	start := e.servers.now()
	key := UpstreamKey{WorkspaceID: a.WorkspaceID, Server: name, UserID: a.UserID, ClientSession: mcpgate.ClientSessionFromContext(ctx, name)}
	var raw json.RawMessage
	err = e.servers.creds.doFor(ctx, a, name, en.row.OAuth, upstream.Target{URL: en.row.URL, Headers: headers}, func(t upstream.Target) error {
		var err error
		raw, err = e.servers.pool.Relay(ctx, key, t, method, params)
		return err
	})
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

// EndClientSession implements mcpgate.ClientSessionEnder: the client's
// DELETE of its session on the server's endpoint closes the gateway's
// sessions with the server that served it.
func (e *Endpoints) EndClientSession(ctx context.Context, a *mcpgate.Actor, name, id string) error {
	if _, err := e.server(ctx, a, name); err != nil {
		return err
	}
	e.servers.pool.Forget(UpstreamKey{WorkspaceID: a.WorkspaceID, Server: name, UserID: a.UserID, ClientSession: id})
	return nil
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
