package mcp

// Each upstream server's own endpoint, /mcp/<server> and the connector
// URL /c/<key>/mcp/<server>: the server of the caller's workspace alone,
// under its own names. It is admitted as /mcp is (origin, credential,
// failed-credential limit) and served by go-sdk's streamable handler in
// stateless mode, so any replica answers; a receiving middleware answers
// the methods that belong to the upstream:
//
//   - tools/list: the server's tools the caller may call, as the server
//     defined them (the pinned definitions, raw), by their own names;
//   - tools/call: mapped from the tool's own name to the name the tool
//     service knows it by (the stored routing table, never a split
//     string), then run as a call on /mcp runs (limits, policy, scope,
//     confirmation and approval, audit);
//   - prompts, resources, templates, completions and logging/setLevel:
//     relayed to the upstream through the server endpoint service, the
//     result passed through unchanged;
//   - the upstream's log messages during a tool call: sent on the call's
//     stream as on /mcp (callRelay), filtered by go-sdk's level for the
//     stateless session.
//
// initialize (and 2026-07-28's server/discover) is go-sdk's, with the
// upstream's serverInfo and instructions and its capabilities less what
// this stage does not relay: anything besides prompts, resources, tools,
// completions and logging, and resource subscriptions where the endpoint
// service cannot hold them (subscriptions.go). Tools list changes are the
// gateway's own: it pushes them on a held stream as on /mcp (listen.go),
// so tools declare listChanged; prompts and resources list changes are
// pushed where the upstream declares them, seen in what its discoveries
// store (endpointpush.go). Requests from the upstream to the client
// during a tool call (sampling, elicitation, roots) are relayed on the
// call's stream at the 2025 protocols (streamrelay.go), to the client
// whose session id says it answers them (clientsession.go); the client's
// answer, a POST of a JSON-RPC response, is taken before go-sdk.

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

// relayedMethods are the methods the upstream itself answers.
var relayedMethods = map[string]bool{"prompts/list": true, "prompts/get": true, "resources/list": true,
	"resources/read": true, "resources/templates/list": true, "completion/complete": true, "logging/setLevel": true}

// ServerHandler returns the servers' own endpoints, served by eps; the
// route gives the server's name as the path value "server".
func (g *Gateway) ServerHandler(eps mcpgate.ServerEndpointService) http.Handler {
	streamable := g.sdkHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actor, ok := g.admit(w, r)
		if !ok {
			return
		}
		body, ok := g.checkBody(w, r)
		if !ok {
			return
		}
		// A client's answer to a request relayed on a call's stream is
		// the gateway's, never go-sdk's (streamrelay.go).
		if g.takeRelayAnswers(w, r, actor, r.PathValue("server"), body) {
			return
		}
		ctx := mcpgate.NewContextWithActor(r.Context(), actor)
		ep, err := eps.ServerEndpoint(ctx, actor, r.PathValue("server"))
		if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
			// One answer for none, off, and another workspace's.
			httpx.WriteError(w, r, g.log, err)
			return
		}
		if err != nil && ctx.Err() != nil {
			return // the client went away (an SSE GET it gave up on)
		}
		if err != nil {
			g.log.WarnContext(ctx, "read server endpoint", "workspace_id", actor.WorkspaceID, "err", err)
			writeRPCUnavailable(w, r, unavailableMessage(err))
			return
		}
		// The client session first: a standalone stream belongs to one,
		// and an ended one is answered 404 there too.
		if ctx, ok = g.clientSession(ctx, w, r, actor, ep, eps, body); !ok {
			return
		}
		if g.serveStreamOf(w, r.WithContext(ctx), actor, body, endpointLists(eps, r.PathValue("server"), ep),
			&streamEndpoint{server: ep.Server, subs: endpointSubscriptions(eps, ep)}) {
			return
		}
		defer g.push.track()()
		if g.serverStepUp(w, r, actor, ep, body) {
			return
		}
		legacy := r.Header.Get("Mcp-Protocol-Version") != newProtocol
		if legacy && r.Method == http.MethodPost {
			// The call's stream, for the upstream's requests to the client.
			sw := g.newStreamWriter(w, r, actor, ep.Server, streamSessionFrom(ctx))
			defer sw.close()
			w, ctx = sw, withStreamWriter(ctx, sw)
		}
		srv := g.buildServerEndpoint(eps, ep, legacy)
		streamable.ServeHTTP(w, r.WithContext(withServer(ctx, srv)))
	})
}

