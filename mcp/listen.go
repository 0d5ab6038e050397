package mcp

// Pushed tools list changes. A client holds a stream open and is told
// notifications/tools/list_changed when the tools/list answer it would get
// changes: on the protocols before 2026-07-28 the standalone SSE stream (an
// HTTP GET on the endpoint), on 2026-07-28 a subscriptions/listen request
// (SEP-2575), whose stream this file answers before go-sdk (go-sdk's own
// listen parks, since its server notifies only on its own AddTool, and the
// gateway builds a new server per tool set instead). Both endpoints do it,
// /mcp and each server's own (serverendpoint.go), each with its own list.
//
// Every replica hears every change of every workspace (the wiring calls
// CatalogChanged from the invalidation listener), so a stream is served by
// whichever replica holds it. A burst of changes is coalesced per workspace
// into one check after catalogDebounce; the check computes each of that
// workspace's streams' list again, under its credential authenticated
// anew, and pushes only when the list's digest changed: a change the
// caller cannot see (another scope's tool, another server's) sends
// nothing. A credential that no longer authenticates (revoked, expired, its
// grant revoked, its member removed) ends its stream at that check, or at
// the next keep-alive for an expiry nothing announces.
//
// Bounds: streamsPerCredential open streams per credential and
// streamsPerReplica in all on a replica, the excess declined (declineStream:
// told to come back later, never an HTTP error, which would end a client's
// session); a
// keep-alive comment every keepAliveEvery; each write under the endpoint's
// write deadline (httpx.WriteDeadlinePerWrite); and the streams end when
// the gateway stops, as soon as the calls in flight are answered (they hold
// no work to finish, and the HTTP server's shutdown would otherwise wait
// on them), and when the client goes away, with no goroutine of their own.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

const (
	// streamsPerCredential bounds the streams one key or grant holds open
	// on a replica: a client holds one per session, and a person may run
	// several clients (a desktop app, an editor, agents) on one key.
	streamsPerCredential = 32
	// streamsPerReplica bounds them all on a replica.
	streamsPerReplica = 2000
	// streamRetryAfter is the Retry-After, in seconds, of a stream refused
	// for a bound.
	streamRetryAfter = 30
	// keepAliveEvery is the interval of the keep-alive comment, under the
	// 30 s write deadline and the minute after which proxies commonly
	// drop a quiet connection.
	keepAliveEvery = 25 * time.Second
	// catalogDebounce coalesces a burst of changes of a workspace (a
	// policy saved tool after tool) into one check.
	catalogDebounce = 250 * time.Millisecond
)

const (
	methodListen                 = "subscriptions/listen"
	notificationListChanged      = "notifications/tools/list_changed"
	notificationPromptsChanged   = "notifications/prompts/list_changed"
	notificationResourcesChanged = "notifications/resources/list_changed"
	notificationAcked            = "notifications/subscriptions/acknowledged"
)

// toolLister gives the tools/list answer a caller gets now at a protocol
// version, as bytes to digest.
type toolLister func(ctx context.Context, a *mcpgate.Actor, version string) ([]byte, error)

// pushList is one list a stream watches: the list_changed notification
// sent when the caller's list changes, and how that list is read. /mcp
// watches its tools; a server's own endpoint its tools and, where the
// upstream declares their list changes, its prompts and resources
// (endpointLists).
type pushList struct {
	notification string
	list         toolLister
}

// pushHub holds the open streams of the gateway. Its zero value is ready;
// the fields after mu are the limits and the hook tests set.
type pushHub struct {
	mu           sync.Mutex
	byWorkspace  map[string]map[*pushStream]struct{}
	perCred      map[string]int
	total        int
	pending      map[string]*time.Timer // a check due, per workspace ("" all)
	inflight     int                    // the endpoints' other requests being answered
	stopping     bool                   // BeginStop was called: no new stream
	stopped      bool
	stopCh       chan struct{} // closed at stop
	perCredLimit int
	totalLimit   int
	debounce     time.Duration
	keepAlive    time.Duration
	// checked, when set, is called after each check of a stream, with
	// the stream's workspace and whether it pushed (tests wait on it).
	checked func(workspace string, pushed bool)
	// opened, when set, is called once a stream has sent its first
	// message (its list digested by then).
	opened func()
	// resources are the streams' resource subscriptions
	// (subscriptions.go).
	resources resourceSubs
	// streamOpened is closed (and replaced) when a stream opens, for a
	// subscribe waiting for its client's (awaitLegacyStreams).
	streamOpened chan struct{}
	streamWait   time.Duration
	// awaiting, when set, is called when a subscribe starts waiting.
	awaiting func()
}

