package mcp

import (
	"bufio"
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

// endpointPushEnv serves ServerHandler with the hub's hooks, its one
// server's endpoint given by ep under mu.
type endpointPushEnv struct {
	*pushEnv
	g  *Gateway
	mu sync.Mutex
	ep *mcpgate.ServerEndpoint
}

func newEndpointPushEnv(t *testing.T, ep *mcpgate.ServerEndpoint) (*endpointPushEnv, string) {
	t.Helper()
	e := &endpointPushEnv{pushEnv: &pushEnv{checks: make(chan pushCheck, 64), opened: make(chan struct{}, 64)}, ep: ep}
	eps := &fakeEndpoints{EndpointFn: func(server string) (*mcpgate.ServerEndpoint, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if server != e.ep.Server {
			return nil, mcpgate.Errorf(mcpgate.ENotFound, "no such server")
		}
		cp := *e.ep
		return &cp, nil
	}}
	e.g = New(Options{Tools: &fakeTools{set: &mcpgate.ToolSet{All: map[string]mcpgate.ToolInfo{}}}, Registry: connectors.NewRegistry(),
		Authenticators: []mcpgate.Authenticator{fakeAuth{}}, PublicURL: "http://gateway.test",
		ConfirmationSecret: []byte("serverendpoint-test-secret-0123456789")})
	t.Cleanup(e.g.Close)
	e.g.push.debounce = time.Millisecond
	e.g.push.checked = func(ws string, pushed bool) { e.checks <- pushCheck{ws, pushed} }
	e.g.push.opened = func() { e.opened <- struct{}{} }
	mux := http.NewServeMux()
	mux.Handle("/mcp/{server}", e.g.ServerHandler(eps))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return e, srv.URL + "/mcp/" + ep.Server
}

// update changes the endpoint's server as a discovery would, and tells the
// gateway as the invalidation listener does.
func (e *endpointPushEnv) update(f func(ep *mcpgate.ServerEndpoint)) {
	e.mu.Lock()
	cp := *e.ep
	f(&cp)
	e.ep = &cp
	e.mu.Unlock()
	e.g.CatalogChanged("policy", "w1")
}

// listChanges counts the list changes a go-sdk client is told, by kind.
type listChanges struct{ tools, prompts, resources chan struct{} }

func listClient(t *testing.T, e *pushEnv, url, version string, ch *listChanges) *sdk.ClientSession {
	t.Helper()
	opts := &sdk.ClientOptions{
		ToolListChangedHandler:     func(context.Context, *sdk.ToolListChangedRequest) { ch.tools <- struct{}{} },
		PromptListChangedHandler:   func(context.Context, *sdk.PromptListChangedRequest) { ch.prompts <- struct{}{} },
		ResourceListChangedHandler: func(context.Context, *sdk.ResourceListChangedRequest) { ch.resources <- struct{}{} },
	}
	tr := &http.Transport{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "v0"}, opts).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: BearerTransport{Key: "good-key", Base: tr}}, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("Connect(%s) err = %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close(); tr.CloseIdleConnections() })
	e.waitOpened(t)
	return cs
}

func newListChanges() *listChanges {
	return &listChanges{make(chan struct{}, 16), make(chan struct{}, 16), make(chan struct{}, 16)}
}

// none fails if any list change arrived.
func (ch *listChanges) none(t *testing.T) {
	t.Helper()
	select {
	case <-ch.tools:
		t.Error("a tools list change was pushed")
	case <-ch.prompts:
		t.Error("a prompts list change was pushed")
	case <-ch.resources:
		t.Error("a resources list change was pushed")
	default:
	}
}

func waitOn(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
	}
}

