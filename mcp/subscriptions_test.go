package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// peopleAuth authenticates three people: two of workspace w1, one of w2.
type peopleAuth struct{}

var people = map[string]*mcpgate.Actor{
	"alice-key": {UserID: "alice", WorkspaceID: "w1", KeyID: "ka", Scope: mcpgate.ScopeFull, Source: mcpgate.SourceMCP},
	"bob-key":   {UserID: "bob", WorkspaceID: "w1", KeyID: "kb", Scope: mcpgate.ScopeFull, Source: mcpgate.SourceMCP},
	"carol-key": {UserID: "carol", WorkspaceID: "w2", KeyID: "kc", Scope: mcpgate.ScopeFull, Source: mcpgate.SourceMCP},
	"good-key":  {UserID: "u1", WorkspaceID: "w1", KeyID: "k1", Scope: mcpgate.ScopeFull, Source: mcpgate.SourceMCP}, // rpc's
}

func (peopleAuth) Authenticate(_ context.Context, p mcpgate.Presented) (*mcpgate.Actor, error) {
	a, ok := people[p.Value.Reveal()]
	if !ok {
		return nil, &mcpgate.AuthError{Reason: "unknown"}
	}
	cp := *a
	return &cp, nil
}

// subscribingEndpoints is fakeEndpoints that holds subscriptions: each
// session opened is recorded, with what was asked of it.
type subscribingEndpoints struct {
	fakeEndpoints
	mu       sync.Mutex
	sessions []*fakeSubscriber
	// hold, when set, holds each Subscribe until closed, after telling
	// entered.
	hold, entered chan struct{}
	// failOpens is how many of the next sessions fail to open.
	failOpens int
}

type fakeSubscriber struct {
	eps        *subscribingEndpoints
	person     string // workspace/user
	updated    func(uri string)
	subscribed []string
	unsubbed   []string
	closed     bool
	done       chan struct{}
}

func (s *fakeSubscriber) Done() <-chan struct{} { return s.done }

// end ends the session as the upstream does (a restart).
func (s *fakeSubscriber) end() {
	s.eps.mu.Lock()
	defer s.eps.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
}

func (f *subscribingEndpoints) OpenResourceSubscriber(_ context.Context, a *mcpgate.Actor, _ string, updated func(string)) (mcpgate.ResourceSubscriber, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failOpens > 0 {
		f.failOpens--
		return nil, mcpgate.Errorf(mcpgate.EUnavailable, "the upstream server is restarting")
	}
	s := &fakeSubscriber{eps: f, person: a.WorkspaceID + "/" + a.UserID, updated: updated, done: make(chan struct{})}
	f.sessions = append(f.sessions, s)
	return s, nil
}

func (s *fakeSubscriber) Subscribe(_ context.Context, uri string) error {
	if s.eps.hold != nil {
		s.eps.entered <- struct{}{}
		<-s.eps.hold
	}
	s.eps.mu.Lock()
	defer s.eps.mu.Unlock()
	s.subscribed = append(s.subscribed, uri)
	return nil
}

func (s *fakeSubscriber) Unsubscribe(_ context.Context, uri string) error {
	s.eps.mu.Lock()
	defer s.eps.mu.Unlock()
	s.unsubbed = append(s.unsubbed, uri)
	return nil
}

func (s *fakeSubscriber) Close() error {
	s.eps.mu.Lock()
	defer s.eps.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	return nil
}

// session returns the open session of person (workspace/user), or nil.
func (f *subscribingEndpoints) session(person string) *fakeSubscriber {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sessions {
		if s.person == person && !s.closed {
			return s
		}
	}
	return nil
}

func (f *subscribingEndpoints) state(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newSubscriptionEnv(t *testing.T) (*subscribingEndpoints, *pushEnv, string) {
	eps, e, url, _ := newSubscriptionGateway(t)
	return eps, e, url
}

func newSubscriptionGateway(t *testing.T) (*subscribingEndpoints, *pushEnv, string, *Gateway) {
	t.Helper()
	eps := &subscribingEndpoints{fakeEndpoints: fakeEndpoints{EndpointFn: func(server string) (*mcpgate.ServerEndpoint, error) {
		if server != "docs" {
			return nil, mcpgate.Errorf(mcpgate.ENotFound, "no such server")
		}
		return docsEndpoint(), nil
	}}}
	g := New(Options{Tools: &fakeTools{set: &mcpgate.ToolSet{All: map[string]mcpgate.ToolInfo{}}}, Registry: connectors.NewRegistry(),
		Authenticators: []mcpgate.Authenticator{peopleAuth{}}, PublicURL: "http://gateway.test",
		ConfirmationSecret: []byte("serverendpoint-test-secret-0123456789")})
	t.Cleanup(g.Close)
	e := &pushEnv{checks: make(chan pushCheck, 64), opened: make(chan struct{}, 64)}
	g.push.opened = func() { e.opened <- struct{}{} }
	mux := http.NewServeMux()
	mux.Handle("/mcp/{server}", g.ServerHandler(eps))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return eps, e, srv.URL + "/mcp/docs", g
}

// updatesClient connects go-sdk's client with key, counting the updates it
// is told per URI.
func updatesClient(t *testing.T, e *pushEnv, url, key, version string) (*sdk.ClientSession, chan string) {
	t.Helper()
	updates := make(chan string, 16)
	tr := &http.Transport{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "v0"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {},
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) { updates <- req.Params.URI }})
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: BearerTransport{Key: key, Base: tr}}, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("Connect(%s) err = %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close(); tr.CloseIdleConnections() })
	e.waitOpened(t)
	return cs, updates
}

