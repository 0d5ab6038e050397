package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// holdServer is a go-sdk server whose tool "hold" logs "before <q>", then,
// when the test has made q a held call, says it started and waits until
// the test lets it go, then logs "after <q>" and answers. It records the
// session each call ran on (the server's own session id) and counts the
// sessions initialized.
type holdServer struct {
	inits   atomic.Int64
	started chan string // q of each held call, once it waits
	handler atomic.Pointer[http.Handler]

	mu    sync.Mutex
	gates map[string]chan struct{}
	ran   map[string]string // q -> session id it ran on
}

func newHoldServer(t *testing.T) (*holdServer, *httptest.Server) {
	t.Helper()
	h := &holdServer{started: make(chan string, 16), gates: map[string]chan struct{}{}, ran: map[string]string{}}
	h.reset()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*h.handler.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(h.releaseAll)
	return h, ts
}

// reset swaps in a new handler, which knows none of the old sessions (a
// restarted upstream).
func (h *holdServer) reset() {
	s := mcp.NewServer(&mcp.Implementation{Name: "hold", Version: "v1"},
		&mcp.ServerOptions{InitializedHandler: func(context.Context, *mcp.InitializedRequest) { h.inits.Add(1) }})
	s.AddTool(&mcp.Tool{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Q string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			h.mu.Lock()
			h.ran[in.Q] = req.Session.ID()
			gate := h.gates[in.Q]
			h.mu.Unlock()
			//lint:ignore SA1019 a server that logs
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "before " + in.Q})
			if gate != nil {
				h.started <- in.Q
				select {
				case <-gate:
				case <-ctx.Done():
				}
			}
			//lint:ignore SA1019 a server that logs
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "after " + in.Q})
			return &mcp.CallToolResult{Content: text("ok " + in.Q)}, nil
		})
	var handler http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	h.handler.Store(&handler)
}

// hold makes q a held call.
func (h *holdServer) hold(qs ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, q := range qs {
		h.gates[q] = make(chan struct{})
	}
}

// release lets the held call q answer.
func (h *holdServer) release(q string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if g := h.gates[q]; g != nil {
		close(g)
		delete(h.gates, q)
	}
}

func (h *holdServer) releaseAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for q, g := range h.gates {
		close(g)
		delete(h.gates, q)
	}
}

// sessionOf is the upstream session call q ran on.
func (h *holdServer) sessionOf(q string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ran[q]
}

// waitStarted waits until n held calls have started, and returns them.
func (h *holdServer) waitStarted(t *testing.T, n int) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for range n {
		select {
		case q := <-h.started:
			got[q] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("held calls started: %v, want %d", got, n)
		}
	}
	return got
}

// logged collects the log messages of each call.
type logged struct {
	mu   sync.Mutex
	msgs map[string][]string
}

func (l *logged) call(q string) CallRequest {
	return CallRequest{Tool: "hold", Arguments: json.RawMessage(`{"q":"` + q + `"}`), OnLog: func(m LogMessage) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.msgs == nil {
			l.msgs = map[string][]string{}
		}
		l.msgs[q] = append(l.msgs[q], string(m.Data))
	}}
}

func (l *logged) of(q string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msgs[q]
}

// callAsync runs one call of key in the background; its error arrives on
// the channel when it ends.
func callAsync(p *Pool[string], ctx context.Context, key string, target Target, req CallRequest) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := p.Call(ctx, key, target, req)
		done <- err
	}()
	return done
}

func mustEnd(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end")
		return nil
	}
}

// waitFor polls the pool's own state until cond holds: the state is the
// pool's, not a timing, and the deadline only bounds a broken test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (p *Pool[K]) waiting(key K) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ks := p.keys[key]; ks != nil {
		return len(ks.waiters)
	}
	return 0
}