// pushStream is one open stream.
type pushStream struct {
	workspace, credential, user string
	check                       chan struct{} // one check due
	// endpoint is the server whose endpoint holds the stream ("" for
	// /mcp); standalone, whether it is a standalone stream (not a listen).
	endpoint   string
	standalone bool
	updates    chan string // URIs the upstream updated (subscriptions.go)
	// subscribed are the stream's resource subscriptions, and dropped
	// whether it ended (none may be added then), under resourceSubs.mu.
	subscribed map[string]personServer
	dropped    bool
	// session is the client session of a standalone stream on a server's
	// endpoint ("" when it named none), binding the HMAC of who holds it
	// (relayBinding; "" without a session, or where the endpoint offers no
	// subscriptions), and actor and subs what a
	// subscription forwarded from another replica is made with
	// (streamops.go).
	session, binding string
	actor            *mcpgate.Actor
	subs             mcpgate.ResourceSubscriptions
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// stopChan returns the channel closed at stop; the caller holds mu.
func (h *pushHub) stopChan() chan struct{} {
	if h.stopCh == nil {
		h.stopCh = make(chan struct{})
	}
	return h.stopCh
}

// open registers a stream of actor a on se (nil for /mcp) of client
// session sess, or refuses it for a bound.
func (h *pushHub) open(a *mcpgate.Actor, se *streamEndpoint, standalone bool, sess, binding string) (*pushStream, <-chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	stop := h.stopChan()
	if h.stopping || h.stopped {
		return nil, nil, mcpgate.Errorf(mcpgate.EUnavailable, "the gateway is stopping; connect again in a few seconds")
	}
	cred := a.CredentialID()
	if h.total >= orDefault(h.totalLimit, streamsPerReplica) {
		return nil, nil, retryAfter(mcpgate.Errorf(mcpgate.ETooMany,
			"this gateway holds as many notification streams as it allows; try again later"), streamRetryAfter*time.Second)
	}
	if h.perCred[cred] >= orDefault(h.perCredLimit, streamsPerCredential) {
		return nil, nil, retryAfter(mcpgate.Errorf(mcpgate.ETooMany,
			"this credential already holds %d notification streams open, as many as it may; close one or try again later",
			orDefault(h.perCredLimit, streamsPerCredential)), streamRetryAfter*time.Second)
	}
	if h.byWorkspace == nil {
		h.byWorkspace, h.perCred = map[string]map[*pushStream]struct{}{}, map[string]int{}
	}
	s := &pushStream{workspace: a.WorkspaceID, credential: cred, user: a.UserID, check: make(chan struct{}, 1),
		standalone: standalone, updates: make(chan string, updatesPerStream), session: sess, binding: binding, actor: a}
	if se != nil {
		s.endpoint, s.subs = se.server, se.subs
	}
	if h.byWorkspace[s.workspace] == nil {
		h.byWorkspace[s.workspace] = map[*pushStream]struct{}{}
	}
	h.byWorkspace[s.workspace][s] = struct{}{}
	h.perCred[cred]++
	h.total++
	if h.streamOpened != nil {
		close(h.streamOpened)
		h.streamOpened = nil
	}
	return s, stop, nil
}

func (h *pushHub) close(s *pushStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byWorkspace[s.workspace], s)
	if len(h.byWorkspace[s.workspace]) == 0 {
		delete(h.byWorkspace, s.workspace)
	}
	if h.perCred[s.credential]--; h.perCred[s.credential] <= 0 {
		delete(h.perCred, s.credential)
	}
	h.total--
}

// count reports how many streams are open (tests).
func (h *pushHub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// changed schedules a check of workspace ws's streams ("" for every
// workspace's) after the debounce, unless one is already due.
func (h *pushHub) changed(ws string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped || h.pending[ws] != nil || h.total == 0 || ws != "" && len(h.byWorkspace[ws]) == 0 {
		return
	}
	if h.pending == nil {
		h.pending = map[string]*time.Timer{}
	}
	h.pending[ws] = time.AfterFunc(orDefault(h.debounce, catalogDebounce), func() { h.fire(ws) })
}

// fire asks each stream of ws to check its list; a stream with a check
// already due keeps that one.
func (h *pushHub) fire(ws string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pending, ws)
	for w, streams := range h.byWorkspace {
		if ws != "" && w != ws {
			continue
		}
		for s := range streams {
			select {
			case s.check <- struct{}{}:
			default:
			}
		}
	}
}

