package mcp

// Subscriptions carried to the replica holding the stream. On the
// protocols before 2026-07-28 a resources/subscribe or unsubscribe
// belongs to its client session's standalone stream, which may be open on
// another replica than the one the request reached (nothing in front
// keeps a client on one), or not be open yet (a client opens it after
// initialize, on its own). So a replica that holds no stream of the
// session stores the operation, sealed, for the session's binding (the
// HMAC relayBinding gives; StreamOps, Postgres), which tells every
// replica; the replica holding a stream of that binding claims it, now or
// when the stream opens, makes it as if the request had reached it, and
// stores the answer, which the first replica takes and gives the client.
// An operation nobody claims within streamWait is withdrawn: a subscribe
// is refused (no stream of the session anywhere), an unsubscribe agreed
// (a stream that ended dropped its subscriptions).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcpgate/mcpgate"
)

// StreamOps carries subscription operations from the replica a request
// reached to the one holding its session's stream (Postgres:
// internal/store's stream_ops). Put tells every replica, which call
// Gateway.StreamOpStored; Answer tells them too, and they call
// Gateway.StreamOpAnswered. Operations and answers come sealed.
type StreamOps interface {
	PutStreamOp(ctx context.Context, workspaceID, id, binding string, operation []byte) error
	// ClaimStreamOps claims binding's waiting operations and calls each
	// with them, in the order they were stored.
	ClaimStreamOps(ctx context.Context, binding string, each func(id string, operation []byte)) error
	AnswerStreamOp(ctx context.Context, workspaceID, id string, answer []byte) error
	TakeStreamOpAnswer(ctx context.Context, id string) (answer []byte, ok bool, err error)
	WithdrawStreamOp(ctx context.Context, id string) (withdrawn bool, err error)
}

const (
	opSubscribe   = "subscribe"
	opUnsubscribe = "unsubscribe"
	// streamOpPoll is how often a forwarded operation looks for its
	// answer, should the notification have been lost.
	streamOpPoll = time.Second
	// streamOpWithin bounds a claimed operation's wait for its answer
	// (the holder asks the upstream).
	streamOpWithin = 30 * time.Second
)

// streamOp is a forwarded operation, as sealed.
type streamOp struct {
	Op  string `json:"op"`
	URI string `json:"uri"`
}

// forwards reports whether a subscription of client session sess may be
// carried to another replica: it needs the store, and a session to bind
// it to.
func (g *Gateway) forwards(sess string) bool { return sess != "" && g.opts.StreamOps != nil }

// StreamOpAnswered tells this replica that operation id was answered
// (store.InvalidateStreamOpAnswered); an empty id (notifications may have
// been missed) tells every operation waiting here. A forwarded operation
// waits among the relays' waiters (streamrelay.go), under its id.
func (g *Gateway) StreamOpAnswered(workspaceID, id string) { g.relays.pokeAll(id) }

// StreamOpStored tells this replica that an operation waits for the
// stream of binding (store.InvalidateStreamOp); the replica holding one
// claims it. An empty binding (notifications may have been missed) has
// every stream here that belongs to a session look.
func (g *Gateway) StreamOpStored(workspaceID, binding string) {
	g.push.mu.Lock()
	var holders []*pushStream
	claimed := map[string]bool{}
	for ws, streams := range g.push.byWorkspace {
		if workspaceID != "" && ws != workspaceID {
			continue
		}
		for s := range streams {
			if s.binding != "" && !claimed[s.binding] && (binding == "" || s.binding == binding) {
				claimed[s.binding] = true
				holders = append(holders, s)
			}
		}
	}
	g.push.mu.Unlock()
	for _, s := range holders {
		g.claimStreamOps(s)
	}
}

// claimStreamOps claims, in the background, the operations waiting for
// stream s's session and makes them here.
func (g *Gateway) claimStreamOps(s *pushStream) {
	if s.binding == "" || g.opts.StreamOps == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), streamOpWithin)
		defer cancel()
		err := g.opts.StreamOps.ClaimStreamOps(ctx, s.binding, func(id string, sealed []byte) {
			answer := g.makeStreamOp(ctx, s, id, sealed)
			if sealedAnswer, err := g.relayAEAD("answer:"+id, s.binding, answer, true); err == nil {
				err = g.opts.StreamOps.AnswerStreamOp(ctx, s.workspace, id, sealedAnswer)
				if err != nil {
					g.log.Warn("answer a forwarded subscription", "workspace_id", s.workspace, "err", err)
				}
			}
		})
		if err != nil {
			g.log.Warn("claim forwarded subscriptions", "workspace_id", s.workspace, "err", err)
		}
	}()
}