// TestPush_ServerEndpointPromptsResources: a change of the server's stored
// prompts, resources or templates (a discovery wrote them) reaches a
// client of its endpoint as that list's change, on both generations, and a
// change that leaves them as they were sends nothing.
func TestPush_ServerEndpointPromptsResources(t *testing.T) {
	for _, version := range pushVersions {
		t.Run(version, func(t *testing.T) {
			ep := docsEndpoint()
			ep.Prompts, ep.Resources, ep.ResourceTemplates = json.RawMessage(`[{"name":"p1"}]`), json.RawMessage(`[{"uri":"doc://a"}]`), json.RawMessage(`[]`)
			e, url := newEndpointPushEnv(t, ep)
			ch := newListChanges()
			cs := listClient(t, e.pushEnv, url, version, ch)
			caps := cs.InitializeResult().Capabilities
			if caps.Prompts == nil || !caps.Prompts.ListChanged || caps.Resources == nil || !caps.Resources.ListChanged {
				b, _ := json.Marshal(caps)
				t.Fatalf("capabilities = %s, want prompts and resources listChanged, as the upstream's", b)
			}

			e.update(func(*mcpgate.ServerEndpoint) {}) // nothing changed
			if e.waitCheck(t, "w1") {
				t.Fatal("unchanged lists were pushed")
			}
			e.update(func(ep *mcpgate.ServerEndpoint) { ep.Prompts = json.RawMessage(`[{"name":"p1"},{"name":"p2"}]`) })
			waitOn(t, ch.prompts, "notifications/prompts/list_changed")
			e.waitCheck(t, "w1")
			ch.none(t)
			e.update(func(ep *mcpgate.ServerEndpoint) {
				ep.ResourceTemplates = json.RawMessage(`[{"uriTemplate":"doc://{x}"}]`)
			})
			waitOn(t, ch.resources, "notifications/resources/list_changed")
			e.waitCheck(t, "w1")
			ch.none(t)
			e.update(func(ep *mcpgate.ServerEndpoint) { ep.Resources = json.RawMessage(`[]`) })
			waitOn(t, ch.resources, "notifications/resources/list_changed")
			e.waitCheck(t, "w1")
			ch.none(t)
		})
	}
}

// TestPush_ServerEndpointUpstreamWithoutListChanged: an upstream that does
// not declare prompts or resources list changes gets neither declared on
// its endpoint, and a change of them pushes nothing; a listen that asks for
// them is agreed tools alone.
func TestPush_ServerEndpointUpstreamWithoutListChanged(t *testing.T) {
	for _, version := range pushVersions {
		t.Run(version, func(t *testing.T) {
			ep := docsEndpoint()
			ep.Init = json.RawMessage(`{"serverInfo":{"name":"docs-up","version":"2"},"capabilities":{"prompts":{},"resources":{},"tools":{}}}`)
			ep.Prompts = json.RawMessage(`[{"name":"p1"}]`)
			e, url := newEndpointPushEnv(t, ep)
			ch := newListChanges()
			cs := listClient(t, e.pushEnv, url, version, ch)
			caps := cs.InitializeResult().Capabilities
			if caps.Prompts == nil || caps.Prompts.ListChanged || caps.Resources == nil || caps.Resources.ListChanged {
				b, _ := json.Marshal(caps)
				t.Fatalf("capabilities = %s, want prompts and resources without listChanged", b)
			}
			e.update(func(ep *mcpgate.ServerEndpoint) { ep.Prompts = json.RawMessage(`[]`) })
			if e.waitCheck(t, "w1") {
				t.Fatal("a prompts change was pushed for an upstream that declares none")
			}
			ch.none(t)
		})
	}
	t.Run("ack", func(t *testing.T) {
		ep := docsEndpoint()
		ep.Init = json.RawMessage(`{"capabilities":{"prompts":{},"resources":{"listChanged":true}}}`)
		_, url := newEndpointPushEnv(t, ep)
		s := openListen(t, url, `{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true}`)
		if ack := s.next(t); !containsAll(ack, `"toolsListChanged":true`, `"resourcesListChanged":true`) || containsAll(ack, "promptsListChanged") {
			t.Errorf("ack = %s, want tools and resources agreed, not prompts", ack)
		}
	})
}

// listenWith is a subscriptions/listen asking for notifications (JSON).
func listenWith(notifications string) string {
	return strings.Replace(listenBody, `"notifications":{"toolsListChanged":true}`, `"notifications":`+notifications, 1)
}

// openListen posts a listen asking for notifications with the fixture's
// key and returns its stream, its first message (the ack) read.
func openListen(t *testing.T, url, notifications string) *rawStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(listenWith(notifications)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Method", methodListen)
	req.Header.Set("Mcp-Protocol-Version", newProtocol)
	req.Header.Set("Authorization", "Bearer good-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("listen = %d", resp.StatusCode)
	}
	return &rawStream{Response: resp, r: bufio.NewReader(resp.Body)}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