// track counts one request of the endpoints that is not a stream while
// it is answered; the returned func ends it.
func (h *pushHub) track() func() {
	h.mu.Lock()
	h.inflight++
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.inflight--; h.inflight == 0 && h.stopping {
			h.stopLocked()
		}
	}
}

// stopWhenIdle ends every stream once no other request is being answered:
// at once, or when the last call in flight at the stop has been answered
// (within the stop's grace and its short wind-down). A client that does
// not reconnect its standalone stream (go-sdk's with retries off) fails
// its session when the stream ends, and would lose the answer of a call it
// still waits for.
func (h *pushHub) stopWhenIdle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopping = true
	if h.inflight == 0 {
		h.stopLocked()
	}
}

// stop ends every stream, now and for any opened later.
func (h *pushHub) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopLocked()
}

func (h *pushHub) stopLocked() {
	if h.stopped {
		return
	}
	h.stopped = true
	close(h.stopChan())
	for _, t := range h.pending {
		t.Stop()
	}
	h.pending = nil
}

// CatalogChanged tells the gateway that what the callers of a workspace
// may see may have changed (a policy, a key, a grant, a connection, a
// server); an empty kind means anything of any workspace. The streams of
// that workspace check their list after a short debounce and push a
// notification where it changed.
func (g *Gateway) CatalogChanged(kind, workspaceID string) {
	if kind == "" {
		workspaceID = ""
	}
	g.push.changed(workspaceID)
}

// listenRequest is a subscriptions/listen the gateway answers.
type listenRequest struct {
	id     jsonrpc.ID
	asked  sdk.NotificationSubscriptions // what the client asked for
	agreed sdk.NotificationSubscriptions // what the stream pushes, of it
}

// subscribed returns the flag of notification in n, nil for one a listen
// cannot ask for.
func subscribed(n *sdk.NotificationSubscriptions, notification string) *bool {
	switch notification {
	case notificationListChanged:
		return &n.ToolsListChanged
	case notificationPromptsChanged:
		return &n.PromptsListChanged
	case notificationResourcesChanged:
		return &n.ResourcesListChanged
	}
	return nil
}

// agree sets what the listen agrees to: of what it asked, the lists the
// endpoint pushes; it reports whether that is anything.
func (sub *listenRequest) agree(lists []pushList) bool {
	some := false
	for _, l := range lists {
		if f := subscribed(&sub.asked, l.notification); f != nil && *f {
			*subscribed(&sub.agreed, l.notification) = true
			some = true
		}
	}
	return some
}

// wants reports whether the stream pushes notification: a standalone
// stream (sub nil) each of its lists, a listen what it agreed to.
func (sub *listenRequest) wants(notification string) bool {
	if sub == nil {
		return true
	}
	f := subscribed(&sub.agreed, notification)
	return f != nil && *f
}

// serveStream answers r when it opens a stream the gateway holds: a GET
// for the standalone SSE stream on the protocols before 2026-07-28, or a
// subscriptions/listen on 2026-07-28; it reports whether it answered. list
// gives the caller's tools/list answer on this endpoint.
func (g *Gateway) serveStream(w http.ResponseWriter, r *http.Request, a *mcpgate.Actor, body []byte, list toolLister) bool {
	return g.serveStreamOf(w, r, a, body, []pushList{{notificationListChanged, list}}, nil)
}

// serveStreamOf is serveStream for a stream that watches lists, on a
// server's endpoint se (nil for /mcp).
func (g *Gateway) serveStreamOf(w http.ResponseWriter, r *http.Request, a *mcpgate.Actor, body []byte, lists []pushList, se *streamEndpoint) bool {
	switch r.Method {
	case http.MethodGet:
		// A client opens the standalone stream with the version it
		// negotiated in the header, or, at 2025-03-26 (no header yet),
		// accepting the event stream alone. A GET without the header that
		// accepts JSON too expects an answer, not a stream: mcp-remote
		// probes the endpoint so, with the client's credential, for the
		// 401 that names the OAuth metadata, and takes a 200 for "no
		// OAuth"; it keeps go-sdk's 405, as before.
		version := r.Header.Get("Mcp-Protocol-Version")
		jsonOK, streamOK := streamableAccepts(r.Header.Values("Accept"))
		if !streamOK || !legacyVersions[version] || version == "" && jsonOK {
			return false
		}
		g.holdStream(w, r, a, lists, se, version, nil)
		return true
	case http.MethodPost:
		sub, ok := parseListen(r, body)
		if !ok {
			return false
		}
		g.holdStream(w, r, a, lists, se, newProtocol, sub)
		return true
	}
	return false
}

