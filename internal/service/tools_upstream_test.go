package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
	"github.com/mcpgate/mcpgate/internal/upstream"
	"github.com/mcpgate/mcpgate/internal/upstream/upstreamtest"
)

// upstreamToolsEnv is the tool service and the server service on one
// store and one pool, wired as serve wires them.
type upstreamToolsEnv struct {
	*servicetest.Env
	servers *service.Servers
}

func newUpstreamToolsEnv(t *testing.T) *upstreamToolsEnv {
	t.Helper()
	pool := upstream.New[service.UpstreamKey](upstream.Options{Network: loopbackNetwork, ConnectTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = pool.Close() })
	registry := connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: "http://127.0.0.1:1", DashboardURL: "http://127.0.0.1:1"}))
	env := servicetest.New(t, service.Options{Registry: registry, Upstreams: pool, PublicURL: "http://localhost:8080"})
	servers := service.NewServers(service.ServersOptions{DB: env.DB, Keyring: env.Keyring, Audit: env.Audit, Registry: registry,
		Pool: pool, Network: loopbackNetwork, PublicURL: "http://localhost:8080", Invalidate: env.Service.Invalidate})
	return &upstreamToolsEnv{Env: env, servers: servers}
}

func infoOf(t *testing.T, tools []mcpgate.ToolInfo, name string) (mcpgate.ToolInfo, bool) {
	t.Helper()
	i := slices.IndexFunc(tools, func(x mcpgate.ToolInfo) bool { return x.Name == name })
	if i < 0 {
		return mcpgate.ToolInfo{}, false
	}
	return tools[i], true
}