// TestCall_ConcurrentCallsOwnSessions: two calls of one key in flight at
// once run on two upstream sessions, and each gets all its own log
// messages, the ones sent while the other was in flight included: none is
// dropped, none reaches the other call.
func TestCall_ConcurrentCallsOwnSessions(t *testing.T) {
	noLeaks(t)
	h, ts := newHoldServer(t)
	p := newPool(t, Options{})
	target := Target{URL: ts.URL}
	var logs logged
	mustCall(t, p, target, logs.call("warm")) // one session, open and idle
	h.hold("a", "b")
	doneA := callAsync(p, context.Background(), "ws1/fx", target, logs.call("a"))
	doneB := callAsync(p, context.Background(), "ws1/fx", target, logs.call("b"))
	h.waitStarted(t, 2) // both in flight, each has logged "before"
	if a, b := h.sessionOf("a"), h.sessionOf("b"); a == "" || a == b {
		t.Fatalf("calls ran on upstream sessions %q and %q, want two different ones", a, b)
	}
	if h.sessionOf("a") != h.sessionOf("warm") && h.sessionOf("b") != h.sessionOf("warm") {
		t.Errorf("neither call took the idle session %q", h.sessionOf("warm"))
	}
	// b answers first while a is still in flight, then a.
	h.release("b")
	if err := mustEnd(t, doneB); err != nil {
		t.Fatal(err)
	}
	h.release("a")
	if err := mustEnd(t, doneA); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"a", "b"} {
		want := []string{`"before ` + q + `"`, `"after ` + q + `"`}
		if got := logs.of(q); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("log messages of %s = %v, want %v", q, got, want)
		}
	}
	if n := h.inits.Load(); n != 2 {
		t.Errorf("sessions initialized = %d, want 2 (one per call in flight)", n)
	}
	if p.Sessions() != 2 {
		t.Errorf("Sessions() = %d, want both kept for reuse", p.Sessions())
	}
}

// TestCall_BoundWaitsForASession: with SessionsPerKey sessions of a key in
// use, one more caller waits; when a call ends, the waiter takes its
// session (the upstream sees no new session), and the bound is per key.
func TestCall_BoundWaitsForASession(t *testing.T) {
	noLeaks(t)
	h, ts := newHoldServer(t)
	p := newPool(t, Options{})
	target := Target{URL: ts.URL}
	var logs logged
	held := []string{"c1", "c2", "c3", "c4"}
	h.hold(held...)
	done := map[string]<-chan error{}
	for _, q := range held {
		done[q] = callAsync(p, context.Background(), "k", target, logs.call(q))
	}
	h.waitStarted(t, 4)
	fifth := callAsync(p, context.Background(), "k", target, logs.call("c5"))
	waitFor(t, "the fifth caller waits", func() bool { return p.waiting("k") == 1 })
	if n := h.inits.Load(); n != 4 {
		t.Fatalf("sessions initialized = %d, want %d", n, DefaultSessionsPerKey)
	}
	// Another key is not held up by this one's bound.
	mustCall(t, p, target, logs.call("other key"))
	h.release("c3")
	if err := mustEnd(t, done["c3"]); err != nil {
		t.Fatal(err)
	}
	if err := mustEnd(t, fifth); err != nil {
		t.Fatal(err)
	}
	if got, want := h.sessionOf("c5"), h.sessionOf("c3"); got != want {
		t.Errorf("the fifth call ran on session %q, want %q, the one given back", got, want)
	}
	if n := h.inits.Load(); n != 5 {
		t.Errorf("sessions initialized = %d, want 5 (four for k, one for the other key; none for the fifth call)", n)
	}
	if got := logs.of("c5"); len(got) != 2 {
		t.Errorf("log messages of the fifth call = %v, want its own two", got)
	}
	h.releaseAll()
	for _, q := range []string{"c1", "c2", "c4"} {
		if err := mustEnd(t, done[q]); err != nil {
			t.Fatal(err)
		}
	}
	if p.Sessions() != 5 {
		t.Errorf("Sessions() = %d, want 5", p.Sessions())
	}
}

// TestCall_WaitingCallerCancelled: a caller waiting for a session whose
// context ends gets its context's error and leaves no waiter behind; the
// session it waited for goes on serving the key.
func TestCall_WaitingCallerCancelled(t *testing.T) {
	noLeaks(t)
	h, ts := newHoldServer(t)
	p := newPool(t, Options{SessionsPerKey: 1})
	target := Target{URL: ts.URL}
	var logs logged
	h.hold("held")
	held := callAsync(p, context.Background(), "ws1/fx", target, logs.call("held"))
	h.waitStarted(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	waiting := callAsync(p, ctx, "ws1/fx", target, logs.call("gave up"))
	waitFor(t, "the second caller waits", func() bool { return p.waiting("ws1/fx") == 1 })
	cancel()
	if err := mustEnd(t, waiting); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting call err = %v, want context.Canceled", err)
	}
	if n := p.waiting("ws1/fx"); n != 0 {
		t.Errorf("waiters = %d after the caller gave up, want 0", n)
	}
	h.release("held")
	if err := mustEnd(t, held); err != nil {
		t.Fatal(err)
	}
	mustCall(t, p, target, logs.call("next"))
	if h.sessionOf("next") != h.sessionOf("held") || h.inits.Load() != 1 {
		t.Errorf("next call on %q (%d sessions), want the one session %q", h.sessionOf("next"), h.inits.Load(), h.sessionOf("held"))
	}
	if h.sessionOf("gave up") != "" {
		t.Error("the call that gave up ran on the upstream")
	}
}