// makeStreamOp makes a forwarded operation for s's session and returns
// its answer: null, or the JSON-RPC error.
func (g *Gateway) makeStreamOp(ctx context.Context, s *pushStream, id string, sealed []byte) []byte {
	var op streamOp
	plain, err := g.relayAEAD("op:"+id, s.binding, sealed, false)
	if err != nil || json.Unmarshal(plain, &op) != nil {
		return rpcErrorJSON(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the subscription could not be read"})
	}
	streams := g.push.legacyStreams(s.actor, s.endpoint, s.session)
	switch {
	case op.Op == opUnsubscribe:
		k := personServer{s.workspace, s.user, s.endpoint}
		err = g.push.resources.unsubscribe(ctx, k, op.URI, streams)
	case len(streams) == 0:
		err = errNoStandaloneStream // it ended meanwhile
	case s.subs == nil:
		err = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "this server offers no resource subscriptions"}
	default:
		err = g.push.resources.subscribe(ctx, s.subs, s.actor, s.endpoint, op.URI, streams)
	}
	if err = subscriptionRPCError(err); err != nil {
		if rpcErr, ok := err.(*jsonrpc.Error); ok {
			return rpcErrorJSON(rpcErr)
		}
	}
	return []byte("null")
}

func rpcErrorJSON(e *jsonrpc.Error) []byte {
	b, _ := json.Marshal(e)
	return b
}

// forwardStreamOp stores op for the replica holding the stream of a's
// session sess on server and waits for its answer.
func (g *Gateway) forwardStreamOp(ctx context.Context, a *mcpgate.Actor, server, sess string, op streamOp) error {
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	id := hex.EncodeToString(raw)
	bind := g.relayBinding(a, server, sess)
	plain, _ := json.Marshal(op)
	sealed, err := g.relayAEAD("op:"+id, bind, plain, true)
	if err != nil {
		return err
	}
	w := g.relays.add(id, bind) // poked when the answer is stored
	defer g.relays.remove(id, w)
	putCtx, cancelPut := context.WithTimeout(ctx, 5*time.Second) // a hanging database fails it, not hangs it
	err = g.opts.StreamOps.PutStreamOp(putCtx, a.WorkspaceID, id, bind, sealed)
	cancelPut()
	if err != nil {
		g.log.WarnContext(ctx, "forward a subscription", "workspace_id", a.WorkspaceID, "err", err)
		return mcpgate.Errorf(mcpgate.EUnavailable, "the subscription could not reach the replica holding this client's stream; try again")
	}
	if g.push.awaiting != nil {
		g.push.awaiting()
	}
	ctx, cancel := context.WithTimeout(ctx, streamOpWithin)
	defer cancel()
	claimBy := time.NewTimer(orDefault(g.push.streamWait, streamWait))
	defer claimBy.Stop()
	poll := time.NewTicker(streamOpPoll)
	defer poll.Stop()
	for {
		select {
		case <-w.poke:
		case <-poll.C:
		case <-claimBy.C:
			withdrawn, err := g.opts.StreamOps.WithdrawStreamOp(ctx, id)
			if err == nil && withdrawn {
				if op.Op == opUnsubscribe {
					return nil // no stream of the session holds it any more
				}
				return errNoStandaloneStream
			}
			continue // claimed: its answer is coming
		case <-ctx.Done():
			withdrawCtx, cancelWithdraw := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_, _ = g.opts.StreamOps.WithdrawStreamOp(withdrawCtx, id)
			cancelWithdraw()
			return stoppingError(ctx, mcpgate.Errorf(mcpgate.EUnavailable, "the replica holding this client's stream did not answer the subscription in time"))
		}
		answer, ok, err := g.opts.StreamOps.TakeStreamOpAnswer(ctx, id)
		if err != nil || !ok {
			continue
		}
		plain, err := g.relayAEAD("answer:"+id, bind, answer, false)
		if err != nil {
			return mcpgate.Errorf(mcpgate.EInternal, "the subscription's answer could not be read")
		}
		if string(plain) == "null" {
			return nil
		}
		var rpcErr jsonrpc.Error
		if json.Unmarshal(plain, &rpcErr) != nil {
			return mcpgate.Errorf(mcpgate.EInternal, "the subscription's answer could not be read")
		}
		return &rpcErr
	}
}
