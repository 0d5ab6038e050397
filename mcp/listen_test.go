package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

// pushVersions are the protocol generations that get pushed changes: the
// standalone stream's newest and subscriptions/listen's.
var pushVersions = []string{"2025-11-25", newProtocol}

type pushCheck struct {
	workspace string
	pushed    bool
}

// pushEnv is the fixture's gateway with the E2B connector and the hub's
// hooks: each check and each opened stream is reported.
type pushEnv struct {
	fx     *Fixture
	checks chan pushCheck
	opened chan struct{}
}

func newPushEnv(t *testing.T) *pushEnv {
	t.Helper()
	sim := httptest.NewServer(e2bsim.New(e2bsim.Options{}))
	t.Cleanup(sim.Close)
	reg := connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: sim.URL, DashboardURL: sim.URL}))
	e := &pushEnv{fx: NewFixture(t, FixtureOptions{Registry: reg, Credential: e2bTestKey}),
		checks: make(chan pushCheck, 64), opened: make(chan struct{}, 64)}
	h := &e.fx.Gateway.push
	h.debounce = time.Millisecond
	h.checked = func(ws string, pushed bool) { e.checks <- pushCheck{ws, pushed} }
	h.opened = func() { e.opened <- struct{}{} }
	return e
}

// client connects go-sdk's client with key at version, with a tools list
// change handler; it returns once the client's stream is open.
func (e *pushEnv) client(t *testing.T, url, key, version string) (*sdk.ClientSession, chan struct{}) {
	t.Helper()
	changed := make(chan struct{}, 16)
	c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "v0"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} }})
	tr := &http.Transport{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: BearerTransport{Key: key, Base: tr}}, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("Connect(%s) err = %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close(); tr.CloseIdleConnections() })
	e.waitOpened(t)
	return cs, changed
}

func (e *pushEnv) waitOpened(t *testing.T) {
	t.Helper()
	select {
	case <-e.opened:
	case <-time.After(10 * time.Second):
		t.Fatal("no stream opened")
	}
}

// waitCheck waits for the next check of a stream of workspace ws.
func (e *pushEnv) waitCheck(t *testing.T, ws string) bool {
	t.Helper()
	for {
		select {
		case c := <-e.checks:
			if c.workspace == ws {
				return c.pushed
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no check of the stream")
		}
	}
}

func waitChanged(t *testing.T, changed <-chan struct{}) {
	t.Helper()
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed")
	}
}

// setTool turns a tool of the fixture's workspace on or off, and tells the
// gateway as the wiring's invalidation listener does.
func (e *pushEnv) setTool(t *testing.T, owner *mcpgate.Actor, name string, on bool) {
	t.Helper()
	if _, err := e.fx.Service.Tools.UpdateTool(context.Background(), owner, name, mcpgate.ToolUpdate{Enabled: &on}); err != nil {
		t.Fatalf("UpdateTool(%s) err = %v", name, err)
	}
	e.fx.Gateway.CatalogChanged("policy", owner.WorkspaceID)
}

