package mcp

// Resource subscriptions on a server's own endpoint, where the upstream
// declares resources.subscribe and the endpoint service can hold a
// session for them (mcpgate.ResourceSubscriptions).
//
// A client subscribes a URI for its stream: on the protocols before
// 2026-07-28 with resources/subscribe (and ends it with
// resources/unsubscribe) while it holds the standalone stream open, the
// subscription then belonging to its client session's standalone streams
// of this endpoint (a request names no stream, but its session; a client
// that sends no session id has its credential's streams that name none).
// The stream may be held on another replica than the one the request
// reached: the request is carried there and answered from there
// (streamops.go). On 2026-07-28 a client subscribes with
// resourceSubscriptions in its subscriptions/listen, for that stream
// alone. A stream that ends drops its subscriptions.
//
// Upstream, the gateway holds one session per person and server (opened
// with the first URI, closed with the last), on which it subscribes a URI
// while at least one of that person's streams wants it and unsubscribes
// it when the last one leaves. The upstream's notifications/resources/
// updated on that session go to the streams of that person that
// subscribed the URI: never another person's, whose session is another,
// nor another workspace's, whose server is another.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

const (
	notificationResourceUpdated = "notifications/resources/updated"
	// updatesPerStream bounds the updates waiting to be written to one
	// stream; past it an update is dropped (the client reads the
	// resource again at the next).
	updatesPerStream = 64
	// unsubscribeWithin bounds the upstream exchanges of a stream that
	// ends, which are made as it returns.
	unsubscribeWithin = 5 * time.Second
	// streamWait is how long a resources/subscribe waits for its
	// client's standalone stream to open (awaitLegacyStreams).
	streamWait = 5 * time.Second
)

// streamEndpoint is the server endpoint a stream is held on.
type streamEndpoint struct {
	server string
	// subs opens the upstream's session; nil where the endpoint offers
	// no subscriptions (the upstream does not declare them).
	subs mcpgate.ResourceSubscriptions
}

// endpointSubscriptions returns what eps offers for ep's subscriptions:
// nil unless the upstream declares resources.subscribe and eps can hold a
// session for it.
func endpointSubscriptions(eps mcpgate.ServerEndpointService, ep *mcpgate.ServerEndpoint) mcpgate.ResourceSubscriptions {
	subs, ok := eps.(mcpgate.ResourceSubscriptions)
	up := upstreamCapabilities(ep)
	if !ok || up.Resources == nil || !up.Resources.Subscribe {
		return nil
	}
	return subs
}

// personServer keys the subscriptions of one person on one server.
type personServer struct{ workspace, user, server string }

// resourceSubs are the subscriptions of the replica's streams. Its zero
// value is ready.
type resourceSubs struct {
	mu     sync.Mutex
	people map[personServer]*personSubs
	// stopping is closed when the gateway stops: no session is opened
	// again after it.
	stopping <-chan struct{}
	// reopenBackoff is the first wait before a session the upstream ended
	// is opened again (reopenFirst; tests shorten it).
	reopenBackoff time.Duration
}

// personSubs are one person's subscriptions on one server.
type personSubs struct {
	ops sync.Mutex // held for the upstream's exchanges, one at a time
	up  mcpgate.ResourceSubscriber
	// subs, actor and server open the session again should the upstream
	// end it (watch): those of the subscription that opened it.
	subs   mcpgate.ResourceSubscriptions
	actor  *mcpgate.Actor
	server string
	// uris are the streams that want each URI, under resourceSubs.mu.
	uris map[string]map[*pushStream]struct{}
	busy int // operations under way, under resourceSubs.mu
}

// take returns the person's subscriptions, counted as in use.
func (h *resourceSubs) take(k personServer) *personSubs {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.people == nil {
		h.people = map[personServer]*personSubs{}
	}
	ps := h.people[k]
	if ps == nil {
		ps = &personSubs{uris: map[string]map[*pushStream]struct{}{}}
		h.people[k] = ps
	}
	ps.busy++
	return ps
}

// done ends a use of ps; with nothing subscribed and no use left, it is
// forgotten.
func (h *resourceSubs) done(k personServer, ps *personSubs) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ps.busy--; ps.busy == 0 && len(ps.uris) == 0 && ps.up == nil {
		delete(h.people, k)
	}
}

