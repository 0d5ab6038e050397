package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// toReplica is SessionEnds delivering to another gateway, as the
// listener does.
type toReplica struct{ other *Gateway }

func (r toReplica) NotifySessionEnded(_ context.Context, ws, id string) error {
	r.other.ClientSessionEnded(ws, id)
	return nil
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