// TestPool_CloseWakesWaiters: Close fails the callers waiting for a
// session, and the calls in flight.
func TestPool_CloseWakesWaiters(t *testing.T) {
	// The DELETE of the session whose call was in flight is not waited
	// for, so the test server keeps that session's reader: not ours.
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, opt, goleak.IgnoreTopFunction("github.com/modelcontextprotocol/go-sdk/mcp.(*streamableServerConn).Read"))
	})
	h, ts := newHoldServer(t)
	p := newPool(t, Options{SessionsPerKey: 1})
	target := Target{URL: ts.URL}
	var logs logged
	h.hold("held")
	held := callAsync(p, context.Background(), "k", target, logs.call("held"))
	h.waitStarted(t, 1)
	waiting := callAsync(p, context.Background(), "k", target, logs.call("waits"))
	waitFor(t, "the second caller waits", func() bool { return p.waiting("k") == 1 })
	_ = p.Close()
	if err := mustEnd(t, waiting); !errors.Is(err, errPoolClosed) {
		t.Errorf("waiting call err = %v, want the pool closed", err)
	}
	if err := mustEnd(t, held); !errors.Is(err, errPoolClosed) {
		t.Errorf("call in flight err = %v, want the pool closed", err)
	}
	if _, err := p.Call(context.Background(), "k", target, logs.call("late")); !errors.Is(err, errPoolClosed) {
		t.Errorf("call after Close err = %v, want the pool closed", err)
	}
}

// TestSession_ExpiredRetiresOlderSiblings: after an upstream restart, the
// first call to meet the forgotten session fails once (not safe to
// repeat); its key's other idle sessions, opened before, are retired with
// it, so the next call does not meet the same failure again.
func TestSession_ExpiredRetiresOlderSiblings(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		// The replaced handler keeps its server sessions (go-sdk has no
		// handler Close, #440): those server-side readers are not ours.
		goleak.VerifyNone(t, opt, goleak.IgnoreTopFunction("github.com/modelcontextprotocol/go-sdk/mcp.(*streamableServerConn).Read"))
	})
	h, ts := newHoldServer(t)
	p := newPool(t, Options{})
	target := Target{URL: ts.URL}
	var logs logged
	h.hold("a", "b")
	doneA := callAsync(p, context.Background(), "ws1/fx", target, logs.call("a"))
	doneB := callAsync(p, context.Background(), "ws1/fx", target, logs.call("b"))
	h.waitStarted(t, 2)
	h.releaseAll()
	for _, d := range []<-chan error{doneA, doneB} {
		if err := mustEnd(t, d); err != nil {
			t.Fatal(err)
		}
	}
	h.reset()
	_, err := p.Call(context.Background(), "ws1/fx", target, logs.call("unsafe"))
	if e := (*Error)(nil); !errors.As(err, &e) || e.Kind != KindSessionExpired {
		t.Fatalf("first call after the restart err = %v, want KindSessionExpired", err)
	}
	mustCall(t, p, target, logs.call("next"))
	if n := h.inits.Load(); n != 3 {
		t.Errorf("sessions initialized = %d, want 3 (two, then one new after the restart)", n)
	}
	if p.Sessions() != 1 {
		t.Errorf("Sessions() = %d, want only the new session", p.Sessions())
	}
}

