package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// sessionEndpoints is a server endpoint service of one server of client
// scope that records the client session of each relayed request and each
// session ended.
type sessionEndpoints struct {
	clientSessions bool
	mu             sync.Mutex
	relayed        []string // the client session id of each relay ("" for none)
	ended          []string
}

func (f *sessionEndpoints) ServerEndpoint(context.Context, *mcpgate.Actor, string) (*mcpgate.ServerEndpoint, error) {
	ep := docsEndpoint()
	ep.ClientSessions = f.clientSessions
	return ep, nil
}

func (f *sessionEndpoints) RelayToServer(ctx context.Context, _ *mcpgate.Actor, server, _ string, _ json.RawMessage) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.relayed = append(f.relayed, mcpgate.ClientSessionFromContext(ctx, server))
	return json.RawMessage(`{"prompts":[]}`), nil
}

func (f *sessionEndpoints) EndClientSession(_ context.Context, _ *mcpgate.Actor, _, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = append(f.ended, id)
	return nil
}

func (f *sessionEndpoints) seen() (relayed, ended []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.relayed...), append([]string(nil), f.ended...)
}

type bearer struct{ base http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer good-key")
	return b.base.RoundTrip(r)
}

func connectAt(t *testing.T, url, version string) *sdk.ClientSession {
	t.Helper()
	var opts *sdk.ClientSessionOptions
	if version != "" {
		opts = &sdk.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{http.DefaultTransport}},
			MaxRetries: -1, DisableStandaloneSSE: true}, opts)
	if err != nil {
		t.Fatalf("Connect(%s) err = %v", version, err)
	}
	return cs
}

// TestServerHandler_ClientSessions: on a server of client scope, each
// 2025-11-25 client gets a session id of its own on initialize, its
// relayed requests carry that session's id to the service (two clients,
// two ids), and its DELETE ends that session; a 2026-07-28 client gets
// none, and a client of a server of person scope one that keys nothing.
func TestServerHandler_ClientSessions(t *testing.T) {
	eps := &sessionEndpoints{clientSessions: true}
	base, _ := serverEndpointFixtureFor(t, eps)
	one := connectAt(t, base+"/mcp/docs", "2025-11-25")
	two := connectAt(t, base+"/mcp/docs", "2025-11-25")
	if one.ID() == "" || two.ID() == "" || one.ID() == two.ID() {
		t.Fatalf("session ids %q and %q, want two, distinct", one.ID(), two.ID())
	}
	for _, cs := range []*sdk.ClientSession{one, two, one} {
		if _, err := cs.ListPrompts(context.Background(), nil); err != nil {
			t.Fatalf("ListPrompts() err = %v", err)
		}
	}
	relayed, _ := eps.seen()
	if len(relayed) != 3 || relayed[0] == "" || relayed[1] == "" || relayed[0] == relayed[1] || relayed[2] != relayed[0] {
		t.Fatalf("client sessions relayed = %q, want one's, two's, one's again", relayed)
	}
	_ = one.Close()
	if _, ended := eps.seen(); len(ended) != 1 || ended[0] != relayed[0] {
		t.Errorf("sessions ended = %q, want the first client's %q", ended, relayed[0])
	}
	_ = two.Close()

	newer := connectAt(t, base+"/mcp/docs", "")
	defer newer.Close()
	if newer.ID() != "" {
		t.Errorf("a %s client got session id %q, want none", newer.InitializeResult().ProtocolVersion, newer.ID())
	}

	// A client of a server of person scope gets an id too (it carries
	// its capabilities), but its requests keep the person's upstream
	// sessions: no client session is relayed, and its DELETE ends none.
	personEps := &sessionEndpoints{}
	personBase, _ := serverEndpointFixtureFor(t, personEps)
	cs := connectAt(t, personBase+"/mcp/docs", "2025-11-25")
	if cs.ID() == "" {
		t.Error("a client of a person-scoped server got no session id")
	}
	if _, err := cs.ListPrompts(context.Background(), nil); err != nil {
		t.Fatalf("ListPrompts() err = %v", err)
	}
	_ = cs.Close()
	if relayed, ended := personEps.seen(); len(relayed) != 1 || relayed[0] != "" || len(ended) != 0 {
		t.Errorf("person scope: client sessions relayed = %q, ended = %q; want one relay without, none ended", relayed, ended)
	}
}

// serverEndpointFixtureFor serves ServerHandler with eps and returns the
// base URL and the gateway.
func serverEndpointFixtureFor(t *testing.T, eps mcpgate.ServerEndpointService) (string, *Gateway) {
	t.Helper()
	g := New(Options{Tools: &fakeTools{set: &mcpgate.ToolSet{All: map[string]mcpgate.ToolInfo{}}}, Registry: connectors.NewRegistry(),
		Authenticators: []mcpgate.Authenticator{fakeAuth{}}, PublicURL: "http://gateway.test",
		ConfirmationSecret: []byte("serverendpoint-test-secret-0123456789")})
	t.Cleanup(g.Close)
	mux := http.NewServeMux()
	mux.Handle("/mcp/{server}", g.ServerHandler(eps))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, g
}

// TestServerHandler_ClientSessionRefused: a session id that is not the
// gateway's, altered, issued to another credential, person, workspace or
// server, or expired, is answered 404 (the client initializes again), and
// nothing is relayed; one issued to the caller goes through.
func TestServerHandler_ClientSessionRefused(t *testing.T) {
	eps := &sessionEndpoints{clientSessions: true}
	base, g := serverEndpointFixtureFor(t, eps)
	caller := &mcpgate.Actor{UserID: "u1", WorkspaceID: "w1", KeyID: "k1"} // fakeAuth's
	valid := g.mintClientSession(caller, "docs")
	old := g.now
	g.now = func() time.Time { return old().Add(-clientSessionTTL - time.Minute) }
	expired := g.mintClientSession(caller, "docs")
	g.now = old
	altered := []byte(valid)
	altered[len(clientSessionPrefix)+3] ^= 1 // a byte of the sealed claims
	tests := []struct {
		name, id string
		want     int
	}{
		{name: "valid", id: valid, want: http.StatusOK},
		{name: "not ours", id: "abc", want: http.StatusNotFound},
		{name: "altered", id: string(altered), want: http.StatusNotFound},
		{name: "other key", id: g.mintClientSession(&mcpgate.Actor{UserID: "u1", WorkspaceID: "w1", KeyID: "k2"}, "docs"), want: http.StatusNotFound},
		{name: "other person", id: g.mintClientSession(&mcpgate.Actor{UserID: "u2", WorkspaceID: "w1", KeyID: "k1"}, "docs"), want: http.StatusNotFound},
		{name: "other workspace", id: g.mintClientSession(&mcpgate.Actor{UserID: "u1", WorkspaceID: "w2", KeyID: "k1"}, "docs"), want: http.StatusNotFound},
		{name: "other server", id: g.mintClientSession(caller, "files"), want: http.StatusNotFound},
		{name: "expired", id: expired, want: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := eps.seen()
			req, _ := http.NewRequest(http.MethodPost, base+"/mcp/docs", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"prompts/list","params":{}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			req.Header.Set("Authorization", "Bearer good-key")
			req.Header.Set("Mcp-Session-Id", tt.id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.want)
			}
			after, _ := eps.seen()
			if relayed := len(after) > len(before); relayed != (tt.want == http.StatusOK) {
				t.Errorf("relayed = %v, want %v", relayed, tt.want == http.StatusOK)
			}
		})
	}
}
