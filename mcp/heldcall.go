package mcp

// Held calls: a 2026-07-28 caller of an upstream on the 2025 protocols.
// Such an upstream asks its client during a call (sampling, elicitation,
// roots), and waits for the answer on its session; a 2026-07-28 client
// answers only by retrying its call. So the gateway holds the call: the
// tool call goes on in the background, and the upstream's request reaches
// the caller as an input_required result (the request under the input id
// heldInputID), with a request state sealed as the upstream's own are
// (inputstate.go: bound to the caller, the tool and the arguments) that
// names the held call and the round. The retry's answer goes to the held
// call, and the retry answers with what comes next: the upstream's next
// request, as another input_required, or the call's result.
//
// The retry may reach another replica than the one holding the call:
// answers and what comes next pass between them as relayed answers do
// (streamrelay.go: delivered here if the waiter is here, else sealed
// through RelayAnswers), each under a key of its own per held call and
// round, bound to the caller.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

const (
	// heldInputID is the input id of a held call's request.
	heldInputID = "mcpgate"
	// heldAnswerWait bounds how long a held call waits for the retry
	// that answers one request: a person filling in a form. An answer
	// from another replica waits in the store (five minutes at most) only
	// until the held call is told of it, or its poll.
	heldAnswerWait = 10 * time.Minute
)

// errNoHeldAnswer answers a retry of a held call without the answer.
var errNoHeldAnswer = mcpgate.Errorf(mcpgate.EInvalid,
	"This retry carries no answer to the input request %q: retry with it in inputResponses.", heldInputID)

// heldStep is what a held call says next: the upstream's request to the
// caller, or the call's outcome.
type heldStep struct {
	Request *mcpgate.ClientRequest `json:"q,omitempty"`
	Result  json.RawMessage        `json:"r,omitempty"`
	Err     string                 `json:"e,omitempty"`
	Code    mcpgate.Code           `json:"c,omitempty"`
}

// heldKeys name a held call's messages: the step after round n, and the
// answer to round n.
func heldStepKey(id string, n int) string {
	return relayKeyOf("held step " + id + " " + strconv.Itoa(n))
}
func heldAnswerKey(id string, n int) string {
	return relayKeyOf("held answer " + id + " " + strconv.Itoa(n))
}

// heldBinding binds a held call's messages to its caller and tool.
func (g *Gateway) heldBinding(a *mcpgate.Actor, tool string) string {
	return g.relayBinding(a, "held call\x00"+tool, "")
}

// holds reports whether a call's upstream requests are held for its
// caller: a 2026-07-28 caller that declared any client capability.
func holds(r mcpgate.Relay) bool {
	return r.InputRetry && r.Capabilities != (mcpgate.ClientCapabilities{})
}

// heldPerCredential bounds the calls one key or grant may have held on a
// replica: each keeps an upstream session and a goroutine for as long as
// its caller takes to retry. Past it, a call is made unheld (its
// upstream's requests are refused, saying why).
const heldPerCredential = 16

// heldSlots counts the calls held per credential.
type heldSlots struct {
	mu sync.Mutex
	n  map[string]int
}

func (hs *heldSlots) take(cred string) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.n == nil {
		hs.n = map[string]int{}
	}
	if hs.n[cred] >= heldPerCredential {
		return false
	}
	hs.n[cred]++
	return true
}

func (hs *heldSlots) release(cred string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.n[cred]--; hs.n[cred] <= 0 {
		delete(hs.n, cred)
	}
}

// total is the calls held on this replica.
func (hs *heldSlots) total() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n := 0
	for _, c := range hs.n {
		n += c
	}
	return n
}

// HeldCalls is how many calls this replica holds (the metrics' gauge).
func (g *Gateway) HeldCalls() int { return g.heldSlots.total() }

// heldCall is a call held on this replica.
type heldCall struct {
	g    *Gateway
	a    *mcpgate.Actor
	id   string
	bind string
	// turn lets one upstream request at a time be asked (a second one
	// waits its turn, or its context's end).
	turn  chan struct{}
	mu    sync.Mutex
	round int // requests asked so far, under mu
}

// callHeld makes call, holding it should its upstream ask the caller (the
// caller has taken one of its credential's heldSlots, which the call gives
// back as it ends): it
// returns the call's outcome (its error as the tool service gave it, so
// that an approval or a confirmation it needs is asked as for any call),
// or the input_required result that asks the caller the upstream's first
// request (claims are the envelope's, for the retry).
func (g *Gateway) callHeld(ctx context.Context, a *mcpgate.Actor, call mcpgate.ToolCall, claims inputStateClaims) (json.RawMessage, *sdk.CallToolResult, error) {
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	h := &heldCall{g: g, a: a, id: base64.RawURLEncoding.EncodeToString(raw), bind: g.heldBinding(a, claims.Tool),
		turn: make(chan struct{}, 1)}
	first := g.relays.add(heldStepKey(h.id, 0), h.bind)
	defer g.relays.remove(heldStepKey(h.id, 0), first)

	relay := mcpgate.RelayFromContext(ctx)
	relay.Request = h.request
	// The call outlives this request (its retries carry it on), bounded
	// by the longest it may wait on each, and ends at the gateway's stop.
	bg, cancel := g.untilStop(context.WithoutCancel(ctx))
	bg = mcpgate.NewContextWithRelay(bg, relay)
	type outcome struct {
		out json.RawMessage
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer g.heldSlots.release(a.CredentialID())
		defer cancel()
		out, err := g.opts.Tools.CallTool(bg, a, call)
		h.mu.Lock()
		n := h.round
		h.mu.Unlock()
		if n == 0 {
			done <- outcome{out, err} // it asked nothing: this request answers
			return
		}
		step := heldStep{Result: out}
		if err != nil {
			step = heldStep{Err: mcpgate.ErrorMessage(stoppingError(bg, err)), Code: mcpgate.ErrorCode(err)}
		}
		h.send(heldStepKey(h.id, n), step)
	}()
	select {
	case o := <-done:
		return o.out, nil, o.err
	case raw := <-first.answer:
		return g.heldAnswer(raw, claims, h.id, 0)
	case <-ctx.Done():
		cancel() // the caller went away before anything was asked of it
		return nil, nil, stoppingError(ctx, ctx.Err())
	}
}