func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("ListTools() err = %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// TestPush_VisibleChange: a policy change the caller sees reaches its
// client as one notification, after which tools/list shows it; a change it
// cannot see (a tool outside a read-only key's scope, another workspace's
// policy) sends nothing, which the visible change made afterwards proves:
// its notification is the only one.
func TestPush_VisibleChange(t *testing.T) {
	for _, version := range pushVersions {
		t.Run(version, func(t *testing.T) {
			e := newPushEnv(t)
			fx := e.fx
			ro, _ := fx.AddKey(t, mcpgate.ScopeReadOnly)
			cs, changed := e.client(t, fx.URL+"/mcp", ro, version)
			if names := toolNames(t, cs); !slices.Contains(names, e2b.ToolListSandboxes) || slices.Contains(names, e2b.ToolKillSandbox) {
				t.Fatalf("read-only tools = %v", names)
			}

			// Another workspace of the same person, with a stream of its own.
			other, err := fx.Service.Workspaces.CreateWorkspace(context.Background(), &mcpgate.User{ID: fx.UserID, Email: "owner@example.com"}, "other")
			if err != nil {
				t.Fatal(err)
			}
			otherOwner := &mcpgate.Actor{UserID: fx.UserID, WorkspaceID: other.ID, Role: mcpgate.RoleOwner, Scope: mcpgate.ScopeFull,
				Source: mcpgate.SourceDashboard}
			k, otherKey, err := fx.Service.Keys.CreateKey(context.Background(), otherOwner, mcpgate.NewKey{Name: "other", Scope: mcpgate.ScopeFull})
			if err != nil || k == nil {
				t.Fatal(err)
			}
			_, otherChanged := e.client(t, fx.URL+"/mcp", otherKey, version)
			e.setTool(t, otherOwner, e2b.ToolListSandboxes, false)
			waitChanged(t, otherChanged) // the other workspace's own client hears it

			// Outside the read-only scope: checked, nothing pushed.
			e.setTool(t, fx.Owner(), e2b.ToolKillSandbox, false)
			if e.waitCheck(t, fx.Workspace) {
				t.Fatal("a change outside the key's scope was pushed")
			}

			e.setTool(t, fx.Owner(), e2b.ToolListSandboxes, false)
			waitChanged(t, changed)
			if names := toolNames(t, cs); slices.Contains(names, e2b.ToolListSandboxes) {
				t.Fatalf("after the notification tools = %v, want no %s", names, e2b.ToolListSandboxes)
			}
			select {
			case <-changed:
				t.Fatal("more than one notification")
			default:
			}
		})
	}
}

// TestPush_RevokedKeyCloses: a revoked key's stream ends at the check its
// revocation causes, and nothing more is sent on it.
func TestPush_RevokedKeyCloses(t *testing.T) {
	for _, version := range pushVersions {
		t.Run(version, func(t *testing.T) {
			e := newPushEnv(t)
			fx := e.fx
			key, id := fx.AddKey(t, mcpgate.ScopeFull)
			stream := openRaw(t, fx.URL+"/mcp", key, version)
			e.waitOpened(t)
			if err := fx.Service.Keys.RevokeKey(context.Background(), fx.Owner(), id); err != nil {
				t.Fatal(err)
			}
			fx.Keys.Invalidate("keys", fx.Workspace) // as the wiring's listener does
			fx.Gateway.CatalogChanged("keys", fx.Workspace)
			rest, _ := io.ReadAll(stream.Body)
			if strings.Contains(string(rest), "list_changed") {
				t.Errorf("revoked stream got %q", rest)
			}
			waitNoStreams(t, fx.Gateway)
		})
	}
}

// rawStream is an open stream read as the wire gives it.
type rawStream struct {
	*http.Response
	r     *bufio.Reader
	first string // the first message
}

// next reads one SSE event or comment, through its blank line.
func (s *rawStream) next(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for {
		line, err := s.r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			t.Fatalf("stream ended after %q: %v", b.String(), err)
		}
		if line == "\n" {
			return b.String()
		}
	}
}

// listenBody is a subscriptions/listen for tools list changes.
const listenBody = `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"_meta":{` +
	`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
	`"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}},"notifications":{"toolsListChanged":true}}}`

