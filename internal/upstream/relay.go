//lint:file-ignore SA1019 the upstream's logging is relayed while the protocol still has it (deprecated from 2026-07-28)

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

// The methods Relay sends, besides tools/call (Call): a server's own
// endpoint relays them to the one upstream it serves. Every one of them
// reads (a prompt, a resource, completions) or sets the session's log
// level, so each is safe to send again on a new session when the upstream
// has forgotten the old one.
const (
	MethodPromptsList            = "prompts/list"
	MethodPromptsGet             = "prompts/get"
	MethodResourcesList          = "resources/list"
	MethodResourcesRead          = "resources/read"
	MethodResourceTemplatesList  = "resources/templates/list"
	MethodCompletionComplete     = "completion/complete"
	MethodLoggingSetLevel        = "logging/setLevel"
	newProtocolVersion           = "2026-07-28"
	errUnknownRelayMethodMessage = "the gateway does not relay %q to upstream servers"
)

// RelayMethods are the methods Relay accepts.
var RelayMethods = []string{MethodPromptsList, MethodPromptsGet, MethodResourcesList, MethodResourcesRead,
	MethodResourceTemplatesList, MethodCompletionComplete, MethodLoggingSetLevel}

// Relay sends one request of method (one of RelayMethods) with params (its
// JSON params object, as the caller's client sent it) to target on a
// session of key held for this request alone, as Call does, and returns
// the upstream's raw result. Errors are as Call's: *RPCError for the
// upstream's JSON-RPC answer, *Error for the hop, the caller's context's
// error for its own cancellation. The caller's _meta is relayed without the keys of the hop itself (progress token,
// the 2026-07-28 protocol keys), which describe the gateway's session.
//
// Two answers do not come from the wire. A list or read the SDK's client
// answers from its cache (2026-07-28 sessions cache what the upstream
// marked cacheable, for as long as it said) is the cached result as the
// SDK decoded it. logging/setLevel on a 2026-07-28 session, which has no
// session log level (the level travels in each request's _meta), answers
// an empty result: the gateway asks such a server for every level in each
// call's _meta, and the caller's own level filters where a message is sent
// on, so there is no level of the caller's to keep.
func (p *Pool[K]) Relay(ctx context.Context, key K, target Target, method string, params json.RawMessage) (json.RawMessage, error) {
	send, ok := relaySenders[method]
	if !ok {
		return nil, &Error{Kind: KindProtocol, Message: fmt.Sprintf(errUnknownRelayMethodMessage, method)}
	}
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	ctx, done := p.untilClosed(ctx)
	defer done()
	for attempt := 0; ; attempt++ {
		e, s, err := p.acquire(ctx, key, target, attempt > 0)
		if err != nil {
			return nil, err
		}
		began := time.Now()
		raw, err := s.relay(ctx, method, params, send, p.limits)
		var rpcErr *RPCError
		p.release(e, err != nil && !errors.As(err, &rpcErr) && !errors.Is(err, errBadParams))
		if errors.Is(err, errSessionMissing) {
			p.forgotten(e, began)
		}
		if errors.Is(err, errSessionMissing) && attempt == 0 {
			continue // a read: safe to repeat once on the new session
		}
		if errors.Is(err, errSessionMissing) {
			return nil, &Error{Kind: KindSessionExpired, Status: 404, Message: "the server ended the session twice in a row"}
		}
		return raw, err
	}
}

// errBadParams is params the SDK's types cannot hold: the caller's
// mistake, which says nothing about the session.
var errBadParams = &mcpgate.Error{Code: mcpgate.EInvalid, Message: "the request's params do not match the method"}

// relaySender decodes params into the SDK's type of the method and sends
// it on cs, returning the SDK's typed result (used only when it came from
// the SDK's cache) and its error.
type relaySender func(ctx context.Context, cs *mcp.ClientSession, params json.RawMessage) (any, error)

// sendAs decodes params into a P with the hop's _meta keys removed, and
// sends it with call.
func sendAs[P any, PP interface {
	*P
	mcp.Params
}, R any](call func(*mcp.ClientSession, context.Context, PP) (R, error)) relaySender {
	return func(ctx context.Context, cs *mcp.ClientSession, raw json.RawMessage) (any, error) {
		pp := PP(new(P))
		if err := json.Unmarshal(raw, pp); err != nil {
			return nil, fmt.Errorf("%w: %w", errBadParams, err)
		}
		if m := pp.GetMeta(); m != nil {
			for _, k := range hopMetaKeys {
				delete(m, k)
			}
			if len(m) == 0 {
				m = nil
			}
			pp.SetMeta(m)
		}
		return call(cs, ctx, pp)
	}
}