func noUpdate(t *testing.T, updates <-chan string, who string) {
	t.Helper()
	select {
	case uri := <-updates:
		t.Errorf("%s was told of an update of %s it did not subscribe", who, uri)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestSubscriptions_PerPerson: on both generations, a client's
// subscription opens one upstream session of its person, subscribes the
// URI there once, and the upstream's update reaches that client alone:
// another person of the workspace and another workspace's person, who
// subscribed the same URI, have sessions of their own and hear nothing of
// it. Unsubscribing the last one unsubscribes upstream and closes the
// session; a stream that ends drops its subscriptions.
func TestSubscriptions_PerPerson(t *testing.T) {
	for _, version := range pushVersions {
		t.Run(version, func(t *testing.T) {
			eps, e, url := newSubscriptionEnv(t)
			alice, aliceUpdates := updatesClient(t, e, url, "alice-key", version)
			if caps := alice.InitializeResult().Capabilities; caps.Resources == nil || !caps.Resources.Subscribe {
				b, _ := json.Marshal(caps)
				t.Fatalf("capabilities = %s, want resources.subscribe, as the upstream's", b)
			}
			bob, bobUpdates := updatesClient(t, e, url, "bob-key", version)
			carol, carolUpdates := updatesClient(t, e, url, "carol-key", version)
			ctx := context.Background()
			for _, cs := range []*sdk.ClientSession{alice, bob, carol} {
				if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: "file:///a"}); err != nil {
					t.Fatalf("Subscribe() err = %v", err)
				}
			}
			subscribed := func(person string) bool {
				s := eps.session(person)
				ok := false
				eps.state(func() { ok = s != nil && slices.Equal(s.subscribed, []string{"file:///a"}) })
				return ok
			}
			for _, p := range []string{"w1/alice", "w1/bob", "w2/carol"} {
				waitUntil(t, p+"'s upstream subscription", func() bool { return subscribed(p) })
			}
			// At 2026-07-28 the listen is acknowledged once subscribed:
			// the update may come before the client reads the ack, which
			// go-sdk handles in order on the one stream.
			eps.session("w1/alice").updated("file:///a")
			select {
			case uri := <-aliceUpdates:
				if uri != "file:///a" {
					t.Errorf("alice was told of %s", uri)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("alice was not told of the update of her subscription")
			}
			noUpdate(t, bobUpdates, "bob (same workspace, another person)")
			noUpdate(t, carolUpdates, "carol (another workspace)")

			if err := alice.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: "file:///a"}); err != nil {
				t.Fatalf("Unsubscribe() err = %v", err)
			}
			var aliceSession *fakeSubscriber
			eps.state(func() { aliceSession = eps.sessions[0] })
			waitUntil(t, "alice's upstream unsubscription", func() bool {
				done := false
				eps.state(func() { done = slices.Equal(aliceSession.unsubbed, []string{"file:///a"}) && aliceSession.closed })
				return done
			})
			if s := eps.session("w1/bob"); s == nil {
				t.Fatal("bob's session closed with alice's unsubscription")
			}
			_ = bob.Close()
			waitUntil(t, "bob's subscriptions dropped with his stream", func() bool { return eps.session("w1/bob") == nil })
		})
	}
}

