package service_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// testClock is the replicas' clock: the tests move it, nothing sleeps.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// flakyUpstream is a real go-sdk MCP server on loopback that the test can
// take down (every request answered 503), hold (each request waits for
// the test) and redefine. The tool "fails" answers a tool error result.
type flakyUpstream struct {
	URL     string
	current atomic.Pointer[mcp.Server]
	failing atomic.Bool
	holding atomic.Bool
	arrived chan struct{}
	release chan struct{}

	mu      sync.Mutex
	headers []http.Header
	lists   int
}

func newFlakyUpstream(t *testing.T, tools ...*mcp.Tool) *flakyUpstream {
	t.Helper()
	u := &flakyUpstream{arrived: make(chan struct{}, 16), release: make(chan struct{})}
	u.setTools(tools...)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.current.Load() }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		u.mu.Lock()
		u.headers = append(u.headers, r.Header.Clone())
		if bytes.Contains(body, []byte(`"method":"tools/list"`)) {
			u.lists++
		}
		u.mu.Unlock()
		if u.holding.Load() {
			u.arrived <- struct{}{}
			<-u.release
		}
		if u.failing.Load() {
			http.Error(w, "upstream down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u.URL = ts.URL + "/mcp"
	return u
}

func (u *flakyUpstream) setTools(tools ...*mcp.Tool) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "flaky", Version: "v1"}, nil)
	srv.AddPrompt(&mcp.Prompt{Name: "hello"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
	})
	for _, t := range tools {
		t := *t
		if t.InputSchema == nil {
			t.InputSchema = map[string]any{"type": "object"}
		}
		name := t.Name
		srv.AddTool(&t, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: name == "fails", Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
		})
	}
	u.current.Store(srv)
}

// toolLists counts the tools/list requests so far: one per discovery.
func (u *flakyUpstream) toolLists() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lists
}

func (u *flakyUpstream) received() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.headers)
}

func readOnlyTool(name, description string) *mcp.Tool {
	return &mcp.Tool{Name: name, Description: description, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}
}

// replica is one gateway replica's services on the shared database: the
// tool service, the server service and the monitor, with one health count,
// its tool sets dropped by the notifications every replica hears.
type replica struct {
	*servicetest.Env
	servers *service.Servers
	monitor *service.Monitor
	log     *bytes.Buffer
}

// monitorFixture is two replicas on one database, one clock, and a count
// of the policy invalidations sent per workspace.
type monitorFixture struct {
	a, b  *replica
	clock *testClock

	mu       sync.Mutex
	policies map[string]int
	markers  chan string
}

func newMonitorFixture(t *testing.T) *monitorFixture {
	t.Helper()
	f := &monitorFixture{clock: &testClock{t: time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)}, policies: map[string]int{},
		markers: make(chan string, 16)}
	db := storetest.Open(t)
	f.a = f.newReplica(t, db, nil)
	f.b = f.newReplica(t, db, f.a.Env)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	ready := make(chan struct{})
	wg.Go(func() {
		f.a.DB.Listen(ctx, slog.New(slog.DiscardHandler), ready, func(inv store.Invalidation) {
			for _, r := range []*replica{f.a, f.b} {
				r.Service.Invalidate(inv.Kind, inv.WorkspaceID)
			}
			switch inv.Kind {
			case store.InvalidatePolicy:
				f.mu.Lock()
				f.policies[inv.WorkspaceID]++
				f.mu.Unlock()
			case "marker":
				f.markers <- inv.WorkspaceID
			}
		}, nil)
	})
	<-ready
	return f
}