// request is the held call's Relay.Request: it tells the caller waiting
// for this round's step (the first call or a retry, here or on another
// replica) of the upstream's request, and waits for the retry's answer.
func (h *heldCall) request(ctx context.Context, req mcpgate.ClientRequest) (json.RawMessage, error) {
	select {
	case h.turn <- struct{}{}:
		defer func() { <-h.turn }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	h.mu.Lock()
	n := h.round
	h.round++
	h.mu.Unlock()
	key := heldAnswerKey(h.id, n)
	w := h.g.relays.add(key, h.bind)
	defer h.g.relays.remove(key, w)
	if !h.send(heldStepKey(h.id, n), heldStep{Request: &req}) {
		return nil, mcpgate.Errorf(mcpgate.EUnavailable, "the gateway could not pass the request on to its caller")
	}
	ctx, cancel := context.WithTimeout(ctx, heldAnswerWait)
	defer cancel()
	answer, err := h.g.awaitRelayed(ctx, h.a, w, key, h.bind, nil)
	if err != nil {
		return nil, mcpgate.Errorf(mcpgate.EUnavailable, "the caller did not retry its call with the answer in time")
	}
	return readRelayAnswer(answer)
}

func (h *heldCall) send(key string, step heldStep) bool {
	b, _ := json.Marshal(step)
	return h.g.deliverRelayed(context.Background(), h.a, key, h.bind, b)
}

// resumeHeld answers round c.Round of the held call c names with the
// retry's input responses, and returns what comes next, as callHeld.
func (g *Gateway) resumeHeld(ctx context.Context, a *mcpgate.Actor, c *inputStateClaims, responses sdk.InputResponseMap) (json.RawMessage, *sdk.CallToolResult, error) {
	resp, ok := responses[heldInputID]
	if !ok {
		return nil, nil, errNoHeldAnswer
	}
	result, err := json.Marshal(resp)
	if err != nil {
		return nil, nil, mcpgate.Errorf(mcpgate.EInvalid, "the inputResponses could not be read")
	}
	bind := g.heldBinding(a, c.Tool)
	next := heldStepKey(c.Held, c.Round+1)
	w := g.relays.add(next, bind)
	defer g.relays.remove(next, w)
	answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": heldInputID, "result": json.RawMessage(result)})
	if !g.deliverRelayed(ctx, a, heldAnswerKey(c.Held, c.Round), bind, answer) {
		return nil, nil, mcpgate.Errorf(mcpgate.EUnavailable, "The call this retry answers is no longer held: call the tool again.")
	}
	return g.nextHeldStep(ctx, a, w, next, bind, *c, c.Held, c.Round+1)
}

// nextHeldStep waits for the held call's step after round n and answers
// with it.
func (g *Gateway) nextHeldStep(ctx context.Context, a *mcpgate.Actor, w *relayWaiter, key, bind string, claims inputStateClaims,
	id string, n int) (json.RawMessage, *sdk.CallToolResult, error) {
	wait, cancel := context.WithTimeout(ctx, maxRelayWait)
	defer cancel()
	raw, err := g.awaitRelayed(wait, a, w, key, bind, nil)
	if err != nil {
		return nil, nil, stoppingError(ctx, mcpgate.Errorf(mcpgate.EUnavailable, "the held call did not go on in time; call the tool again"))
	}
	return g.heldAnswer(raw, claims, id, n)
}

// heldAnswer answers with the held call's step after round n: the
// upstream's request as an input_required result, or the outcome.
func (g *Gateway) heldAnswer(raw json.RawMessage, claims inputStateClaims, id string, n int) (json.RawMessage, *sdk.CallToolResult, error) {
	var step heldStep
	if json.Unmarshal(raw, &step) != nil {
		return nil, nil, mcpgate.Errorf(mcpgate.EInternal, "the held call's step could not be read")
	}
	switch {
	case step.Request != nil:
		claims.Held, claims.Round = id, n
		claims.Expires = g.now().Add(inputStateTTL).Unix()
		return nil, heldInputRequired(*step.Request, g.sealClaims(claims)), nil
	case step.Err != "":
		return nil, nil, mcpgate.Errorf(step.Code, "%s", step.Err)
	}
	return step.Result, nil, nil
}

// heldInputRequired is the input_required result asking the caller req.
func heldInputRequired(req mcpgate.ClientRequest, state string) *sdk.CallToolResult {
	raw, _ := json.Marshal(map[string]any{"resultType": "input_required", "requestState": state,
		"inputRequests": map[string]any{heldInputID: map[string]any{"method": req.Method, "params": req.Params}}})
	return relayedResult(raw)
}