// TestSubscriptions_ReopenedWhenTheUpstreamEndsIt: on both generations, a
// person's session with the upstream that the upstream ends (a restart)
// while streams want URIs on it is opened again, after a failed attempt
// too, with those URIs subscribed; the stream is told they were updated
// (it may have missed updates meanwhile) and hears the new session's
// updates. Another person's session is untouched, and a session the
// gateway closed (nothing wanted any more) is not opened again.
func TestSubscriptions_ReopenedWhenTheUpstreamEndsIt(t *testing.T) {
	for _, version := range pushVersions {
		t.Run(version, func(t *testing.T) {
			eps, e, url, g := newSubscriptionGateway(t)
			g.push.resources.reopenBackoff = 10 * time.Millisecond
			alice, aliceUpdates := updatesClient(t, e, url, "alice-key", version)
			bob, _ := updatesClient(t, e, url, "bob-key", version)
			ctx := context.Background()
			for _, uri := range []string{"file:///a", "file:///b"} {
				if err := alice.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
					t.Fatalf("Subscribe(%s) err = %v", uri, err)
				}
			}
			if err := bob.Subscribe(ctx, &sdk.SubscribeParams{URI: "file:///a"}); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the upstream sessions", func() bool { return eps.session("w1/alice") != nil && eps.session("w1/bob") != nil })
			first, bobs := eps.session("w1/alice"), eps.session("w1/bob")
			waitUntil(t, "alice's subscriptions", func() bool {
				n := 0
				eps.state(func() { n = len(first.subscribed) })
				return n == 2
			})
			eps.state(func() { eps.failOpens = 1 })
			first.end()
			waitUntil(t, "alice's session opened again with her URIs", func() bool {
				s := eps.session("w1/alice")
				ok := false
				eps.state(func() {
					ok = s != nil && s != first && len(s.subscribed) == 2 && slices.Contains(s.subscribed, "file:///a") &&
						slices.Contains(s.subscribed, "file:///b")
				})
				return ok
			})
			told := map[string]bool{}
			for len(told) < 2 {
				select {
				case uri := <-aliceUpdates:
					told[uri] = true
				case <-time.After(10 * time.Second):
					t.Fatalf("alice was told %v after the session came back, want both URIs", told)
				}
			}
			eps.session("w1/alice").updated("file:///b")
			select {
			case uri := <-aliceUpdates:
				if uri != "file:///b" {
					t.Errorf("alice was told of %s", uri)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the new session's update did not reach alice")
			}
			if eps.session("w1/bob") != bobs {
				t.Error("bob's session changed with alice's")
			}

			// Closed by the gateway: not opened again.
			second := eps.session("w1/alice")
			for _, uri := range []string{"file:///a", "file:///b"} {
				if err := alice.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: uri}); err != nil {
					t.Fatal(err)
				}
			}
			waitUntil(t, "alice's session closed", func() bool {
				closed := false
				eps.state(func() { closed = second.closed })
				return closed
			})
			time.Sleep(50 * time.Millisecond) // several backoffs
			if s := eps.session("w1/alice"); s != nil {
				t.Error("a session the gateway closed was opened again")
			}
		})
	}
}

// TestSubscriptions_LegacyNeedsStream: a resources/subscribe from a client
// that opens no stream here (within the wait) is refused, and nothing is
// subscribed upstream.
func TestSubscriptions_LegacyNeedsStream(t *testing.T) {
	eps, _, url, g := newSubscriptionGateway(t)
	g.push.streamWait = 50 * time.Millisecond
	_, rpcErr, _ := rpc(t, url, "2025-11-25", "resources/subscribe", `{"uri":"file:///a"}`)
	if rpcErr == nil {
		t.Fatal("resources/subscribe without a stream was accepted")
	}
	eps.state(func() {
		if len(eps.sessions) != 0 {
			t.Errorf("%d upstream sessions opened for a refused subscription", len(eps.sessions))
		}
	})
}

// TestSubscriptions_StreamEndsWhileSubscribing: a resources/subscribe
// whose stream ends while the upstream is being asked (held there) leaves
// nothing subscribed: the upstream is unsubscribed and its session closed
// once the subscription is made, since no stream wants it.
func TestSubscriptions_StreamEndsWhileSubscribing(t *testing.T) {
	eps, _, url, g := newSubscriptionGateway(t)
	eps.hold, eps.entered = make(chan struct{}), make(chan struct{}, 1)
	stream := openRaw(t, url, "good-key", "2025-11-25") // rpc's key
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = rpc(t, url, "2025-11-25", "resources/subscribe", `{"uri":"file:///a"}`)
	}()
	<-eps.entered
	_ = stream.Body.Close() // the standalone stream ends while Subscribe is held
	waitNoStreams(t, g)
	close(eps.hold)
	<-done
	waitUntil(t, "the orphan subscription undone upstream", func() bool {
		ok := false
		eps.state(func() {
			f := eps.sessions[0]
			ok = slices.Equal(f.subscribed, []string{"file:///a"}) && slices.Equal(f.unsubbed, []string{"file:///a"}) && f.closed
		})
		return ok
	})
	g.push.resources.mu.Lock()
	defer g.push.resources.mu.Unlock()
	if n := len(g.push.resources.people); n != 0 {
		t.Errorf("%d people's subscriptions left after the stream ended", n)
	}
}

// TestSubscriptions_SubscribeBeforeStream: a resources/subscribe that
// comes before its client's standalone stream (which a client opens after
// initialize, on its own) waits for it and subscribes it.
func TestSubscriptions_SubscribeBeforeStream(t *testing.T) {
	eps, _, url, g := newSubscriptionGateway(t)
	waiting := make(chan struct{}, 1)
	g.push.awaiting = func() { waiting <- struct{}{} }
	type answer struct {
		res    json.RawMessage
		rpcErr error
	}
	got := make(chan answer, 1)
	go func() {
		res, rpcErr, _ := rpc(t, url, "2025-11-25", "resources/subscribe", `{"uri":"file:///a"}`)
		if rpcErr != nil {
			got <- answer{res, rpcErr}
			return
		}
		got <- answer{res, nil}
	}()
	<-waiting
	openRaw(t, url, "good-key", "2025-11-25")
	if a := <-got; a.rpcErr != nil {
		t.Fatalf("resources/subscribe before the stream = %v", a.rpcErr)
	}
	if s := eps.session("w1/u1"); s == nil {
		t.Fatal("no upstream session for the subscription")
	}
}