// parseListen reads a subscriptions/listen that go-sdk would accept as it
// is; anything else (a batch, a bad _meta, no notifications) is go-sdk's to
// answer, with its error.
func parseListen(r *http.Request, body []byte) (*listenRequest, bool) {
	if r.Header.Get("Mcp-Protocol-Version") != newProtocol || r.Header.Get("Mcp-Method") != methodListen ||
		r.Header.Get("Content-Type") != "application/json" || len(r.Header.Values("Last-Event-ID")) > 0 {
		return nil, false
	}
	if jsonOK, streamOK := streamableAccepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
		return nil, false
	}
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		return nil, false
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != methodListen || !req.IsCall() {
		return nil, false
	}
	var params struct {
		Meta          map[string]json.RawMessage     `json:"_meta"`
		Notifications *sdk.NotificationSubscriptions `json:"notifications"`
	}
	if json.Unmarshal(req.Params, &params) != nil || params.Notifications == nil || !listenMetaOK(params.Meta) {
		return nil, false
	}
	return &listenRequest{id: req.ID, asked: *params.Notifications}, true
}

// listenMetaOK is go-sdk's check of a new-protocol request's _meta
// (validateRequestMeta): this protocol's version, valid client
// capabilities, and client info valid if present.
func listenMetaOK(meta map[string]json.RawMessage) bool {
	if string(meta[sdk.MetaKeyProtocolVersion]) != `"`+newProtocol+`"` {
		return false
	}
	var caps *clientCapabilitiesV2
	if json.Unmarshal(meta[sdk.MetaKeyClientCapabilities], &caps) != nil || caps == nil {
		return false
	}
	if info, ok := meta[sdk.MetaKeyClientInfo]; ok {
		var impl *sdk.Implementation
		if json.Unmarshal(info, &impl) != nil || impl == nil {
			return false
		}
	}
	return true
}

// holdStream serves one stream until the client goes away, its credential
// stops authenticating, or the gateway stops. sub is the listen request on
// 2026-07-28, nil for a standalone stream.
func (g *Gateway) holdStream(w http.ResponseWriter, r *http.Request, a *mcpgate.Actor, lists []pushList, se *streamEndpoint,
	version string, sub *listenRequest) {
	var sess, binding string
	if se != nil && se.subs != nil && sub == nil {
		// Only a stream that may hold subscriptions is found by its
		// binding (streamops.go).
		if sess = streamSessionFrom(r.Context()).id; sess != "" {
			binding = g.relayBinding(a, se.server, sess)
		}
	}
	s, stop, err := g.push.open(a, se, sub == nil, sess, binding)
	if err != nil {
		g.declineStream(w, r, sub, err)
		return
	}
	defer g.push.close(s)
	defer g.push.resources.drop(s)
	// A subscribe of this session may have reached another replica
	// first, or this one before the stream opened.
	g.claimStreamOps(s)
	ctx := r.Context()
	rc := http.NewResponseController(w)
	digests := make([]listState, len(lists))
	for i, l := range lists {
		digests[i].digest, digests[i].known = listDigest(ctx, a, l.list, version)
	}

	startStream(w)
	var first []byte
	agreed := true
	if sub == nil {
		first = streamOpening(0)
	} else {
		agreed = sub.agree(lists)
		g.listenSubscribe(ctx, a, se, s, sub)
		agreed = agreed || len(sub.agreed.ResourceSubscriptions) > 0
		first = listenAck(sub)
	}
	if sendEvent(w, rc, first) != nil {
		return
	}
	if g.push.opened != nil {
		g.push.opened()
	}
	if sub == nil && r.Header.Get("Last-Event-ID") != "" {
		// A client back after its stream ended (a stop, another
		// replica) may have missed a change meanwhile: it lists again.
		for _, l := range lists {
			if sendEvent(w, rc, listChanged(l.notification, nil)) != nil {
				return
			}
		}
	}
	if !agreed {
		// Nothing agreed: go-sdk answers the listen at once.
		_ = sendEvent(w, rc, listenEnded(sub))
		return
	}
	ticker := time.NewTicker(orDefault(g.push.keepAlive, keepAliveEvery))
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			if sub != nil {
				_ = sendEvent(w, rc, listenEnded(sub))
			}
			return
		case <-ticker.C:
			if _, gone := g.reauthenticate(r); gone {
				return
			}
			if sendEvent(w, rc, []byte(": keep-alive\n\n")) != nil {
				return
			}
		case uri := <-s.updates:
			if sendEvent(w, rc, resourceUpdated(uri, sub)) != nil {
				return
			}
		case <-s.check:
			actor, gone := g.reauthenticate(r)
			if gone {
				g.log.InfoContext(ctx, "notification stream closed: the credential no longer authenticates", "workspace_id", a.WorkspaceID)
				return
			}
			pushed := false
			for i, l := range lists {
				if actor == nil || !sub.wants(l.notification) {
					continue
				}
				if d, ok := listDigest(ctx, actor, l.list, version); ok && (!digests[i].known || d != digests[i].digest) {
					digests[i] = listState{d, true}
					pushed = true
					if sendEvent(w, rc, listChanged(l.notification, sub)) != nil {
						return
					}
				}
			}
			if g.push.checked != nil {
				g.push.checked(s.workspace, pushed)
			}
		}
	}
}