// serverStepUp is stepUp for a call by the tool's own name: it is asked
// about the name the tool service knows.
func (g *Gateway) serverStepUp(w http.ResponseWriter, r *http.Request, a *mcpgate.Actor, ep *mcpgate.ServerEndpoint, body []byte) bool {
	if !g.mayStepUp(a) {
		return false
	}
	name, ok := calledTool(body)
	if !ok {
		return false
	}
	exposed, ok := endpointExposed(ep, name)
	return ok && g.stepUpTool(w, r, a, exposed)
}

// endpointExposed returns the exposed name of one of the endpoint's tools,
// listed or hidden from the caller.
func endpointExposed(ep *mcpgate.ServerEndpoint, name string) (string, bool) {
	i := slices.IndexFunc(ep.Tools, func(t mcpgate.EndpointTool) bool { return t.Name == name })
	if i < 0 {
		exposed, ok := ep.Hidden[name]
		return exposed, ok
	}
	return ep.Tools[i].ExposedName, true
}

// buildServerEndpoint builds the go-sdk server of one request.
func (g *Gateway) buildServerEndpoint(eps mcpgate.ServerEndpointService, ep *mcpgate.ServerEndpoint, legacy bool) *sdk.Server {
	impl, caps, instructions := endpointInit(ep)
	opts := &sdk.ServerOptions{Capabilities: caps, Instructions: instructions, Logger: g.sdkLog}
	if subs := endpointSubscriptions(eps, ep); subs != nil {
		// Subscriptions are the gateway's to hold (subscriptions.go).
		caps.Resources.Subscribe = true
		opts.SubscribeHandler, opts.UnsubscribeHandler = g.subscribeHandlers(subs, ep.Server)
	}
	s := sdk.NewServer(impl, opts)
	s.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			switch {
			case method == "tools/list":
				return endpointToolList(ep, legacy)
			case method == "tools/call":
				return g.endpointCall(ctx, next, method, req, ep)
			case relayedMethods[method]:
				return g.relay(ctx, eps, ep, method, req, legacy)
			}
			return next(ctx, method, req)
		}
	})
	return s
}

// endpointInit reads what the endpoint says of itself from the upstream's
// initialize result: its serverInfo and instructions as given, and its
// capabilities less what is not relayed.
func endpointInit(ep *mcpgate.ServerEndpoint) (*sdk.Implementation, *sdk.ServerCapabilities, string) {
	init := readInit(ep)
	impl := init.ServerInfo
	if impl == nil || impl.Name == "" {
		impl = &sdk.Implementation{Name: ep.Server}
	}
	up := init.Capabilities
	caps := &sdk.ServerCapabilities{}
	// Prompts and resources list changes are pushed where the upstream
	// declares them (endpointpush.go).
	if up.Prompts != nil {
		caps.Prompts = &sdk.PromptCapabilities{ListChanged: up.Prompts.ListChanged}
	}
	if up.Resources != nil {
		caps.Resources = &sdk.ResourceCapabilities{ListChanged: up.Resources.ListChanged}
	}
	if up.Tools != nil || len(ep.Tools) > 0 {
		// The gateway pushes its own changes of the list (listen.go).
		caps.Tools = &sdk.ToolCapabilities{ListChanged: true}
	}
	if up.Completions != nil {
		caps.Completions = &sdk.CompletionCapabilities{}
	}
	//lint:ignore SA1019 logging is relayed for the 2025 protocols, where it is not deprecated
	if up.Logging != nil {
		//lint:ignore SA1019 logging is relayed for the 2025 protocols, where it is not deprecated
		caps.Logging = &sdk.LoggingCapabilities{}
	}
	return impl, caps, init.Instructions
}

// upstreamInit is what the endpoint reads of the upstream's initialize.
type upstreamInit struct {
	ServerInfo   *sdk.Implementation     `json:"serverInfo"`
	Capabilities *sdk.ServerCapabilities `json:"capabilities"`
	Instructions string                  `json:"instructions"`
}

// readInit reads the upstream's initialize result as stored, its
// capabilities never nil.
func readInit(ep *mcpgate.ServerEndpoint) upstreamInit {
	var init upstreamInit
	_ = json.Unmarshal(ep.Init, &init)
	if init.Capabilities == nil {
		init.Capabilities = &sdk.ServerCapabilities{}
	}
	return init
}

// upstreamCapabilities are the upstream's capabilities as stored.
func upstreamCapabilities(ep *mcpgate.ServerEndpoint) *sdk.ServerCapabilities {
	return readInit(ep).Capabilities
}

