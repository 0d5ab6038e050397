//lint:file-ignore SA1019 sampling and roots are relayed while the protocol still has them (deprecated from 2026-07-28)

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

// Requests of the server to its client during a call (sampling,
// elicitation, roots). A session declares the capabilities of its
// target's Capabilities and no more; the server's requests are handed to
// the call holding the session (a session carries one call at a time, see
// Pool.acquire), whose OnRequest relays them to the gateway's caller:
//
//   - on the 2025 protocols the server sends them on the call's stream;
//     a client receiving middleware takes them before go-sdk's handlers
//     (which have no hook for roots/list, answered from AddRoots);
//   - on 2026-07-28 it answers the call input_required. A session with
//     capabilities turns go-sdk's own retry loop off (it would answer
//     through the handlers, roots again from AddRoots) and either returns
//     that result as it came (PassInputRequests: the caller retries) or
//     answers each input request through OnRequest and retries the call
//     itself, up to maxInputRounds.
//
// The call's idle timeout is held while a request waits for its answer (a
// person filling in a form takes minutes); its absolute timeout stands.

// maxInputRounds bounds the retries of a call the gateway answers input
// requests for: a server that asks again and again is cut off.
const maxInputRounds = 8

// codeNoClient is the JSON-RPC error for a request no caller can answer:
// none holds the session, or its caller has no way to be asked.
const codeNoClient = jsonrpc.CodeMethodNotFound

// declared is what a session with caps declares to its server.
func declared(caps Capabilities) *mcp.ClientCapabilities {
	out := &mcp.ClientCapabilities{}
	if caps.Sampling {
		out.Sampling = &mcp.SamplingCapabilities{}
		if caps.SamplingTools {
			out.Sampling.Tools = &mcp.SamplingToolsCapabilities{}
		}
	}
	if caps.ElicitationForm || caps.ElicitationURL {
		out.Elicitation = &mcp.ElicitationCapabilities{}
		if caps.ElicitationForm {
			out.Elicitation.Form = &mcp.FormElicitationCapabilities{}
		}
		if caps.ElicitationURL {
			out.Elicitation.URL = &mcp.URLElicitationCapabilities{}
		}
	}
	if caps.Roots {
		out.RootsV2 = &mcp.RootCapabilities{}
	}
	return out
}

// relaysRequests reports whether a session with caps answers any request.
func (c Capabilities) relaysRequests() bool {
	return c.ClientCapabilities != (mcpgate.ClientCapabilities{})
}

// clientMethods are the server's requests a call relays.
var clientMethods = map[string]bool{mcpgate.MethodCreateMessage: true, mcpgate.MethodElicit: true, mcpgate.MethodListRoots: true}

// clientRequestMiddleware takes the server's requests to the client off
// go-sdk's handlers and hands them to the session's call.
func clientRequestMiddleware(state *sessionState) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if !clientMethods[method] {
				return next(ctx, method, req)
			}
			// The params as go-sdk read them, written again: the protocol's
			// members (a form's mode made explicit), nothing the types lack.
			params, err := json.Marshal(req.GetParams())
			if err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the request's params could not be read"}
			}
			if string(params) == "null" {
				params = json.RawMessage(`{}`)
			}
			call := state.currentCall()
			if call == nil {
				return nil, &jsonrpc.Error{Code: codeNoClient, Message: "no call of the gateway's is in flight on this session to ask"}
			}
			raw, err := call.ask(ctx, method, params)
			if err != nil {
				return nil, toWireError(err)
			}
			return &rawClientResult{raw: raw}, nil
		}
	}
}

// toWireError is the JSON-RPC error the server gets for a request the
// caller did not answer.
func toWireError(err error) error {
	if rpc := (*mcpgate.ClientRPCError)(nil); errors.As(err, &rpc) {
		return &jsonrpc.Error{Code: rpc.Code, Message: rpc.Message, Data: rpc.Data}
	}
	if errors.Is(err, errNoAsker) {
		return &jsonrpc.Error{Code: codeNoClient, Message: err.Error()}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the gateway's caller did not answer: " + mcpgate.ErrorMessage(err)}
}

var errNoAsker = errors.New("the gateway's caller cannot be asked during this call")

// rawClientResult is the caller's answer, sent to the server as it came.
type rawClientResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawClientResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// asking is what a call needs to relay its server's requests.
type asking struct {
	onRequest func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// ctx is the call's: a request ends with it, or with the server's
	// cancellation of the request.
	ctx context.Context
	// waiting counts the requests waiting for an answer; the idle timer
	// is stopped from the first and set again when the last is answered.
	mu      sync.Mutex
	waiting int
}

// ask relays one request of the server to the call's caller.
func (c *callState) ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	a := c.asking
	if a == nil || a.onRequest == nil || c.finished.Load() {
		return nil, errNoAsker
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(a.ctx, cancel)
	defer stop()
	a.mu.Lock()
	if a.waiting++; a.waiting == 1 {
		c.idle.Stop()
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.waiting--; a.waiting == 0 && !c.finished.Load() {
			c.idle.Reset(c.idleFor)
		}
	}()
	return a.onRequest(ctx, method, params)
}

// InputRequired is a 2026-07-28 input_required result's input requests
// and state, raw.
type InputRequired struct {
	ResultType    string `json:"resultType"`
	InputRequests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"inputRequests"`
	RequestState string `json:"requestState"`
}

// ReadInputRequired returns raw's input requests, or nil for a result
// that asks for none.
func ReadInputRequired(raw json.RawMessage) *InputRequired {
	var r InputRequired
	if json.Unmarshal(raw, &r) != nil || r.ResultType != "input_required" || len(r.InputRequests) == 0 {
		return nil
	}
	return &r
}

// answerInputs answers each input request through the call's caller, one
// at a time (a person answers one form after the other), and returns the
// answers as the retry carries them.
func (c *callState) answerInputs(ctx context.Context, ir *InputRequired) (mcp.InputResponseMap, error) {
	answers := make(map[string]json.RawMessage, len(ir.InputRequests))
	for id, r := range ir.InputRequests {
		if !clientMethods[r.Method] {
			return nil, &Error{Kind: KindProtocol, Message: fmt.Sprintf("the server asked for input by %q, which is no client request", r.Method)}
		}
		params := r.Params
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{}`)
		}
		raw, err := c.ask(ctx, r.Method, params)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, &Error{Kind: KindProtocol, Message: "the server's input request could not be answered: " + mcpgate.ErrorMessage(err)}
		}
		answers[id] = raw
	}
	return decodeInputResponses(mustMarshal(answers))
}

// decodeInputResponses reads a retry's answers (a JSON object of input
// request ids to results) into go-sdk's type.
func decodeInputResponses(raw json.RawMessage) (mcp.InputResponseMap, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m mcp.InputResponseMap
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: inputResponses: %w", errBadParams, err)
	}
	return m, nil
}

func mustMarshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
