package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
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
	prime string // a standalone stream's priming event, after first
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

// primeRE is a priming event: a name no client reads as a message, an id,
// no data; retry only when the stream is declined.
var primeRE = regexp.MustCompile(`^event: prime\nid: [A-Z2-7]{26}\n(retry: \d+\n)?data: \n\n$`)

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
	if version != newProtocol {
		s.prime = s.next(t)
		if !primeRE.MatchString(s.prime) {
			t.Fatalf("priming event = %q", s.prime)
		}
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
// and the replica its total; the excess is declined without an HTTP error
// (which would end a go-sdk client's whole session when it reconnects): a
// standalone stream is primed with a retry of 30 s and ended, a listen
// acknowledged with nothing agreed and answered at once. A closed stream
// frees its place.
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
		body, _ := io.ReadAll(resp.Body) // the declined stream ends at once
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream over the bound = %d %q, want a declined stream", resp.StatusCode, body)
		}
		if version == newProtocol {
			if !strings.Contains(string(body), `"notifications":{}`) || !strings.Contains(string(body), `"id":7,"result"`) {
				t.Fatalf("listen over the bound = %q, want nothing agreed and its result", body)
			}
			return
		}
		if !regexp.MustCompile(`^: ok\n\nevent: prime\nid: \w+\nretry: 30000\ndata: \n\n$`).Match(body) {
			t.Fatalf("stream over the bound = %q, want it primed with a 30 s retry and ended", body)
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
	defer resp.Body.Close()
	if rest, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK ||
		!regexp.MustCompile(`^: ok\n\nevent: prime\nid: \w+\nretry: 2000\ndata: \n\n$`).Match(rest) {
		t.Errorf("stream while stopping = %d %q, want it declined: primed, told to come back in 2 s, ended", resp.StatusCode, rest)
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
	// The priming event after the first comment is the gateway's own
	// (go-sdk primes no standalone stream; see streamOpening).
	if got.first != want.first || gotNote != wantNote {
		t.Errorf("stream = %q %q, go-sdk's %q %q", got.first, gotNote, want.first, wantNote)
	}
}

// TestPush_ServerEndpoint: a server's own endpoint pushes the changes of
// its own list, declared as tools.listChanged (prompts and resources:
// endpointpush_test.go), and a change that leaves its
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
			if caps.Tools == nil || !caps.Tools.ListChanged || !caps.Prompts.ListChanged || !caps.Resources.ListChanged {
				b, _ := json.Marshal(caps)
				t.Errorf("capabilities = %s, want tools.listChanged, and prompts' and resources' as the upstream's", b)
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

// cutStreams is a proxy in front of the gateway that ends each of the
// first cuts standalone streams right after its priming event (what a
// stop or a replica moved does to a client), then lets streams through.
type cutStreams struct {
	backend *url.URL
	cuts    int

	mu         sync.Mutex
	gets       int
	lastIDs    []string // the Last-Event-ID of each GET
	reachedEnd chan struct{}
}

func (p *cutStreams) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		httputil.NewSingleHostReverseProxy(p.backend).ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.gets++
	n := p.gets
	p.lastIDs = append(p.lastIDs, r.Header.Get("Last-Event-ID"))
	if n == p.cuts+1 {
		close(p.reachedEnd)
	}
	p.mu.Unlock()
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host, out.RequestURI = p.backend.Scheme, p.backend.Host, ""
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	maps.Copy(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	br := bufio.NewReader(resp.Body)
	blocks := 0
	for {
		line, err := br.ReadString('\n')
		if _, werr := w.Write([]byte(line)); werr != nil || err != nil {
			return
		}
		_ = rc.Flush()
		if line == "\n" {
			blocks++
			if n <= p.cuts && blocks == 2 { // ": ok", then the priming event
				return
			}
		}
	}
}

// TestPush_StreamSurvivesRepeatedEnds: go-sdk's client, with its default
// retries (5), keeps its session through more ends of its standalone
// stream than that, because each stream it opens is primed with an id of
// its own, which the client counts as progress; it reconnects with the
// last id, the gateway answers that with a list change (a change may have
// been missed), and a change made afterwards is pushed as ever. Without
// the priming event the client gives the session up at the sixth end.
func TestPush_StreamSurvivesRepeatedEnds(t *testing.T) {
	e := newPushEnv(t)
	key, _ := e.fx.AddKey(t, mcpgate.ScopeFull)
	backend, _ := url.Parse(e.fx.URL)
	proxy := &cutStreams{backend: backend, cuts: 6, reachedEnd: make(chan struct{})}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	changed := make(chan struct{}, 16)
	c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "v0"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} }})
	tr := &http.Transport{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: front.URL + "/mcp",
		HTTPClient: &http.Client{Transport: BearerTransport{Key: key, Base: tr}}},
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("Connect() err = %v", err)
	}
	t.Cleanup(func() { _ = cs.Close(); tr.CloseIdleConnections() })
	select {
	case <-proxy.reachedEnd:
	case <-ctx.Done():
		t.Fatalf("the client stopped reconnecting its stream after %d GETs", proxy.gets)
	}
	waitChanged(t, changed) // the answer to the last reconnect's Last-Event-ID
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("ListTools() after %d ends of the stream err = %v, want the session alive", proxy.cuts, err)
	}
	proxy.mu.Lock()
	ids := slices.Clone(proxy.lastIDs)
	proxy.mu.Unlock()
	for i, id := range ids {
		if (i == 0) != (id == "") || i > 1 && id == ids[i-1] {
			t.Errorf("GET %d Last-Event-ID %q (all: %q), want none first, then each stream's own", i+1, id, ids)
		}
	}
	for len(changed) > 0 {
		<-changed
	}
	e.setTool(t, e.fx.Owner(), e2b.ToolListSandboxes, false)
	waitChanged(t, changed)
}