// subscribe subscribes uri for streams, all of a's, opening the person's
// upstream session first if it has none and subscribing upstream if no
// stream of the person wanted uri yet.
func (h *resourceSubs) subscribe(ctx context.Context, subs mcpgate.ResourceSubscriptions, a *mcpgate.Actor, server, uri string, streams []*pushStream) error {
	k := personServer{a.WorkspaceID, a.UserID, server}
	ps := h.take(k)
	defer h.done(k, ps)
	ps.ops.Lock()
	defer ps.ops.Unlock()
	if ps.up == nil {
		ps.subs, ps.actor, ps.server = subs, a, server
		if err := h.open(ctx, k, ps); err != nil {
			return err
		}
	}
	h.mu.Lock()
	first := len(ps.uris[uri]) == 0
	h.mu.Unlock()
	if first {
		if err := ps.up.Subscribe(ctx, uri); err != nil {
			h.closeIfUnused(ps)
			return err
		}
	}
	h.mu.Lock()
	if ps.uris[uri] == nil {
		ps.uris[uri] = map[*pushStream]struct{}{}
	}
	for _, s := range streams {
		if s.dropped {
			continue // it ended while the upstream was asked
		}
		ps.uris[uri][s] = struct{}{}
		if s.subscribed == nil {
			s.subscribed = map[string]personServer{}
		}
		s.subscribed[uri] = k
	}
	orphan := len(ps.uris[uri]) == 0
	if orphan {
		delete(ps.uris, uri)
	}
	h.mu.Unlock()
	if orphan {
		// Every stream it was for ended meanwhile: nothing may stay
		// subscribed upstream for none.
		if first {
			_ = ps.up.Unsubscribe(ctx, uri)
		}
		h.closeIfUnused(ps)
		return errStreamEnded
	}
	return nil
}

const (
	// reopenFirst and reopenMost bound the waits between the attempts
	// to open again a session the upstream ended, doubling from the
	// first.
	reopenFirst = time.Second
	reopenMost  = time.Minute
)

// open opens the person's upstream session and subscribes there every
// URI the person's streams want (none, the first time; after a session
// the upstream ended, each stream is told they were updated), and
// watches it; the caller holds ps.ops.
func (h *resourceSubs) open(ctx context.Context, k personServer, ps *personSubs) error {
	up, err := ps.subs.OpenResourceSubscriber(ctx, ps.actor, ps.server, func(uri string) { h.updated(k, uri) })
	if err != nil {
		return err
	}
	wanted := h.wanted(ps)
	for _, uri := range wanted {
		if err := up.Subscribe(ctx, uri); err != nil {
			_ = up.Close()
			return err
		}
	}
	ps.up = up
	go h.watch(k, ps, up)
	// Updates may have been missed while a session the upstream ended
	// was away: the streams read the URIs again.
	for _, uri := range wanted {
		h.updated(k, uri)
	}
	return nil
}

// wanted returns the URIs the person's streams want, and makes ps.actor
// the credential of one such stream: not necessarily that of the stream
// that opened the session first, which may be gone (or revoked) since.
func (h *resourceSubs) wanted(ps *personSubs) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	uris := make([]string, 0, len(ps.uris))
	for uri, streams := range ps.uris {
		uris = append(uris, uri)
		for st := range streams {
			if st.actor != nil {
				ps.actor = st.actor
			}
		}
	}
	return uris
}

// watch waits for the upstream session up to end. Ended by the upstream
// (not by closeIfUnused) while streams still want URIs on it, it is
// opened again and those URIs subscribed there (open); an attempt that fails is made again after a wait doubling from
// reopenFirst to reopenMost, until it succeeds, nothing is wanted any
// more, or the gateway stops.
func (h *resourceSubs) watch(k personServer, ps *personSubs, up mcpgate.ResourceSubscriber) {
	select {
	case <-up.Done():
	case <-h.stopping:
		return
	}
	wait := orDefault(h.reopenBackoff, reopenFirst)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(wait):
				wait = min(2*wait, reopenMost)
			case <-h.stopping:
				return
			}
		}
		if done := h.reopen(k, ps, up); done {
			return
		}
	}
}

