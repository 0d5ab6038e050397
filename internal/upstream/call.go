//lint:file-ignore SA1019 the upstream's logging is relayed while the protocol still has it (deprecated from 2026-07-28)

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CallRequest is one tools/call to relay.
type CallRequest struct {
	// Tool is the tool's name as the upstream gave it (the route's Tool).
	Tool string
	// Arguments is the JSON object of arguments, relayed as it is.
	Arguments json.RawMessage
	// Meta is the caller's _meta. It is relayed except for the keys the
	// hop sets itself: the progress token (the gateway sends one of its
	// own and relays progress to OnProgress) and the 2026-07-28 protocol
	// keys, which describe the gateway's session, not the caller's.
	Meta map[string]any
	// OnProgress receives the upstream's progress notifications.
	OnProgress func(Progress)
	// OnLog receives the log messages the upstream sends during the call
	// (every level: the caller filters).
	OnLog func(LogMessage)
	// OnRequest answers the requests the upstream sends its client during
	// the call (sampling/createMessage, elicitation/create, roots/list,
	// as declared in the target's Capabilities), and, on a session that
	// does not pass them (Capabilities.PassInputRequests), the input
	// requests of a 2026-07-28 input_required result. params are the
	// upstream's, raw; the result goes back to it raw. An error of type
	// *mcpgate.ClientRPCError is sent as that JSON-RPC error. nil: every
	// such request is refused. The call's idle timeout does not run while
	// it waits.
	OnRequest func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// RequestState and InputResponses are a retry's answer to the
	// upstream's input_required result (2026-07-28), sent as they are.
	RequestState   string
	InputResponses json.RawMessage
	// SafeToRepeat lets the call be sent again once, on a new session,
	// when the upstream answered that the session had expired.
	SafeToRepeat bool
	// Limits override the pool's for this call (per-server guardrails).
	Limits Limits
}

// CallResult is the upstream's tools/call result, exactly as it came.
type CallResult struct {
	Raw     json.RawMessage
	IsError bool
}

// hopMetaKeys are the _meta keys of the hop itself.
// (The log level's key is spelled out: go-sdk marks its constant
// deprecated with the logging feature.)
var hopMetaKeys = []string{"progressToken", mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo,
	mcp.MetaKeyClientCapabilities, "io.modelcontextprotocol/logLevel", mcp.MetaKeySubscriptionID}

func relayMeta(caller map[string]any, token string, logLevel mcp.LoggingLevel) map[string]any {
	m := make(map[string]any, len(caller)+1)
	for k, v := range caller {
		m[k] = v
	}
	for _, k := range hopMetaKeys {
		delete(m, k)
	}
	m["progressToken"] = token
	if logLevel != "" {
		m["io.modelcontextprotocol/logLevel"] = logLevel
	}
	return m
}

// Call calls one tool of target on a session of key held for this call
// alone (see acquire: an idle one of the same URL and credential, else a
// new one up to SessionsPerKey, else the next one given back). The result
// is the upstream's, raw; a JSON-RPC error comes back as *RPCError, any
// other failure as *Error, and the caller's own cancellation as its
// context's error. When the upstream has forgotten the session (404), the
// call is repeated once on a new session if req says it is safe to
// repeat; otherwise the call fails with KindSessionExpired, after a new
// session is opened for the next call.
func (p *Pool[K]) Call(ctx context.Context, key K, target Target, req CallRequest) (*CallResult, error) {
	ctx, done := p.untilClosed(ctx)
	defer done()
	for attempt := 0; ; attempt++ {
		e, s, err := p.acquire(ctx, key, target, attempt > 0)
		if err != nil {
			return nil, err
		}
		began := time.Now()
		raw, err := p.callOn(ctx, s, req)
		// Any failure but the upstream's own JSON-RPC answer may have
		// broken the SDK's connection (a JSON answer cut short fails it,
		// and the SDK tells no one), so the session is retired and the
		// next call opens a new one rather than fail on a dead one.
		var rpcErr *RPCError
		p.release(e, err != nil && !errors.As(err, &rpcErr))
		if errors.Is(err, errSessionMissing) {
			p.forgotten(e, began)
		}
		if !errors.Is(err, errSessionMissing) {
			if err != nil {
				return nil, err
			}
			return &CallResult{Raw: raw, IsError: isErrorResult(raw)}, nil
		}
		if attempt == 0 && req.SafeToRepeat {
			continue
		}
		if attempt == 0 {
			if e, _, err := p.acquire(ctx, key, target, true); err == nil {
				p.release(e, false)
			}
		}
		return nil, &Error{Kind: KindSessionExpired, Status: 404,
			Message: "the server had ended the session; the gateway opened a new one but did not repeat the call, which is not marked safe to repeat"}
	}
}

func (p *Pool[K]) callOn(ctx context.Context, s *session, req CallRequest) (json.RawMessage, error) {
	lim := req.Limits.or(p.limits)
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	token := newToken()
	st := &callState{session: s.cs, idleFor: lim.IdleTimeout, relay: req.OnProgress, log: req.OnLog, redact: s.redact,
		asking: &asking{onRequest: req.OnRequest, ctx: callCtx}}
	st.idle = time.AfterFunc(lim.IdleTimeout, func() { cancel(errIdle) })
	defer st.idle.Stop()
	p.progress.Store(token, st)
	defer p.progress.Delete(token)
	s.state.setCall(st)
	defer s.state.setCall(nil)
	defer st.finished.Store(true)
	// A 2026-07-28 server logs by the level in each request's _meta.
	var level mcp.LoggingLevel
	if req.OnLog != nil && newProtocol(s.cs) && s.logs() {
		level = logAll
	}
	args := req.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	params := &mcp.CallToolParams{Name: req.Tool, Arguments: args, Meta: relayMeta(req.Meta, token, level),
		RequestState: req.RequestState}
	responses, err := decodeInputResponses(req.InputResponses)
	if err != nil {
		return nil, err
	}
	params.InputResponses = responses
	// A session that answers its calls' input requests itself (go-sdk's
	// loop is off where it declares any, see connect) retries the call
	// with the caller's answers; one that passes them returns the result.
	answers := s.caps.relaysRequests() && !s.caps.PassInputRequests
	for round := 0; ; round++ {
		raw, err := s.request(callCtx, "tools/call", lim, func(ctx context.Context) error {
			_, err := s.cs.CallTool(ctx, params)
			return err
		})
		ir := ReadInputRequired(raw)
		if err != nil || ir == nil || !answers {
			return raw, err
		}
		if round == maxInputRounds {
			return nil, s.redact.newError(KindProtocol, nil, "the server asked for input %d times in a row", maxInputRounds+1)
		}
		if params.InputResponses, err = st.answerInputs(callCtx, ir); err != nil {
			return nil, err
		}
		params.RequestState = ir.RequestState
	}
}

func isErrorResult(raw json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(raw, &r)
	return r.IsError
}