// startStream writes the headers of an SSE answer, as go-sdk's.
func startStream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
}

// streamOpening is how a standalone stream begins: as go-sdk's, a comment
// (so that the headers reach the client through proxies that hold them
// until data), then a priming event (2025-11-25's SEP-1699: an id and no
// data, named so that no client reads it as a message) with an id of its
// own. A client counts a stream that ended after a new id as progress: a
// go-sdk client otherwise gives its whole session up after five ends
// without one (a stop, a replica moved), and it reconnects with the id,
// which the gateway answers with a list change (nothing is replayed).
// retry, when set, is how long the client is told to wait before it
// reconnects (the SSE retry field).
func streamOpening(retry time.Duration) []byte {
	b := []byte(": ok\n\nevent: prime\nid: " + rand.Text() + "\n")
	if retry > 0 {
		b = append(b, "retry: "+strconv.FormatInt(retry.Milliseconds(), 10)+"\n"...)
	}
	return append(b, "data: \n\n"...)
}

// declineStream answers a stream the gateway does not hold now (a bound
// reached, the gateway stopping) without an HTTP error: a client that
// reconnects a stream it had and gets any status but 200 gives its whole
// session up (go-sdk does). A standalone stream is opened, primed with
// the wait as its retry, and ended: the client comes back after it. A
// listen is acknowledged with nothing agreed and answered at once, as
// go-sdk answers one it can push nothing on; the client goes on without.
func (g *Gateway) declineStream(w http.ResponseWriter, r *http.Request, sub *listenRequest, why error) {
	g.log.InfoContext(r.Context(), "notification stream declined", "reason", mcpgate.ErrorMessage(why))
	wait := 2 * time.Second
	var e *mcpgate.Error
	if errors.As(why, &e) && e.RetryAfter > 0 {
		wait = time.Duration(e.RetryAfter) * time.Second
	}
	startStream(w)
	rc := http.NewResponseController(w)
	if sub == nil {
		_ = sendEvent(w, rc, streamOpening(wait))
		return
	}
	none := *sub
	none.agreed = sdk.NotificationSubscriptions{}
	if sendEvent(w, rc, listenAck(&none)) == nil {
		_ = sendEvent(w, rc, listenEnded(sub))
	}
}

// reauthenticate authenticates the stream's request again: the actor, or
// gone when the credential is refused now. Neither (nil, false) means it
// could not be checked (the database is away): the stream stays and
// pushes nothing meanwhile.
func (g *Gateway) reauthenticate(r *http.Request) (*mcpgate.Actor, bool) {
	actor, _, err := g.authenticate(r)
	if err != nil {
		return nil, false
	}
	return actor, actor == nil
}

// listState is the digest of a list a stream last saw; known false when
// it could not be read.
type listState struct {
	digest [sha256.Size]byte
	known  bool
}