// reopen is one attempt of watch; done is true when nothing is left to
// do.
func (h *resourceSubs) reopen(k personServer, ps *personSubs, ended mcpgate.ResourceSubscriber) (done bool) {
	if got := h.take(k); got != ps {
		h.done(k, got)
		return true // forgotten meanwhile: nothing was wanted any more
	}
	defer h.done(k, ps)
	ps.ops.Lock()
	defer ps.ops.Unlock()
	if ps.up == ended {
		_ = ended.Close()
		ps.up = nil
	}
	if ps.up != nil || len(h.wanted(ps)) == 0 {
		return true // a subscription opened it again, or none is left
	}
	ctx, cancel := context.WithTimeout(context.Background(), unsubscribeWithin)
	defer cancel()
	return h.open(ctx, k, ps) == nil
}

// errStreamEnded answers a subscription whose streams all ended while it
// was made.
var errStreamEnded = mcpgate.Errorf(mcpgate.EUnavailable, "the notification stream this subscription was for has ended; open it again and subscribe")

// unsubscribe drops uri of streams, and upstream when no stream of the
// person wants it any more.
func (h *resourceSubs) unsubscribe(ctx context.Context, k personServer, uri string, streams []*pushStream) error {
	ps := h.take(k)
	defer h.done(k, ps)
	ps.ops.Lock()
	defer ps.ops.Unlock()
	h.mu.Lock()
	had := len(ps.uris[uri]) > 0
	for _, s := range streams {
		delete(ps.uris[uri], s)
		delete(s.subscribed, uri)
	}
	last := had && len(ps.uris[uri]) == 0
	if len(ps.uris[uri]) == 0 {
		delete(ps.uris, uri)
	}
	h.mu.Unlock()
	var err error
	if last && ps.up != nil {
		err = ps.up.Unsubscribe(ctx, uri)
	}
	h.closeIfUnused(ps)
	return err
}

// closeIfUnused closes the person's upstream session once nothing is
// subscribed on it; the caller holds ps.ops.
func (h *resourceSubs) closeIfUnused(ps *personSubs) {
	h.mu.Lock()
	unused := len(ps.uris) == 0
	h.mu.Unlock()
	if unused && ps.up != nil {
		_ = ps.up.Close()
		ps.up = nil
	}
}

// drop ends every subscription of a stream that ended.
func (h *resourceSubs) drop(s *pushStream) {
	h.mu.Lock()
	s.dropped = true
	held := make(map[string]personServer, len(s.subscribed))
	for uri, k := range s.subscribed {
		held[uri] = k
	}
	h.mu.Unlock()
	if len(held) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), unsubscribeWithin)
	defer cancel()
	for uri, k := range held {
		_ = h.unsubscribe(ctx, k, uri, []*pushStream{s})
	}
}

// updated hands the upstream's update of uri to the person's streams that
// subscribed it.
func (h *resourceSubs) updated(k personServer, uri string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps := h.people[k]
	if ps == nil {
		return
	}
	for s := range ps.uris[uri] {
		select {
		case s.updates <- uri:
		default: // the stream is behind: this update is dropped
		}
	}
}

// legacyStreams are the standalone streams of a's client session sess
// on server's endpoint open on this replica.
func (h *pushHub) legacyStreams(a *mcpgate.Actor, server, sess string) []*pushStream {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.legacyStreamsLocked(a, server, sess)
}