func (f *monitorFixture) newReplica(t *testing.T, db *store.DB, first *servicetest.Env) *replica {
	t.Helper()
	pool := upstream.New[service.UpstreamKey](upstream.Options{Network: loopbackNetwork, ConnectTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = pool.Close() })
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))
	registry := connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: "http://127.0.0.1:1", DashboardURL: "http://127.0.0.1:1"}))
	health := service.NewUpstreamHealth(service.UpstreamHealthOptions{DB: db, Now: f.clock.Now, Logger: logger})
	opts := service.Options{DB: db, Registry: registry, Upstreams: pool, PublicURL: "http://localhost:8080", Now: f.clock.Now,
		Logger: logger, UpstreamHealth: health}
	if first != nil {
		opts.Keyring = first.Keyring
	}
	env := servicetest.New(t, opts)
	servers := service.NewServers(service.ServersOptions{DB: env.DB, Keyring: env.Keyring, Audit: env.Audit, Registry: registry,
		Pool: pool, Network: loopbackNetwork, PublicURL: "http://localhost:8080", Invalidate: env.Service.Invalidate,
		Now: f.clock.Now, Logger: logger, Health: health, RediscoverEvery: 15 * time.Minute, RediscoverJitter: time.Minute})
	mon := service.NewMonitor(service.MonitorOptions{Servers: servers, Logger: logger,
		AfterFunc: func(time.Duration, func()) service.MonitorTimer { t.Fatal("a settle timer started"); return nil }})
	t.Cleanup(mon.Stop)
	return &replica{Env: env, servers: servers, monitor: mon, log: &logs}
}