func setNames(set *mcpgate.ToolSet) []string {
	var out []string
	for _, t := range set.Tools {
		if t.Server != "" {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestTools_UpstreamToolsFollowTheCatalog: a server's tools are the
// workspace's tools, with the catalog row as their one state: the tool
// service and the server service switch the same row (on pins), each sees
// the other's change at once, and a disabled server's tools are gone.
func TestTools_UpstreamToolsFollowTheCatalog(t *testing.T) {
	ctx := context.Background()
	e := newUpstreamToolsEnv(t)
	up := upstreamtest.New(t, fixtureTools()...)
	_, admin := e.NewUser(t, "admin@example.com")
	if _, err := e.servers.AddServer(ctx, admin, mcpgate.ServerInput{Name: "files", URL: up.URL,
		Headers: map[string]mcpgate.Secret{"Authorization": upstreamSecret}}); err != nil {
		t.Fatalf("AddServer() err = %v", err)
	}
	tools, err := e.Service.Tools.Tools(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		enabled  bool
		approval mcpgate.Approval
	}{"files_read": {true, mcpgate.ApprovalNone}, "files_bare": {false, mcpgate.ApprovalHuman},
		"files_write": {false, mcpgate.ApprovalModel}, "files_delete": {false, mcpgate.ApprovalHuman}} {
		got, ok := infoOf(t, tools, name)
		if !ok || got.Enabled != want.enabled || got.Approval != want.approval || got.Server != "files" ||
			got.ServerTool != strings.TrimPrefix(name, "files_") || len(got.Definition) == 0 {
			t.Errorf("%s = %+v (listed %v), want enabled %v, approval %s, of server files", name, got, ok, want.enabled, want.approval)
		}
	}
	readOnly := *admin
	readOnly.Scope = mcpgate.ScopeReadOnly
	set, _ := e.Service.Tools.ToolSet(ctx, admin)
	if got := setNames(set); !slices.Equal(got, []string{"files_read"}) {
		t.Errorf("full set = %v, want the one tool on", got)
	}

	// On through the tool service: the server's own view says on and
	// pinned, and both scopes' sets follow.
	on, off := true, false
	if info, err := e.Service.Tools.UpdateTool(ctx, admin, "files_write", mcpgate.ToolUpdate{Enabled: &on}); err != nil || !info.Enabled {
		t.Fatalf("UpdateTool(files_write on) = %+v, %v", info, err)
	}
	srv, _ := e.servers.Server(ctx, admin, "files")
	if w := toolOf(t, srv, "write"); !w.Enabled || !w.Pinned {
		t.Errorf("the server's write after UpdateTool = %+v, want on and pinned", w)
	}
	set, _ = e.Service.Tools.ToolSet(ctx, admin)
	roSet, _ := e.Service.Tools.ToolSet(ctx, &readOnly)
	if got := setNames(set); !slices.Equal(got, []string{"files_read", "files_write"}) {
		t.Errorf("full set = %v", got)
	}
	if got := setNames(roSet); !slices.Equal(got, []string{"files_read"}) {
		t.Errorf("read-only set = %v, want only the tool declared read-only", got)
	}
	// Off through the server service: the tool service sees it at once.
	if _, err := e.servers.SetServerTool(ctx, admin, "files", "write", mcpgate.ToolUpdate{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	set, _ = e.Service.Tools.ToolSet(ctx, admin)
	if got := setNames(set); !slices.Equal(got, []string{"files_read"}) {
		t.Errorf("after the server service turned write off, set = %v", got)
	}
	if _, err := e.Service.Tools.CallTool(ctx, admin, mcpgate.ToolCall{Tool: "files_write"}); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("CallTool(files_write off) err = %v, want forbidden", err)
	}
	out, err := e.Service.Tools.CallTool(ctx, admin, mcpgate.ToolCall{Tool: "files_read", Arguments: []byte(`{}`)})
	if err != nil || !strings.Contains(string(out), `"text":"read"`) {
		t.Errorf("CallTool(files_read) = %s, %v, want the upstream's result", out, err)
	}

	// Another workspace neither sees, switches nor calls them.
	_, other := e.NewUser(t, "other@example.com")
	if ts, _ := e.Service.Tools.Tools(ctx, other); slices.ContainsFunc(ts, func(x mcpgate.ToolInfo) bool { return x.Server != "" }) {
		t.Error("another workspace lists the server's tools")
	}
	if _, err := e.Service.Tools.UpdateTool(ctx, other, "files_read", mcpgate.ToolUpdate{Enabled: &off}); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("UpdateTool from another workspace err = %v, want not found", err)
	}
	if _, err := e.Service.Tools.CallTool(ctx, other, mcpgate.ToolCall{Tool: "files_read"}); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("CallTool from another workspace err = %v, want not found", err)
	}

	// A disabled server's tools are neither listed nor callable.
	if _, err := e.servers.UpdateServer(ctx, admin, "files", mcpgate.ServerUpdate{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	if ts, _ := e.Service.Tools.Tools(ctx, admin); slices.ContainsFunc(ts, func(x mcpgate.ToolInfo) bool { return x.Server != "" }) {
		t.Error("a disabled server's tools are listed")
	}
	if _, err := e.Service.Tools.CallTool(ctx, admin, mcpgate.ToolCall{Tool: "files_read"}); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("CallTool of a disabled server's tool err = %v, want not found", err)
	}
	// The audit log has the call under its exposed name, with the server.
	if !slices.ContainsFunc(e.Audit.Events(), func(ev mcpgate.AuditEvent) bool {
		return ev.Kind == mcpgate.KindToolCall && ev.Action == "files_read" && ev.Outcome == mcpgate.OutcomeOK &&
			strings.Contains(ev.Message, "server files, tool read")
	}) {
		t.Error("no audit row for the upstream call")
	}
	for _, ev := range e.Audit.Events() {
		if strings.Contains(mustServerJSON(t, ev), "ups-secret") {
			t.Errorf("audit event %s holds the credential", ev.Action)
		}
	}
}

// TestTools_UpstreamCallBounds: a relayed call is bounded by the gateway's
// call timeout and the answer cap, and each failure is a tool error that
// says why and is audited under the tool's exposed name; a JSON-RPC error
// carries the server's message.
func TestTools_UpstreamCallBounds(t *testing.T) {
	ctx := context.Background()
	pool := upstream.New[service.UpstreamKey](upstream.Options{Network: loopbackNetwork, ConnectTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = pool.Close() })
	env := servicetest.New(t, service.Options{Registry: connectors.NewRegistry(), Upstreams: pool, CallTimeout: time.Second,
		UpstreamAnswerBytes: 4 << 10})
	servers := service.NewServers(service.ServersOptions{DB: env.DB, Keyring: env.Keyring, Pool: pool, Network: loopbackNetwork,
		Invalidate: env.Service.Invalidate})
	srv := mcp.NewServer(&mcp.Implementation{Name: "bounds", Version: "v1"}, nil)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	obj := json.RawMessage(`{"type":"object"}`)
	release := make(chan struct{})
	srv.AddTool(&mcp.Tool{Name: "slow", InputSchema: obj, Annotations: ro}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// Until the gateway gives up, which the server may or may not be
		// told of, or the test ends.
		select {
		case <-ctx.Done():
		case <-release:
		}
		return nil, errors.New("too late")
	})
	srv.AddTool(&mcp.Tool{Name: "big", InputSchema: obj, Annotations: ro}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 64<<10)}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "refuse", InputSchema: obj, Annotations: ro}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("quota exhausted for ups-secret-0123456789abcdef")
	})
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: obj, Annotations: ro}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) }) // before hs.Close, which waits for the handler
	_, admin := env.NewUser(t, "admin@example.com")
	if _, err := servers.AddServer(ctx, admin, mcpgate.ServerInput{Name: "b", URL: hs.URL + "/mcp",
		Headers: map[string]mcpgate.Secret{"Authorization": upstreamSecret}}); err != nil {
		t.Fatalf("AddServer() err = %v", err)
	}
	// The server gets the arguments as the gateway weighed them: a member
	// given twice once (the last, as the approval binding reads it), and
	// numbers as written.
	out, err := env.Service.Tools.CallTool(ctx, admin, mcpgate.ToolCall{Tool: "b_echo",
		Arguments: []byte(`{"q":"first","q":"last","n":12345678901234567891}`)})
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err != nil || json.Unmarshal(out, &res) != nil || len(res.Content) != 1 {
		t.Fatalf("CallTool(b_echo) = %s, %v", out, err)
	}
	if got := res.Content[0].Text; got != `{"n":12345678901234567891,"q":"last"}` {
		t.Errorf("the server received %s, want the weighed arguments", got)
	}
	for _, c := range []struct{ tool, want string }{
		{"b_slow", "took too long"},
		{"b_big", "b could not answer the call"},
		{"b_refuse", "quota exhausted"},
	} {
		_, err := env.Service.Tools.CallTool(ctx, admin, mcpgate.ToolCall{Tool: c.tool, Arguments: []byte(`{}`)})
		if msg := mcpgate.ErrorMessage(err); err == nil || !strings.Contains(msg, c.want) {
			t.Errorf("CallTool(%s) err = %v, want %q", c.tool, err, c.want)
		} else if strings.Contains(msg, "ups-secret") {
			t.Errorf("CallTool(%s) error holds the credential: %q", c.tool, msg)
		}
		if !slices.ContainsFunc(env.Audit.Events(), func(ev mcpgate.AuditEvent) bool {
			return ev.Action == c.tool && ev.Outcome == mcpgate.OutcomeError && strings.Contains(ev.Message, "server b")
		}) {
			t.Errorf("no error audit row for %s", c.tool)
		}
	}
}