// awaitLegacyStreams is legacyStreams, waiting up to streamWait for one
// to open if there is none yet: a client opens its standalone stream
// after initialize, on its own (go-sdk's and the TypeScript SDK's), so its
// first subscribe may come before it.
func (h *pushHub) awaitLegacyStreams(ctx context.Context, a *mcpgate.Actor, server, sess string) []*pushStream {
	timer := time.NewTimer(orDefault(h.streamWait, streamWait))
	defer timer.Stop()
	for waited := false; ; waited = true {
		h.mu.Lock()
		streams := h.legacyStreamsLocked(a, server, sess)
		if h.streamOpened == nil {
			h.streamOpened = make(chan struct{})
		}
		opened := h.streamOpened
		h.mu.Unlock()
		if len(streams) > 0 {
			return streams
		}
		if !waited && h.awaiting != nil {
			h.awaiting()
		}
		select {
		case <-opened:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// legacyStreamsLocked is legacyStreams; the caller holds h.mu.
func (h *pushHub) legacyStreamsLocked(a *mcpgate.Actor, server, sess string) []*pushStream {
	var out []*pushStream
	for s := range h.byWorkspace[a.WorkspaceID] {
		if s.credential == a.CredentialID() && s.user == a.UserID && s.endpoint == server && s.standalone && s.session == sess {
			out = append(out, s)
		}
	}
	return out
}

// subscribeHandlers are go-sdk's resources/subscribe and unsubscribe
// handlers of a server's endpoint (protocols before 2026-07-28).
func (g *Gateway) subscribeHandlers(subs mcpgate.ResourceSubscriptions, server string) (
	func(context.Context, *sdk.SubscribeRequest) error, func(context.Context, *sdk.UnsubscribeRequest) error) {
	subscribe := func(ctx context.Context, req *sdk.SubscribeRequest) error {
		a := actorFrom(ctx)
		if a == nil || req.Params == nil || req.Params.URI == "" {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "resources/subscribe needs a uri"}
		}
		ctx, done := g.untilStop(ctx)
		defer done()
		sess := streamSessionFrom(ctx).id
		streams := g.push.legacyStreams(a, server, sess)
		if len(streams) == 0 && g.forwards(sess) {
			return subscriptionRPCError(g.forwardStreamOp(ctx, a, server, sess, streamOp{Op: opSubscribe, URI: req.Params.URI}))
		}
		if len(streams) == 0 {
			streams = g.push.awaitLegacyStreams(ctx, a, server, sess)
		}
		if len(streams) == 0 {
			return errNoStandaloneStream
		}
		return subscriptionRPCError(g.push.resources.subscribe(ctx, subs, a, server, req.Params.URI, streams))
	}
	unsubscribe := func(ctx context.Context, req *sdk.UnsubscribeRequest) error {
		a := actorFrom(ctx)
		if a == nil || req.Params == nil || req.Params.URI == "" {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "resources/unsubscribe needs a uri"}
		}
		ctx, done := g.untilStop(ctx)
		defer done()
		sess := streamSessionFrom(ctx).id
		streams := g.push.legacyStreams(a, server, sess)
		if len(streams) == 0 && g.forwards(sess) {
			return subscriptionRPCError(g.forwardStreamOp(ctx, a, server, sess, streamOp{Op: opUnsubscribe, URI: req.Params.URI}))
		}
		k := personServer{a.WorkspaceID, a.UserID, server}
		return subscriptionRPCError(g.push.resources.unsubscribe(ctx, k, req.Params.URI, streams))
	}
	return subscribe, unsubscribe
}

// errNoStandaloneStream answers a resources/subscribe of a client session
// whose standalone stream is open nowhere.
var errNoStandaloneStream = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "resources/subscribe needs this client's " +
	"notification stream open on this endpoint (a GET with Accept: text/event-stream, with its Mcp-Session-Id)"}

// subscriptionRPCError is the answer to a failed subscription: the
// upstream's JSON-RPC error as it gave it, the gateway's own words else.
func subscriptionRPCError(err error) error {
	if err == nil {
		return nil
	}
	if rpcErr := (*jsonrpc.Error)(nil); errors.As(err, &rpcErr) {
		return rpcErr
	}
	if rpcErr := (*mcpgate.UpstreamRPCError)(nil); errors.As(err, &rpcErr) {
		return &jsonrpc.Error{Code: rpcErr.Code, Message: rpcErr.Message, Data: rpcErr.Data}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: mcpgate.ErrorMessage(err)}
}

// listenSubscribe subscribes the URIs a 2026-07-28 listen asked for, on
// its stream; the ack agrees to those subscribed.
func (g *Gateway) listenSubscribe(ctx context.Context, a *mcpgate.Actor, se *streamEndpoint, s *pushStream, sub *listenRequest) {
	if se == nil || se.subs == nil {
		return
	}
	seen := map[string]bool{}
	for _, uri := range sub.asked.ResourceSubscriptions {
		if uri == "" || seen[uri] {
			continue
		}
		seen[uri] = true
		if err := g.push.resources.subscribe(ctx, se.subs, a, se.server, uri, []*pushStream{s}); err != nil {
			g.log.InfoContext(ctx, "resource subscription refused", "server", se.server, "err", err)
			continue
		}
		sub.agreed.ResourceSubscriptions = append(sub.agreed.ResourceSubscriptions, uri)
	}
}

// resourceUpdated is the notification of an update of uri, with the
// listen's id on 2026-07-28.
func resourceUpdated(uri string, sub *listenRequest) []byte {
	params := &sdk.ResourceUpdatedNotificationParams{URI: uri}
	if sub != nil {
		params.Meta = subscriptionMeta(sub)
	}
	return notification(notificationResourceUpdated, params)
}
