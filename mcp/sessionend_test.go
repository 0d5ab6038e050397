package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// toReplica is SessionEnds delivering to another gateway, as the
// listener does (acknowledgements go nowhere: the gateway counts one
// replica, its own DELETE).
type toReplica struct{ other *Gateway }

func (r toReplica) NotifySessionEnded(_ context.Context, ws, id string) error {
	r.other.ClientSessionEnded(ws, id)
	return nil
}

func (r toReplica) AckSessionEnded(context.Context, string, string, string) error { return nil }

// endBus is SessionEnds as the invalidation channel is: every
// notification reaches every replica, the sender too. Acknowledgements of
// a replica named in hold wait until release is closed.
type endBus struct {
	mu       sync.Mutex
	replicas []*Gateway
	hold     string
	release  chan struct{}
	notified chan struct{} // a session's end was sent
}

func (b *endBus) all() []*Gateway {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*Gateway(nil), b.replicas...)
}

func (b *endBus) NotifySessionEnded(_ context.Context, ws, id string) error {
	for _, g := range b.all() {
		g.ClientSessionEnded(ws, id)
	}
	b.notified <- struct{}{}
	return nil
}

func (b *endBus) AckSessionEnded(_ context.Context, ws, id, replica string) error {
	if replica == b.hold {
		<-b.release
	}
	for _, g := range b.all() {
		g.SessionEndAcked(ws, id, replica)
	}
	return nil
}

// A DELETE is answered only once every live replica has acknowledged the
// session's end, so that the client's next request is answered 404
// wherever it goes; a replica that never does delays it by
// sessionEndWait, no more.
func TestServerHandler_SessionEndWaitsForEveryReplica(t *testing.T) {
	bus := &endBus{hold: "replica-b", release: make(chan struct{}), notified: make(chan struct{}, 4)}
	newReplica := func(id string) (*Gateway, string) {
		g := New(Options{Tools: newRelayTools(), Registry: connectors.NewRegistry(), Authenticators: []mcpgate.Authenticator{keysAuth{}},
			PublicURL: "http://gateway.test", ConfirmationSecret: []byte("serverendpoint-test-secret-0123456789"),
			SessionEnds: bus, ReplicaID: id, Replicas: func() int { return 2 }})
		t.Cleanup(g.Close)
		eps := &fakeEndpoints{EndpointFn: func(string) (*mcpgate.ServerEndpoint, error) { return docsEndpoint(), nil }}
		mux := http.NewServeMux()
		mux.Handle("/mcp/{server}", g.ServerHandler(eps))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return g, srv.URL + "/mcp/docs"
	}
	gA, urlA := newReplica("replica-a")
	gB, urlB := newReplica("replica-b")
	bus.replicas = []*Gateway{gA, gB}
	del := func(session string) <-chan int {
		done := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodDelete, urlA, nil)
			req.Header.Set("Authorization", "Bearer good-key")
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		return done
	}

	ended := initialize(t, urlA, "good-key", `{}`)
	answered := del(ended)
	<-bus.notified
	select {
	case code := <-answered:
		t.Fatalf("the DELETE was answered (%d) before replica B acknowledged", code)
	case <-time.After(100 * time.Millisecond):
	}
	close(bus.release)
	if code := <-answered; code != http.StatusNoContent {
		t.Fatalf("DELETE status %d, want 204", code)
	}
	resp := postRPC(t, context.Background(), urlB, "good-key", ended, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("replica B after the DELETE's answer: status %d, want 404", resp.StatusCode)
	}

	// A replica counted that never acknowledges (it died without a word).
	bus.mu.Lock()
	bus.replicas = []*Gateway{gA}
	bus.mu.Unlock()
	start := time.Now()
	if code := <-del(initialize(t, urlA, "good-key", `{}`)); code != http.StatusNoContent {
		t.Fatalf("DELETE with a silent replica: status %d, want 204", code)
	}
	if waited := time.Since(start); waited < sessionEndWait {
		t.Errorf("the DELETE waited %v for a replica that never acknowledged, want sessionEndWait (%v)", waited, sessionEndWait)
	}
}

// A DELETE ends the session id: later requests with it are answered 404,
// on the replica that took the DELETE and on another told of it, while
// another session of the same caller goes on (the conformance suite's
// server-session-lifecycle).
func TestServerHandler_SessionEnded(t *testing.T) {
	gB := New(Options{Tools: newRelayTools(), Registry: connectors.NewRegistry(), Authenticators: []mcpgate.Authenticator{keysAuth{}},
		PublicURL: "http://gateway.test", ConfirmationSecret: []byte("serverendpoint-test-secret-0123456789")})
	t.Cleanup(gB.Close)
	gA := New(Options{Tools: newRelayTools(), Registry: connectors.NewRegistry(), Authenticators: []mcpgate.Authenticator{keysAuth{}},
		PublicURL: "http://gateway.test", ConfirmationSecret: []byte("serverendpoint-test-secret-0123456789"),
		SessionEnds: toReplica{gB}})
	t.Cleanup(gA.Close)
	serve := func(g *Gateway) string {
		eps := &fakeEndpoints{EndpointFn: func(string) (*mcpgate.ServerEndpoint, error) { return docsEndpoint(), nil }}
		mux := http.NewServeMux()
		mux.Handle("/mcp/{server}", g.ServerHandler(eps))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv.URL + "/mcp/docs"
	}
	urlA, urlB := serve(gA), serve(gB)
	ended := initialize(t, urlA, "good-key", `{}`)
	kept := initialize(t, urlA, "good-key", `{}`)
	const ping = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	status := func(url, session string) int {
		resp := postRPC(t, context.Background(), url, "good-key", session, ping)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(urlB, ended); got != http.StatusOK {
		t.Fatalf("before the DELETE: status %d, want 200", got)
	}
	req, _ := http.NewRequest(http.MethodDelete, urlA, nil)
	req.Header.Set("Authorization", "Bearer good-key")
	req.Header.Set("Mcp-Session-Id", ended)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE status %d, want 204", resp.StatusCode)
	}
	for name, url := range map[string]string{"A": urlA, "B": urlB} {
		if got := status(url, ended); got != http.StatusNotFound {
			t.Errorf("replica %s, ended session: status %d, want 404", name, got)
		}
		if got := status(url, kept); got != http.StatusOK {
			t.Errorf("replica %s, another session: status %d, want 200", name, got)
		}
	}
}