// streamRequest is the request that opens a stream at version: a GET
// before 2026-07-28, a subscriptions/listen on it.
func streamRequest(ctx context.Context, url, key, version string) *http.Request {
	var req *http.Request
	if version == newProtocol {
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(listenBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Method", methodListen)
	} else {
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
	}
	req.Header.Set("Mcp-Protocol-Version", version)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req
}

// openRaw opens a stream and reads its first message.
func openRaw(t *testing.T, url, key, version string) *rawStream {
	t.Helper()
	resp, err := http.DefaultClient.Do(streamRequest(context.Background(), url, key, version))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream = %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &rawStream{Response: resp, r: bufio.NewReader(resp.Body)}
	s.first = s.next(t)
	if version == newProtocol && !strings.Contains(s.first, notificationAcked) || version != newProtocol && s.first != ": ok\n\n" {
		t.Fatalf("first message = %q", s.first)
	}
	return s
}

func waitNoStreams(t *testing.T, g *Gateway) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.push.count() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams still open", g.push.count())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPush_StreamBounds: a credential holds at most its number of streams
// and the replica its total; the excess is refused with 429 and
// Retry-After, and a closed stream frees its place.
func TestPush_StreamBounds(t *testing.T) {
	e := newPushEnv(t)
	fx := e.fx
	h := &fx.Gateway.push
	h.perCredLimit, h.totalLimit = 2, 3
	key, _ := fx.AddKey(t, mcpgate.ScopeFull)
	other, _ := fx.AddKey(t, mcpgate.ScopeFull)
	refused := func(key, version string) {
		t.Helper()
		resp, err := http.DefaultClient.Do(streamRequest(context.Background(), fx.URL+"/mcp", key, version))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("stream over the bound = %d (Retry-After %q), want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	first := openRaw(t, fx.URL+"/mcp", key, "2025-11-25")
	openRaw(t, fx.URL+"/mcp", key, newProtocol)
	refused(key, "2025-11-25")
	refused(key, newProtocol)
	openRaw(t, fx.URL+"/mcp", other, "2025-11-25") // another credential: its own two
	refused(other, "2025-11-25")                   // but the replica's total is reached
	first.Body.Close()
	for h.count() != 2 {
		time.Sleep(5 * time.Millisecond)
	}
	openRaw(t, fx.URL+"/mcp", other, "2025-11-25")
}

// TestPush_ClientGoneLeavesNothing: a client that goes away ends its
// stream, and no goroutine of it stays.
func TestPush_ClientGoneLeavesNothing(t *testing.T) {
	e := newPushEnv(t)
	fx := e.fx
	key, _ := fx.AddKey(t, mcpgate.ScopeFull)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"))
	for _, version := range pushVersions {
		tr := &http.Transport{}
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := (&http.Client{Transport: tr}).Do(streamRequest(ctx, fx.URL+"/mcp", key, version))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stream: %v", err)
		}
		e.waitOpened(t)
		cancel()
		resp.Body.Close()
		tr.CloseIdleConnections()
		waitNoStreams(t, fx.Gateway)
	}
}

// TestPush_KeepAliveAndReadTimeout: a quiet stream gets keep-alive
// comments, and outlives the HTTP server's ReadTimeout (serve sets one; a
// stream must not end, nor its context be cancelled, when it passes).
func TestPush_KeepAliveAndReadTimeout(t *testing.T) {
	e := newPushEnv(t)
	fx := e.fx
	fx.Gateway.push.keepAlive = 300 * time.Millisecond
	srv := httptest.NewUnstartedServer(fx.Gateway.Handler())
	srv.Config.ReadTimeout = 50 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	key, _ := fx.AddKey(t, mcpgate.ScopeFull)
	for _, version := range pushVersions {
		s := openRaw(t, srv.URL+"/mcp", key, version)
		for range 2 {
			if got := s.next(t); got != ": keep-alive\n\n" {
				t.Fatalf("%s: quiet stream sent %q, want a keep-alive comment", version, got)
			}
		}
		s.Body.Close()
	}
}

// TestPush_EndsAtStop: a stop ends the streams once the requests in
// flight are answered (not after the calls' grace), a listen with its
// result (SEP-2575's graceful end), and refuses new ones.
func TestPush_EndsAtStop(t *testing.T) {
	e := newPushEnv(t)
	fx := e.fx
	key, _ := fx.AddKey(t, mcpgate.ScopeFull)
	legacy := openRaw(t, fx.URL+"/mcp", key, "2025-11-25")
	listen := openRaw(t, fx.URL+"/mcp", key, newProtocol)
	h := &fx.Gateway.push
	answered := h.track() // a call in flight
	fx.Gateway.BeginStop(time.Hour)
	h.mu.Lock()
	stopped := h.stopped
	h.mu.Unlock()
	if stopped {
		t.Fatal("the streams ended before the call in flight was answered")
	}
	answered()
	if rest, _ := io.ReadAll(legacy.r); len(rest) != 0 {
		t.Errorf("standalone stream at stop sent %q", rest)
	}
	end := listen.next(t)
	if !strings.Contains(end, `"id":7,"result":{"_meta":{"io.modelcontextprotocol/subscriptionId":7}`) {
		t.Errorf("listen at stop ended with %q, want its result", end)
	}
	if rest, _ := io.ReadAll(listen.r); len(rest) != 0 {
		t.Errorf("listen after its result sent %q", rest)
	}
	resp, err := http.DefaultClient.Do(streamRequest(context.Background(), fx.URL+"/mcp", key, "2025-11-25"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("stream while stopping = %d, want 503", resp.StatusCode)
	}
}

// TestPush_NotAStream: a GET that does not accept an event stream, and a
// version the standalone stream does not serve, keep go-sdk's 405; a
// GET's credential is checked as a POST's is.
func TestPush_NotAStream(t *testing.T) {
	e := newPushEnv(t)
	fx := e.fx
	key, _ := fx.AddKey(t, mcpgate.ScopeFull)
	for _, tc := range []struct {
		key, accept, version string
		want                 int
	}{
		{key, "application/json", "2025-11-25", http.StatusMethodNotAllowed},
		{key, "text/event-stream", newProtocol, http.StatusMethodNotAllowed},
		{"", "text/event-stream", "2025-11-25", http.StatusUnauthorized},
		{"mcpgate_wrong", "text/event-stream", "2025-11-25", http.StatusUnauthorized},
		// mcp-remote's probe for the OAuth metadata: no version, JSON too.
		{key, "application/json, text/event-stream", "", http.StatusMethodNotAllowed},
	} {
		req, _ := http.NewRequest(http.MethodGet, fx.URL+"/mcp", nil)
		req.Header.Set("Accept", tc.accept)
		req.Header.Set("Mcp-Protocol-Version", tc.version)
		if tc.key != "" {
			req.Header.Set("Authorization", "Bearer "+tc.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %+v = %d, want %d", tc, resp.StatusCode, tc.want)
		}
	}
	if fx.Gateway.push.count() != 0 {
		t.Errorf("%d streams open", fx.Gateway.push.count())
	}
	// A 2025-03-26 client sends no version header: its GET accepts the
	// event stream alone, and is a stream.
	s := openRaw(t, fx.URL+"/mcp", key, "")
	s.Body.Close()
}

// TestPush_DeclaresToolsListChanged: initialize and server/discover
// declare tools.listChanged on /mcp, even with no tool on yet.
func TestPush_DeclaresToolsListChanged(t *testing.T) {
	e := newPushEnv(t)
	fx := e.fx
	key, _ := fx.AddKey(t, mcpgate.ScopeFull)
	for _, version := range pushVersions {
		cs, _ := e.client(t, fx.URL+"/mcp", key, version)
		caps := cs.InitializeResult().Capabilities
		if caps.Tools == nil || !caps.Tools.ListChanged {
			b, _ := json.Marshal(caps)
			t.Errorf("%s: capabilities = %s, want tools.listChanged", version, b)
		}
	}
}

// sdkTool is a tool for go-sdk's own servers in the differential tests.
func sdkTestTool(s *sdk.Server, name string) {
	sdk.AddTool(s, &sdk.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest, map[string]any) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{}, nil, nil
		})
}

// streamHeaders are the headers of a stream the differential tests hold
// to go-sdk's.
func streamHeaders(resp *http.Response) map[string]string {
	out := map[string]string{}
	for _, h := range []string{"Content-Type", "Cache-Control", "Connection"} {
		out[h] = resp.Header.Get(h)
	}
	return out
}

// TestListen_MatchesSDK holds subscriptions/listen to go-sdk's: the same
// request to a go-sdk stateless server that then adds a tool and to the
// gateway whose policy then changes gives the same headers, the same
// acknowledgment and the same notification, byte for byte.
func TestListen_MatchesSDK(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "oracle", Version: "1"}, nil)
	sdkTestTool(srv, "first")
	oracle := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(oracle.Close)
	want := openRaw(t, oracle.URL, "", newProtocol)
	sdkTestTool(srv, "second")
	wantNote := want.next(t)

	e := newPushEnv(t)
	key, _ := e.fx.AddKey(t, mcpgate.ScopeFull)
	got := openRaw(t, e.fx.URL+"/mcp", key, newProtocol)
	e.waitOpened(t)
	e.setTool(t, e.fx.Owner(), e2b.ToolListSandboxes, false)
	gotNote := got.next(t)

	if g, w := streamHeaders(got.Response), streamHeaders(want.Response); !maps.Equal(g, w) {
		t.Errorf("headers = %v, go-sdk's %v", g, w)
	}
	if gotNote != wantNote {
		t.Errorf("notification = %q, go-sdk's %q", gotNote, wantNote)
	}
	if got.first != want.first {
		t.Errorf("acknowledgment = %q, go-sdk's %q", got.first, want.first)
	}
}