// TestPool_Forget closes a key's idle session at once and its session in
// use once the call gives it back; other keys keep theirs.
func TestPool_Forget(t *testing.T) {
	noLeaks(t)
	h, ts := newHoldServer(t)
	p := newPool(t, Options{})
	target := Target{URL: ts.URL}
	var logs logged
	mustCall(t, p, target, logs.call("idle"))
	if _, err := p.Call(context.Background(), "client 2", target, logs.call("other")); err != nil {
		t.Fatal(err)
	}
	h.hold("busy")
	busy := callAsync(p, context.Background(), "ws1/fx", target, logs.call("busy")) // takes the idle session
	h.waitStarted(t, 1)
	mustCall(t, p, target, logs.call("idle")) // opens a second, left idle
	if n := p.Sessions(); n != 3 {
		t.Fatalf("Sessions() = %d, want 3", n)
	}
	p.Forget("ws1/fx")
	if n := p.Sessions(); n != 2 {
		t.Errorf("Sessions() = %d after Forget, want the one in use and the other key's", n)
	}
	h.release("busy")
	if err := mustEnd(t, busy); err != nil {
		t.Fatal(err)
	}
	if n := p.Sessions(); n != 1 {
		t.Errorf("Sessions() = %d once the call ended, want only the other key's", n)
	}
	mustCall(t, p, target, logs.call("after"))
	if h.sessionOf("after") == h.sessionOf("idle") || h.sessionOf("after") == h.sessionOf("busy") {
		t.Error("a call after Forget ran on a forgotten session")
	}
}

// boundKey bounds its own sessions.
type boundKey struct {
	name  string
	bound int
}

func (k boundKey) SessionBound() int { return k.bound }

// TestPool_KeyBoundsItsSessions: a key with a bound of one (a downstream
// client's) keeps one upstream session: a second request waits for the
// first and runs on the same session.
func TestPool_KeyBoundsItsSessions(t *testing.T) {
	noLeaks(t)
	h, ts := newHoldServer(t)
	p := New[boundKey](Options{Network: loopback})
	t.Cleanup(func() { _ = p.Close() })
	target := Target{URL: ts.URL}
	var logs logged
	key := boundKey{name: "client 1", bound: 1}
	h.hold("first")
	first := make(chan error, 1)
	go func() { _, err := p.Call(context.Background(), key, target, logs.call("first")); first <- err }()
	h.waitStarted(t, 1)
	second := make(chan error, 1)
	go func() { _, err := p.Call(context.Background(), key, target, logs.call("second")); second <- err }()
	waitFor(t, "the second request waits", func() bool { return p.waiting(key) == 1 })
	h.release("first")
	for _, d := range []chan error{first, second} {
		if err := mustEnd(t, d); err != nil {
			t.Fatal(err)
		}
	}
	if h.sessionOf("second") != h.sessionOf("first") || h.inits.Load() != 1 {
		t.Errorf("second request on %q (%d sessions), want the client's one session %q", h.sessionOf("second"), h.inits.Load(), h.sessionOf("first"))
	}
}

// TestCall_WaiterGivesUpAsHandedASession: a waiting caller whose context
// ends just as a session is handed to it passes the session on (here: back
// to idle), so nothing is lost and the next call reuses it.
func TestCall_WaiterGivesUpAsHandedASession(t *testing.T) {
	noLeaks(t)
	h, ts := newHoldServer(t)
	p := newPool(t, Options{SessionsPerKey: 1})
	inHook, proceed := make(chan struct{}), make(chan struct{})
	p.waiterGaveUp = func() {
		close(inHook)
		<-proceed
	}
	target := Target{URL: ts.URL}
	var logs logged
	h.hold("held")
	held := callAsync(p, context.Background(), "ws1/fx", target, logs.call("held"))
	h.waitStarted(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	waiting := callAsync(p, ctx, "ws1/fx", target, logs.call("gave up"))
	waitFor(t, "the second caller waits", func() bool { return p.waiting("ws1/fx") == 1 })
	cancel()
	<-inHook // the waiter has given up but not yet left the queue
	h.release("held")
	if err := mustEnd(t, held); err != nil { // its session was handed to the waiter
		t.Fatal(err)
	}
	close(proceed)
	if err := mustEnd(t, waiting); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting call err = %v, want context.Canceled", err)
	}
	if n, w := p.Sessions(), p.waiting("ws1/fx"); n != 1 || w != 0 {
		t.Errorf("Sessions() = %d, waiters = %d; want the one session kept, no waiter", n, w)
	}
	// Bounded: a slot lost would leave this call waiting for ever.
	next, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if _, err := p.Call(next, "ws1/fx", target, logs.call("next")); err != nil {
		t.Fatalf("next call err = %v", err)
	}
	if h.sessionOf("next") != h.sessionOf("held") || h.inits.Load() != 1 {
		t.Errorf("next call on %q (%d sessions), want the one session %q", h.sessionOf("next"), h.inits.Load(), h.sessionOf("held"))
	}
}