// syncWriter lets the replica's goroutines log into one buffer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// policyInvalidations returns how many policy invalidations of the
// workspace every replica heard so far: a marker notification sent now is
// waited for first, and notifications arrive in commit order, so every
// one sent before this call is counted.
func (f *monitorFixture) policyInvalidations(t *testing.T, workspaceID string) int {
	t.Helper()
	if _, err := f.a.DB.Pool.Exec(context.Background(), `SELECT pg_notify($1, $2)`, store.InvalidationChannel,
		"marker:"+workspaceID); err != nil {
		t.Fatal(err)
	}
	for got := range f.markers {
		if got == workspaceID {
			break
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.policies[workspaceID]
}

func (f *monitorFixture) addServer(t *testing.T, a *mcpgate.Actor, name, url, secret string) {
	t.Helper()
	if _, err := f.a.servers.AddServer(context.Background(), a, mcpgate.ServerInput{Name: name, URL: url,
		Headers: map[string]mcpgate.Secret{"Authorization": mcpgate.Secret(secret)}}); err != nil {
		t.Fatalf("AddServer(%s) err = %v", name, err)
	}
}

func callableNames(t *testing.T, r *replica, a *mcpgate.Actor) []string {
	t.Helper()
	set, err := r.Service.Tools.ToolSet(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	return setNames(set)
}

func (f *monitorFixture) assertNoSecret(t *testing.T, secrets ...string) {
	t.Helper()
	for _, r := range []*replica{f.a, f.b} {
		for _, ev := range r.Audit.Events() {
			for _, s := range secrets {
				if strings.Contains(mustServerJSON(t, ev), s) {
					t.Errorf("audit event %s holds a credential", ev.Action)
				}
			}
		}
		for _, s := range secrets {
			if strings.Contains(r.log.String(), s) {
				t.Errorf("the log holds a credential: %s", r.log)
			}
		}
	}
}

// Three calls that cannot reach a server mark it down once, for every
// replica: its tools leave both replicas' tool sets, a call by name says
// since when and why, audited; a tool's error result counts for nothing;
// another workspace's server is untouched. The monitor's probe (one
// replica's) brings it back.
func TestMonitor_TransportFailuresHideToolsEverywhere(t *testing.T) {
	ctx := context.Background()
	f := newMonitorFixture(t)
	up := newFlakyUpstream(t, readOnlyTool("read", "reads"), readOnlyTool("fails", "answers a tool error"))
	otherUp := newFlakyUpstream(t, readOnlyTool("read", "reads"))
	_, admin := f.a.NewUser(t, "admin@example.com")
	_, other := f.a.NewUser(t, "other@example.com")
	f.addServer(t, admin, "files", up.URL, upstreamSecret)
	const otherSecret = "Bearer other-secret-0123456789abcdef"
	f.addServer(t, other, "files", otherUp.URL, otherSecret)
	for _, r := range []*replica{f.a, f.b} {
		if got := callableNames(t, r, admin); !slices.Equal(got, []string{"files_fails", "files_read"}) {
			t.Fatalf("tool set before = %v", got)
		}
	}
	before := f.policyInvalidations(t, admin.WorkspaceID)

	// Tool errors are answers: the server is up.
	for range 3 {
		if _, err := f.a.Service.Tools.CallTool(ctx, admin, mcpgate.ToolCall{Tool: "files_fails"}); err != nil {
			t.Fatalf("CallTool(files_fails) err = %v, want the tool's error result", err)
		}
	}
	up.failing.Store(true)
	for i := range 3 {
		_, err := f.a.Service.Tools.CallTool(ctx, admin, mcpgate.ToolCall{Tool: "files_read"})
		if err == nil || strings.Contains(mcpgate.ErrorMessage(err), "unreachable since") {
			t.Fatalf("call %d on a failing server err = %v, want the hop's error", i+1, err)
		}
		if i < 2 {
			if srv, _ := f.a.servers.Server(ctx, admin, "files"); srv.Health != mcpgate.HealthOK {
				t.Fatalf("after %d failed calls (and 3 tool errors) health = %s, want ok", i+1, srv.Health)
			}
		}
	}
	srv, err := f.b.servers.Server(ctx, admin, "files")
	if err != nil || srv.Health != mcpgate.HealthError || srv.DownSince == nil || !srv.DownSince.Equal(f.clock.Now()) ||
		!strings.Contains(srv.LastError, "HTTP 503") || srv.NextCheckAt == nil || !srv.NextCheckAt.Equal(f.clock.Now().Add(30*time.Second)) {
		t.Fatalf("server after 3 failed calls = %+v, %v; want down since now for HTTP 503, next check in 30 s", srv, err)
	}
	if got := f.policyInvalidations(t, admin.WorkspaceID) - before; got != 1 {
		t.Errorf("the transition sent %d policy invalidations, want 1", got)
	}
	for _, r := range []*replica{f.a, f.b} {
		if got := callableNames(t, r, admin); len(got) != 0 {
			t.Errorf("a replica's tool set while the server is down = %v, want none of its tools", got)
		}
		_, err := r.Service.Tools.CallTool(ctx, admin, mcpgate.ToolCall{Tool: "files_read"})
		want := "server files is unreachable since 2026-12-02T04:00:00Z: 3 calls in a row failed: the server answered HTTP 503; " +
			"the gateway retries every 30 s"
		if mcpgate.ErrorMessage(err) != want || mcpgate.ErrorCode(err) != mcpgate.EUnavailable {
			t.Errorf("CallTool(down) err = %q (%s), want %q", mcpgate.ErrorMessage(err), mcpgate.ErrorCode(err), want)
		}
		if ev := r.Audit.Last(); ev.Action != "files_read" || ev.Outcome != mcpgate.OutcomeError || !strings.Contains(ev.Message, "unreachable since") {
			t.Errorf("last audit of the refused call = %+v", ev)
		}
	}
	// Another workspace's server of the same name is up, its tools listed.
	if got := callableNames(t, f.b, other); !slices.Equal(got, []string{"files_read"}) {
		t.Errorf("the other workspace's tool set = %v", got)
	}
	if srv, _ := f.b.servers.Server(ctx, other, "files"); srv.Health != mcpgate.HealthOK {
		t.Errorf("the other workspace's server health = %s", srv.Health)
	}

	// Not due yet: nobody probes. Due: one replica probes, the other finds
	// nothing to claim; still down, it stays down, the reason its own.
	if n := f.a.monitor.CheckDue(ctx); n != 0 {
		t.Errorf("CheckDue before the probe is due claimed %d", n)
	}
	f.clock.Add(30 * time.Second)
	if n := f.a.monitor.CheckDue(ctx); n != 1 {
		t.Fatalf("CheckDue when due claimed %d, want the down server", n)
	}
	if n := f.b.monitor.CheckDue(ctx); n != 0 {
		t.Errorf("the other replica claimed %d checks already made", n)
	}
	if srv, _ := f.a.servers.Server(ctx, admin, "files"); srv.Health != mcpgate.HealthError || !srv.DownSince.Equal(f.clock.Now().Add(-30*time.Second)) {
		t.Errorf("after a failed probe = %+v, want down since the first failure", srv)
	}
	// The server answers again: the next probe brings it and its tools back.
	up.failing.Store(false)
	f.clock.Add(30 * time.Second)
	mid := f.policyInvalidations(t, admin.WorkspaceID)
	if n := f.b.monitor.CheckDue(ctx); n != 1 {
		t.Fatalf("CheckDue after recovery claimed %d", n)
	}
	if srv, _ := f.a.servers.Server(ctx, admin, "files"); srv.Health != mcpgate.HealthOK || srv.DownSince != nil || srv.LastError != "" {
		t.Errorf("after a probe that answered = %+v, want up", srv)
	}
	if got := f.policyInvalidations(t, admin.WorkspaceID) - mid; got != 1 {
		t.Errorf("coming back sent %d policy invalidations, want 1", got)
	}
	for _, r := range []*replica{f.a, f.b} {
		if got := callableNames(t, r, admin); !slices.Equal(got, []string{"files_fails", "files_read"}) {
			t.Errorf("a replica's tool set after recovery = %v", got)
		}
	}
	if _, err := f.b.Service.Tools.CallTool(ctx, admin, mcpgate.ToolCall{Tool: "files_read"}); err != nil {
		t.Errorf("CallTool after recovery err = %v", err)
	}
	// The probes went with this workspace's credential to its own server
	// only: the other upstream never saw it.
	for _, h := range otherUp.received() {
		if h.Get("Authorization") != otherSecret {
			t.Errorf("the other workspace's upstream received Authorization %q", h.Get("Authorization"))
		}
	}
	for _, h := range up.received() {
		if h.Get("Authorization") != upstreamSecret {
			t.Errorf("the server received Authorization %q", h.Get("Authorization"))
		}
	}
	f.assertNoSecret(t, strings.TrimPrefix(upstreamSecret, "Bearer "), strings.TrimPrefix(otherSecret, "Bearer "))
}

// Two monitors on one database never check one server at once: while one
// replica's probe is held at the server, the other finds nothing due.
func TestMonitor_OneReplicaChecksEachServer(t *testing.T) {
	ctx := context.Background()
	f := newMonitorFixture(t)
	up := newFlakyUpstream(t, readOnlyTool("read", "reads"))
	_, admin := f.a.NewUser(t, "admin@example.com")
	f.addServer(t, admin, "files", up.URL, upstreamSecret)
	f.clock.Add(17 * time.Minute) // past the re-discovery and its jitter
	up.holding.Store(true)
	done := make(chan int)
	go func() { done <- f.a.monitor.CheckDue(ctx) }()
	<-up.arrived // replica a's re-discovery is at the server
	if n := f.b.monitor.CheckDue(ctx); n != 0 {
		t.Errorf("replica b claimed %d checks while replica a checks the server", n)
	}
	up.holding.Store(false)
	close(up.release)
	for range len(up.arrived) {
		<-up.arrived
	}
	if n := <-done; n != 1 {
		t.Errorf("replica a claimed %d checks, want 1", n)
	}
	if n := f.b.monitor.CheckDue(ctx); n != 0 {
		t.Errorf("replica b claimed %d checks after replica a's", n)
	}
}

// The periodic re-discovery quarantines a trusted tool whose definition
// changed, writing and invalidating once; one that finds the stored
// catalog writes nothing and invalidates nothing.
func TestMonitor_PeriodicRediscovery(t *testing.T) {
	ctx := context.Background()
	f := newMonitorFixture(t)
	up := newFlakyUpstream(t, readOnlyTool("read", "reads"), readOnlyTool("list", "lists"))
	_, admin := f.a.NewUser(t, "admin@example.com")
	f.addServer(t, admin, "files", up.URL, upstreamSecret)
	added, _ := f.a.servers.Server(ctx, admin, "files")
	if added.NextCheckAt == nil || added.NextCheckAt.Before(f.clock.Now().Add(15*time.Minute)) ||
		added.NextCheckAt.After(f.clock.Now().Add(16*time.Minute)) {
		t.Errorf("next check after adding = %v, want in 15 to 16 min", added.NextCheckAt)
	}

	// Unchanged: the check is made, nothing is written.
	before := f.policyInvalidations(t, admin.WorkspaceID)
	lists := up.toolLists()
	f.clock.Add(16 * time.Minute)
	if n := f.b.monitor.CheckDue(ctx); n != 1 {
		t.Fatalf("CheckDue claimed %d, want the re-discovery", n)
	}
	if up.toolLists() != lists+1 {
		t.Errorf("the re-discovery listed the tools %d times, want 1", up.toolLists()-lists)
	}
	same, _ := f.a.servers.Server(ctx, admin, "files")
	if !same.UpdatedAt.Equal(added.UpdatedAt) || !same.LastDiscoveredAt.Equal(*added.LastDiscoveredAt) {
		t.Errorf("an unchanged re-discovery wrote the server: updated %v -> %v", added.UpdatedAt, same.UpdatedAt)
	}
	if got := f.policyInvalidations(t, admin.WorkspaceID) - before; got != 0 {
		t.Errorf("an unchanged re-discovery sent %d policy invalidations, want none", got)
	}

	// Changed: "read" (on, pinned) is quarantined; the set follows at once.
	up.setTools(readOnlyTool("read", "reads, and now sends your files away"), readOnlyTool("list", "lists"))
	f.clock.Add(17 * time.Minute)
	if n := f.a.monitor.CheckDue(ctx); n != 1 {
		t.Fatalf("CheckDue claimed %d, want the re-discovery", n)
	}
	srv, _ := f.b.servers.Server(ctx, admin, "files")
	if tool := toolOf(t, srv, "read"); !tool.Quarantined || tool.Change == nil {
		t.Errorf("changed read = %+v, want quarantined with its change", tool)
	}
	if got := f.policyInvalidations(t, admin.WorkspaceID) - before; got != 1 {
		t.Errorf("a changed re-discovery sent %d policy invalidations, want 1", got)
	}
	if got := callableNames(t, f.b, admin); !slices.Equal(got, []string{"files_list"}) {
		t.Errorf("tool set after the quarantine = %v", got)
	}
	if !slices.ContainsFunc(f.a.Audit.Events(), func(ev mcpgate.AuditEvent) bool {
		return ev.Action == string(mcpgate.ActionServerToolQuarantined) && ev.Source == mcpgate.SourceGateway && ev.WorkspaceID == admin.WorkspaceID
	}) {
		t.Error("no audit row of the gateway's quarantine")
	}
	f.assertNoSecret(t, strings.TrimPrefix(upstreamSecret, "Bearer "))
}

// A discovery that fails marks the server down at once; another
// workspace's server of the same URL, with its own credential, is
// neither marked nor probed with this one's.
func TestMonitor_FailedDiscoveryIsDownForItsWorkspaceOnly(t *testing.T) {
	ctx := context.Background()
	f := newMonitorFixture(t)
	up := newFlakyUpstream(t, readOnlyTool("read", "reads"))
	_, admin := f.a.NewUser(t, "admin@example.com")
	_, other := f.a.NewUser(t, "other@example.com")
	f.addServer(t, admin, "files", up.URL, upstreamSecret)
	const otherSecret = "Bearer other-secret-0123456789abcdef"
	f.addServer(t, other, "files", up.URL, otherSecret)
	if _, err := f.a.DB.Pool.Exec(ctx, `UPDATE upstream_servers SET url = 'http://127.0.0.1:1/mcp' WHERE workspace_id = $1`,
		admin.WorkspaceID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.a.servers.DiscoverServer(ctx, admin, "files"); err == nil {
		t.Fatal("DiscoverServer(unreachable) err = nil")
	}
	if got := callableNames(t, f.b, admin); len(got) != 0 {
		t.Errorf("tool set after a failed discovery = %v, want none", got)
	}
	if got := callableNames(t, f.b, other); !slices.Equal(got, []string{"files_read"}) {
		t.Errorf("the other workspace's tool set = %v", got)
	}
	sent := len(up.received())
	f.clock.Add(30 * time.Second)
	if n := f.a.monitor.CheckDue(ctx); n != 1 {
		t.Errorf("CheckDue claimed %d, want the down server only", n)
	}
	if got := up.received()[sent:]; len(got) != 0 {
		t.Errorf("the probe of the unreachable server reached the other workspace's upstream %d times", len(got))
	}
	for _, h := range up.received() {
		if a := h.Get("Authorization"); a != upstreamSecret && a != otherSecret {
			t.Errorf("the upstream received Authorization %q", a)
		}
	}
	f.assertNoSecret(t, strings.TrimPrefix(upstreamSecret, "Bearer "), strings.TrimPrefix(otherSecret, "Bearer "))
}

// fakeTimers are the settle timers of a monitor, fired by the test.
type fakeTimers struct {
	mu     sync.Mutex
	timers []*fakeTimer
}

type fakeTimer struct {
	mu     sync.Mutex
	fn     func()
	resets []time.Duration
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.resets = append(t.resets, d)
	return true
}

func (t *fakeTimer) Stop() bool { return true }

func (ft *fakeTimers) afterFunc(_ time.Duration, fn func()) service.MonitorTimer {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	t := &fakeTimer{fn: fn}
	ft.timers = append(ft.timers, t)
	return t
}

func (ft *fakeTimers) started() []*fakeTimer {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return slices.Clone(ft.timers)
}

// A burst of requests for a server's re-discovery is one discovery, once
// they settle; a request right after a check is not another check; a
// session's notice is matched to the server whose URL and credential the
// session carries, never to another workspace's at the same URL.
func TestMonitor_RediscoveryRequestsCoalesce(t *testing.T) {
	ctx := context.Background()
	f := newMonitorFixture(t)
	up := newFlakyUpstream(t, readOnlyTool("read", "reads"))
	_, admin := f.a.NewUser(t, "admin@example.com")
	_, other := f.a.NewUser(t, "other@example.com")
	f.addServer(t, admin, "files", up.URL, upstreamSecret)
	const otherSecret = "Bearer other-secret-0123456789abcdef"
	f.addServer(t, other, "files", up.URL, otherSecret)
	var timers fakeTimers
	mon := service.NewMonitor(service.MonitorOptions{Servers: f.a.servers, Settle: 2 * time.Second, SettleMax: 10 * time.Second,
		AfterFunc: timers.afterFunc})
	t.Cleanup(mon.Stop)

	up.setTools(readOnlyTool("read", "reads, changed"))
	lists := up.toolLists()
	for range 5 {
		mon.Rediscover(admin.WorkspaceID, "files")
	}
	started := timers.started()
	if len(started) != 1 {
		t.Fatalf("5 requests started %d timers, want 1", len(started))
	}
	if r := started[0].resets; len(r) != 4 || slices.ContainsFunc(r, func(d time.Duration) bool { return d > 2*time.Second }) {
		t.Errorf("the timer was moved %v, want 4 times, each at most the settle delay", r)
	}
	if up.toolLists() != lists {
		t.Fatal("a discovery ran before the requests settled")
	}
	started[0].fn()
	started[0].fn() // a timer moved after it fired fires again: still one discovery
	if got := up.toolLists() - lists; got != 1 {
		t.Errorf("the burst ran %d discoveries, want 1", got)
	}
	if srv, _ := f.a.servers.Server(ctx, admin, "files"); toolOf(t, srv, "read").Quarantined != true {
		t.Error("the re-discovery did not quarantine the changed tool")
	}
	if srv, _ := f.a.servers.Server(ctx, other, "files"); toolOf(t, srv, "read").Quarantined {
		t.Error("the other workspace's server was re-discovered for this one's request")
	}

	// A request within SettleMax of the last check is not another check,
	// on any replica.
	mon.Rediscover(admin.WorkspaceID, "files")
	timers.started()[1].fn()
	if got := up.toolLists() - lists; got != 1 {
		t.Errorf("a request right after a check ran another discovery (%d in all)", got)
	}

	// The other workspace's session says its tools changed: only its server
	// is discovered again, with its own credential.
	f.clock.Add(11 * time.Second)
	sent := len(up.received())
	mon.ToolListChanged(upstream.Target{URL: up.URL, Headers: map[string]mcpgate.Secret{"Authorization": otherSecret}})
	timers.started()[2].fn()
	if got := up.toolLists() - lists; got != 2 {
		t.Errorf("the notice ran %d discoveries in all, want 2", got)
	}
	if srv, _ := f.a.servers.Server(ctx, other, "files"); !toolOf(t, srv, "read").Quarantined {
		t.Error("the notice's server was not re-discovered")
	}
	for _, h := range up.received()[sent:] {
		if h.Get("Authorization") != otherSecret {
			t.Errorf("the notice's re-discovery sent Authorization %q", h.Get("Authorization"))
		}
	}
	// A notice from a session whose credential is no server's is nobody's.
	mon.ToolListChanged(upstream.Target{URL: up.URL, Headers: map[string]mcpgate.Secret{"Authorization": "Bearer someone-else-entirely"}})
	f.clock.Add(11 * time.Second)
	timers.started()[3].fn()
	if got := up.toolLists() - lists; got != 2 {
		t.Errorf("a notice matching no server ran a discovery (%d in all)", got)
	}
	f.assertNoSecret(t, strings.TrimPrefix(upstreamSecret, "Bearer "), strings.TrimPrefix(otherSecret, "Bearer "))
}

// The server's own endpoint counts its relays as the tool calls do: a
// JSON-RPC error answer is the server's, and counts for nothing; three
// relays that cannot reach it mark it down, and its endpoint then lists
// none of its tools (they are hidden, so a call by name is told why).
func TestMonitor_RelayFailuresMarkTheServerDown(t *testing.T) {
	ctx := context.Background()
	f := newMonitorFixture(t)
	up := newFlakyUpstream(t, readOnlyTool("read", "reads"))
	_, admin := f.a.NewUser(t, "admin@example.com")
	f.addServer(t, admin, "files", up.URL, upstreamSecret)
	eps := service.NewEndpoints(f.a.servers, f.a.Service.Tools, f.a.Service.CacheTrust())
	ep, err := eps.ServerEndpoint(ctx, admin, "files")
	if err != nil || len(ep.Tools) != 1 {
		t.Fatalf("ServerEndpoint() = %+v, %v, want its tool", ep, err)
	}
	for range 3 {
		_, err := eps.RelayToServer(ctx, admin, "files", upstream.MethodPromptsGet, []byte(`{"name":"nope"}`))
		var rpc *mcpgate.UpstreamRPCError
		if !errors.As(err, &rpc) {
			t.Fatalf("prompts/get of an unknown prompt err = %v, want the server's JSON-RPC error", err)
		}
	}
	if srv, _ := f.a.servers.Server(ctx, admin, "files"); srv.Health != mcpgate.HealthOK {
		t.Fatalf("after 3 JSON-RPC error answers health = %s, want ok", srv.Health)
	}
	up.failing.Store(true)
	for i := range 3 {
		if _, err := eps.RelayToServer(ctx, admin, "files", upstream.MethodPromptsList, []byte(`{}`)); err == nil {
			t.Fatalf("relay %d to a failing server err = nil", i+1)
		}
	}
	srv, _ := f.b.servers.Server(ctx, admin, "files")
	if srv.Health != mcpgate.HealthError || !strings.Contains(srv.LastError, "3 calls in a row failed") {
		t.Fatalf("server after 3 failed relays = %+v, want down", srv)
	}
	ep, err = eps.ServerEndpoint(ctx, admin, "files")
	if err != nil || len(ep.Tools) != 0 || ep.Hidden["read"] != "files_read" || len(ep.Init) == 0 {
		t.Errorf("ServerEndpoint(down) = %+v, %v, want its stored description, no tool listed, read hidden", ep, err)
	}
	f.assertNoSecret(t, strings.TrimPrefix(upstreamSecret, "Bearer "))
}