// TestStandaloneStream_MatchesSDK holds the standalone stream to go-sdk's
// stateful server's (its stateless one has none): the same headers, the
// same opening comment, the same notification.
func TestStandaloneStream_MatchesSDK(t *testing.T) {
	const version = "2025-11-25"
	srv := sdk.NewServer(&sdk.Implementation{Name: "oracle", Version: "1"}, nil)
	sdkTestTool(srv, "first")
	oracle := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(oracle.Close)
	post := func(session, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, oracle.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", version)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp
	}
	session := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+
		`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`).Header.Get("Mcp-Session-Id")
	post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	req := streamRequest(context.Background(), oracle.URL, "", version)
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	want := &rawStream{Response: resp, r: bufio.NewReader(resp.Body)}
	want.first = want.next(t)
	sdkTestTool(srv, "second")
	wantNote := want.next(t)

	e := newPushEnv(t)
	key, _ := e.fx.AddKey(t, mcpgate.ScopeFull)
	got := openRaw(t, e.fx.URL+"/mcp", key, version)
	e.waitOpened(t)
	e.setTool(t, e.fx.Owner(), e2b.ToolListSandboxes, false)
	gotNote := got.next(t)

	if g, w := streamHeaders(got.Response), streamHeaders(want.Response); !maps.Equal(g, w) {
		t.Errorf("headers = %v, go-sdk's %v", g, w)
	}
	if got.first != want.first || gotNote != wantNote {
		t.Errorf("stream = %q %q, go-sdk's %q %q", got.first, gotNote, want.first, wantNote)
	}
}