// endpointToolList is tools/list: each tool's definition as the server
// gave it, with, for a tool that may need confirmation or a person's
// approval in this workspace, the gateway's argument for it in the input
// schema and no output schema (as on /mcp: the first answer is the
// confirmation or approval step, not the tool's output).
func endpointToolList(ep *mcpgate.ServerEndpoint, legacy bool) (sdk.Result, error) {
	defs := make([]json.RawMessage, 0, len(ep.Tools))
	for _, t := range ep.Tools {
		defs = append(defs, endpointToolDef(t))
	}
	b, err := json.Marshal(map[string]any{"tools": defs})
	if err != nil {
		return nil, err
	}
	return newRawResult("tools/list", b, legacy)
}

func endpointToolDef(t mcpgate.EndpointTool) json.RawMessage {
	arg := ""
	switch t.Approval {
	case mcpgate.ApprovalModel:
		arg = confirmationArg
	case mcpgate.ApprovalHuman:
		arg = approvalArg
	default:
		return t.Definition
	}
	var def map[string]json.RawMessage
	var schema map[string]json.RawMessage
	if json.Unmarshal(t.Definition, &def) != nil || json.Unmarshal(def["inputSchema"], &schema) != nil {
		return t.Definition
	}
	var props map[string]json.RawMessage
	_ = json.Unmarshal(schema["properties"], &props)
	props = maps.Clone(props)
	if props == nil {
		props = map[string]json.RawMessage{}
	}
	desc := "The approval_id returned by the first call, once a person has approved it in the dashboard. Omit it on the first call."
	if arg == confirmationArg {
		desc = "The confirmation_token returned by the first call, once the user has agreed. Omit it on the first call."
	}
	props[arg], _ = json.Marshal(map[string]string{"type": "string", "description": desc})
	schema["properties"], _ = json.Marshal(props)
	def["inputSchema"], _ = json.Marshal(schema)
	delete(def, "outputSchema")
	b, err := json.Marshal(def)
	if err != nil {
		return t.Definition
	}
	return b
}

// endpointCall runs a tools/call by the tool's own name through the call
// path of /mcp, under the name the tool service knows: a tool hidden from
// the caller too, which the service refuses with its reason. A name the
// server does not have is go-sdk's unknown tool.
func (g *Gateway) endpointCall(ctx context.Context, next sdk.MethodHandler, method string, req sdk.Request, ep *mcpgate.ServerEndpoint) (sdk.Result, error) {
	call, ok := req.(*sdk.CallToolRequest)
	if !ok || call.Params == nil {
		return next(ctx, method, req)
	}
	exposed, ok := endpointExposed(ep, call.Params.Name)
	if !ok {
		return next(ctx, method, req)
	}
	if err := g.limitCall(actorFrom(ctx)); err != nil {
		return toolErrorResult(err), nil
	}
	return g.callTool(ctx, call, exposed, true)
}

// limitedRelays are the relayed methods that count against the caller's
// limits as a tool call does: the ones a model makes to get work done (a
// prompt, a resource, completions). The others, the lists and the log
// level, count against a bucket of their own (limitRelayList), not the
// call limits, so that a client that connects often and lists everything
// each time is not locked out of its calls having called nothing.
var limitedRelays = map[string]bool{"prompts/get": true, "resources/read": true, "completion/complete": true}

// The lists a server's endpoint relays (prompts/list, resources/list,
// resources/templates/list, and logging/setLevel with them) are bounded
// per credential and server: a burst of relayListBurst, then
// relayListRate a second. A client lists three things at each connect, so
// twenty connects in a row pass and then one every three seconds, forever
// (far above what any client does); a client hammering the lists makes the
// gateway send at most that to the upstream with the workspace's
// credential. Per server, so that one server's lists never use up
// another's.
//
// Why a bucket and not the discovery's stored copies (upstream_servers
// keeps the prompts, resources and templates of the last discovery): those
// are the dashboard's view as of the last discovery, capped to a page, and
// a server's resources change between discoveries (files, tickets, rows);
// served from the copy, a client would not see a resource the server has,
// or would be sent one it no longer has, until an admin rediscovers. The
// relay keeps the endpoint the server's own, and the bucket bounds it.
const (
	relayListRate  = 1
	relayListBurst = 60
)