// listDigest digests the caller's tools/list answer; false when it cannot
// be read now.
func listDigest(ctx context.Context, a *mcpgate.Actor, list toolLister, version string) ([sha256.Size]byte, bool) {
	b, err := list(ctx, a, version)
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	return sha256.Sum256(b), true
}

// sendEvent writes one SSE event (or comment), ending with its blank line,
// and flushes it.
func sendEvent(w http.ResponseWriter, rc *http.ResponseController, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	return rc.Flush()
}

// messageEvent frames one JSON-RPC message as go-sdk does.
func messageEvent(msg jsonrpc.Message) []byte {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		// The messages are the gateway's own, of fixed shapes.
		panic("mcp: encode message: " + err.Error())
	}
	return append(append([]byte("event: message\ndata: "), data...), "\n\n"...)
}

func notification(method string, params any) []byte {
	p, err := json.Marshal(params)
	if err != nil {
		panic("mcp: encode params: " + err.Error())
	}
	return messageEvent(&jsonrpc.Request{Method: method, Params: p})
}

// subscriptionMeta is the _meta go-sdk stamps on a listen's messages
// (injectMetaSubscriptionID).
func subscriptionMeta(sub *listenRequest) sdk.Meta {
	return sdk.Meta{sdk.MetaKeySubscriptionID: sub.id.Raw()}
}

// listenAck is the first message of a listen: the notifications agreed
// to (the lists the endpoint pushes, of those asked for).
func listenAck(sub *listenRequest) []byte {
	return notification(notificationAcked, &sdk.SubscriptionsAcknowledgedParams{Meta: subscriptionMeta(sub),
		Notifications: sub.agreed})
}

// listChanged is a list_changed notification (tools, prompts or
// resources: the same empty params), with the listen's id on 2026-07-28.
func listChanged(method string, sub *listenRequest) []byte {
	params := &sdk.ToolListChangedParams{}
	if sub != nil {
		params.Meta = subscriptionMeta(sub)
	}
	return notification(method, params)
}

// listenEnded is the listen's result, which ends it gracefully.
func listenEnded(sub *listenRequest) []byte {
	res, err := json.Marshal(&sdk.SubscriptionsListenResult{Meta: subscriptionMeta(sub)})
	if err != nil {
		panic("mcp: encode result: " + err.Error())
	}
	return messageEvent(&jsonrpc.Response{ID: sub.id, Result: res})
}

// gatewayList is the tools/list answer of /mcp: the one the fast path
// serves for the caller's tool set.
func (g *Gateway) gatewayList(ctx context.Context, a *mcpgate.Actor, version string) ([]byte, error) {
	_, st, err := g.state(ctx, a)
	if err != nil {
		return nil, err
	}
	b := g.setList(ctx, st, version)
	if b == nil {
		return nil, errors.New("tools/list through the SDK failed")
	}
	return b, nil
}

// endpointList is the tools/list answer of a server's own endpoint; a
// server the caller no longer has lists nothing.
func endpointList(eps mcpgate.ServerEndpointService, server string) toolLister {
	return func(ctx context.Context, a *mcpgate.Actor, version string) ([]byte, error) {
		ep, err := eps.ServerEndpoint(ctx, a, server)
		if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		res, err := endpointToolList(ep, version != newProtocol)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	}
}

// setList is go-sdk's tools/list result for a tool set at a protocol
// version, computed once per set and version; nil when go-sdk failed.
func (g *Gateway) setList(ctx context.Context, st *setState, version string) []byte {
	if result, ok := st.lists.Load(version); ok {
		return result.([]byte)
	}
	res := g.sdkList(ctx, st.srv, version)
	if res == nil {
		return nil
	}
	result, _ := st.lists.LoadOrStore(version, res)
	return result.([]byte)
}

// gatewayCapabilities are what /mcp declares besides what go-sdk adds for
// the prompts it has: go-sdk's default, logging, and tools with
// listChanged whether or not the set has any tool now (go-sdk declares
// tools only once one is added), since the gateway pushes the changes
// that may add the first.
func gatewayCapabilities() *sdk.ServerCapabilities {
	//lint:ignore SA1019 logging is go-sdk's default capability, kept for the 2025 protocols
	return &sdk.ServerCapabilities{Logging: &sdk.LoggingCapabilities{}, Tools: &sdk.ToolCapabilities{ListChanged: true}}
}