// TestPush_ServerEndpoint: a server's own endpoint pushes the changes of
// its own list, declared as tools.listChanged (and the upstream's prompts
// and resources list changes still not), and a change that leaves its
// list as it was (another server's) sends nothing.
func TestPush_ServerEndpoint(t *testing.T) {
	for _, version := range pushVersions {
		t.Run(version, func(t *testing.T) {
			var mu sync.Mutex
			docs := docsEndpoint()
			eps := &fakeEndpoints{EndpointFn: func(server string) (*mcpgate.ServerEndpoint, error) {
				mu.Lock()
				defer mu.Unlock()
				if server != "docs" {
					return nil, mcpgate.Errorf(mcpgate.ENotFound, "no such server")
				}
				cp := *docs
				return &cp, nil
			}}
			g := New(Options{Tools: &fakeTools{set: &mcpgate.ToolSet{All: map[string]mcpgate.ToolInfo{}}}, Registry: connectors.NewRegistry(),
				Authenticators: []mcpgate.Authenticator{fakeAuth{}}, PublicURL: "http://gateway.test",
				ConfirmationSecret: []byte("serverendpoint-test-secret-0123456789")})
			t.Cleanup(g.Close)
			e := &pushEnv{checks: make(chan pushCheck, 64), opened: make(chan struct{}, 64)}
			g.push.debounce = time.Millisecond
			g.push.checked = func(ws string, pushed bool) { e.checks <- pushCheck{ws, pushed} }
			g.push.opened = func() { e.opened <- struct{}{} }
			mux := http.NewServeMux()
			mux.Handle("/mcp/{server}", g.ServerHandler(eps))
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)

			cs, changed := e.client(t, srv.URL+"/mcp/docs", "good-key", version)
			caps := cs.InitializeResult().Capabilities
			if caps.Tools == nil || !caps.Tools.ListChanged || caps.Prompts.ListChanged || caps.Resources.ListChanged {
				b, _ := json.Marshal(caps)
				t.Errorf("capabilities = %s, want tools.listChanged only", b)
			}
			g.CatalogChanged("policy", "w1") // nothing of docs changed
			if e.waitCheck(t, "w1") {
				t.Fatal("an unchanged list was pushed")
			}
			mu.Lock()
			docs.Tools = docs.Tools[1:] // lookup turned off
			mu.Unlock()
			g.CatalogChanged("policy", "w1")
			waitChanged(t, changed)
			if names := toolNames(t, cs); slices.Contains(names, "lookup") || !slices.Contains(names, "publish") {
				t.Errorf("after the notification tools = %v", names)
			}
		})
	}
}

// TestPush_ConnectorURL: the connector URL's form of the endpoint holds a
// stream as /mcp does, its credential read from the path.
func TestPush_ConnectorURL(t *testing.T) {
	for _, version := range pushVersions {
		t.Run(version, func(t *testing.T) {
			e := newPushEnv(t)
			key, _ := e.fx.AddKey(t, mcpgate.ScopeFull)
			s := openRaw(t, e.fx.URL+"/c/"+key+"/mcp", "", version)
			e.waitOpened(t)
			e.setTool(t, e.fx.Owner(), e2b.ToolListSandboxes, false)
			if got := s.next(t); !strings.Contains(got, notificationListChanged) {
				t.Errorf("connector URL stream sent %q", got)
			}
		})
	}
}