var relaySenders = map[string]relaySender{
	MethodPromptsList:           sendAs((*mcp.ClientSession).ListPrompts),
	MethodPromptsGet:            sendAs((*mcp.ClientSession).GetPrompt),
	MethodResourcesList:         sendAs((*mcp.ClientSession).ListResources),
	MethodResourcesRead:         sendAs((*mcp.ClientSession).ReadResource),
	MethodResourceTemplatesList: sendAs((*mcp.ClientSession).ListResourceTemplates),
	MethodCompletionComplete:    sendAs((*mcp.ClientSession).Complete),
	MethodLoggingSetLevel: sendAs(func(cs *mcp.ClientSession, ctx context.Context, p *mcp.SetLoggingLevelParams) (any, error) {
		if newProtocol(cs) {
			return struct{}{}, nil
		}
		return nil, cs.SetLoggingLevel(ctx, p)
	}),
}

func newProtocol(cs *mcp.ClientSession) bool {
	init := cs.InitializeResult()
	return init != nil && init.ProtocolVersion >= newProtocolVersion
}

// relay sends one relayed request under the pool's limits and returns the
// raw answer, or the SDK's cached or local result when none came.
func (s *session) relay(ctx context.Context, method string, params json.RawMessage, send relaySender, lim Limits) (json.RawMessage, error) {
	var local any
	var sendErr error
	raw, err := s.request(ctx, method, lim, func(ctx context.Context) error {
		local, sendErr = send(ctx, s.cs, params)
		return sendErr
	})
	if errors.Is(sendErr, errBadParams) {
		return nil, sendErr
	}
	if err == nil {
		return raw, nil
	}
	if w := answeredError(sendErr); w != nil && ctx.Err() == nil {
		// The upstream answered with a JSON-RPC error in a non-2xx HTTP
		// answer (a stateless go-sdk server does so for an unknown
		// resource): its answer, not a failure of the hop.
		return nil, s.redact.rpc(w)
	}
	var hopErr *Error
	if sendErr == nil && local != nil && errors.As(err, &hopErr) && ctx.Err() == nil {
		// No answer came on the wire, yet the SDK returned a result
		// without an error: it answered from its cache (or, for setLevel
		// on a sessionless protocol, locally).
		b, merr := json.Marshal(local)
		if merr != nil {
			return nil, fmt.Errorf("encode %s result: %w", method, merr)
		}
		return b, nil
	}
	return nil, err
}

// answeredError finds, in the SDK's error, the JSON-RPC error the upstream
// answered with, past the SDK's own "rejected by transport" marker (which
// is a JSON-RPC error too); nil when there is none.
func answeredError(err error) *jsonrpc.Error {
	if err == nil {
		return nil
	}
	var w *jsonrpc.Error
	if errors.As(err, &w) && w.Code != codeRejected && w.Message != "" {
		return w
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if w := answeredError(e); w != nil {
				return w
			}
		}
	case interface{ Unwrap() error }:
		return answeredError(u.Unwrap())
	}
	return nil
}

// codeRejected is the SDK's own code for a request its transport refused.
const codeRejected = -32005

// withoutValues is ctx's deadline and cancellation without its values,
// for opening a session: go-sdk's server keeps the calling client's
// protocol version in the request's context under the key its client
// reads when it sends initialize, so a session opened while serving a
// 2026-07-28 client would tell a 2025-11-25 upstream it speaks 2026-07-28
// (and be refused). Requests on an open session carry the negotiated
// version instead (hopTransport); their context keeps its values, since
// the pool's own causes (idle, too large) travel in them.
func withoutValues(ctx context.Context) context.Context { return valuelessContext{ctx} }

type valuelessContext struct{ parent context.Context }

func (c valuelessContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c valuelessContext) Done() <-chan struct{}       { return c.parent.Done() }
func (c valuelessContext) Err() error                  { return c.parent.Err() }
func (c valuelessContext) Value(any) any               { return nil }