// limitRelayList takes a list's token from the credential's bucket for
// the server.
func (g *Gateway) limitRelayList(a *mcpgate.Actor, server string) error {
	if a == nil {
		return nil
	}
	now := g.now()
	if ok, wait := g.relayLists.Allow(a.CredentialID()+"\x00"+server, now); !ok {
		g.metrics.RateLimited()
		return retryAfter(mcpgate.Errorf(mcpgate.ETooMany,
			"this key is listing this server's prompts and resources too often; slow down"), wait)
	}
	return nil
}

// relay sends one relayed request to the upstream.
func (g *Gateway) relay(ctx context.Context, eps mcpgate.ServerEndpointService, ep *mcpgate.ServerEndpoint, method string,
	req sdk.Request, legacy bool) (sdk.Result, error) {
	a := actorFrom(ctx)
	limit := g.limitCall
	if !limitedRelays[method] {
		limit = func(a *mcpgate.Actor) error { return g.limitRelayList(a, ep.Server) }
	}
	if err := limit(a); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: mcpgate.ErrorMessage(err)}
	}
	params, err := json.Marshal(req.GetParams())
	if err != nil {
		return nil, err
	}
	ctx, done := g.untilStop(ctx)
	defer done()
	raw, err := eps.RelayToServer(ctx, a, ep.Server, method, params)
	if rpcErr := (*mcpgate.UpstreamRPCError)(nil); errors.As(err, &rpcErr) {
		code := rpcErr.Code
		if legacy && method == "resources/read" && code == codeInvalidParams && rpcErr.Message == "Resource not found" {
			code = codeLegacyResourceNotFound // as versioned.go does for /mcp
		}
		return nil, &jsonrpc.Error{Code: code, Message: rpcErr.Message, Data: rpcErr.Data}
	}
	if err != nil {
		err = stoppingError(ctx, err)
		g.log.WarnContext(ctx, "relay to upstream server", "server", ep.Server, "method", method, "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: mcpgate.ErrorMessage(err)}
	}
	return newRawResult(method, raw, legacy)
}

// rawResult is an upstream's result relayed as it came: its members kept
// byte for byte, its _meta held where go-sdk can add the keys of the
// endpoint's own protocol (serverInfo, on 2026-07-28).
type rawResult struct {
	sdk.ResultBase
	fields map[string]json.RawMessage
}

// hopResultMeta are the _meta keys of the upstream's result that describe
// the hop, not the answer: the upstream's own serverInfo.
var hopResultMeta = []string{sdk.MetaKeyServerInfo}

// newRawResult reads an upstream's result to method. The upstream may
// speak another protocol generation with the gateway than the client
// does with the endpoint, so the members that differ between them are
// set for the client's: a session before 2026-07-28 gets none of that
// version's (as versioned.go does for /mcp); a 2026-07-28 one gets the
// result type and, on a cacheable result, the caching hints it requires,
// where the upstream gave none: not to be cached (ttlMs 0), by the
// caller's client only (private: the answer was read with the
// workspace's credential, under the caller's policy).
func newRawResult(method string, raw json.RawMessage, legacy bool) (*rawResult, error) {
	r := &rawResult{}
	if err := json.Unmarshal(raw, &r.fields); err != nil || r.fields == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the upstream server's result is not a JSON object"}
	}
	if m, ok := r.fields["_meta"]; ok {
		delete(r.fields, "_meta")
		var meta map[string]any
		if json.Unmarshal(m, &meta) == nil {
			for _, k := range hopResultMeta {
				delete(meta, k)
			}
			if len(meta) > 0 {
				r.Meta = meta
			}
		}
	}
	if legacy {
		for _, f := range append(slices.Clone(newerListFields), "resultType") {
			delete(r.fields, f)
		}
		return r, nil
	}
	setDefault(r.fields, "resultType", `"complete"`)
	if versionedMethods[method] {
		setDefault(r.fields, "ttlMs", `0`)
		setDefault(r.fields, "cacheScope", `"private"`)
	}
	return r, nil
}

func setDefault(m map[string]json.RawMessage, key, value string) {
	if _, ok := m[key]; !ok {
		m[key] = json.RawMessage(value)
	}
}

// MarshalJSON writes the upstream's members with the _meta as it stands.
func (r *rawResult) MarshalJSON() ([]byte, error) {
	out := maps.Clone(r.fields)
	if len(r.Meta) > 0 {
		b, err := json.Marshal(r.Meta)
		if err != nil {
			return nil, err
		}
		out["_meta"] = b
	}
	return json.Marshal(out)
}
