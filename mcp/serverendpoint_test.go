package mcp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// fakeEndpoints is a ServerEndpointService with function fields.
type fakeEndpoints struct {
	EndpointFn func(server string) (*mcpgate.ServerEndpoint, error)
	RelayFn    func(server, method string, params json.RawMessage) (json.RawMessage, error)
}

func (f *fakeEndpoints) ServerEndpoint(_ context.Context, _ *mcpgate.Actor, server string) (*mcpgate.ServerEndpoint, error) {
	return f.EndpointFn(server)
}

func (f *fakeEndpoints) RelayToServer(_ context.Context, _ *mcpgate.Actor, server, method string, params json.RawMessage) (json.RawMessage, error) {
	return f.RelayFn(server, method, params)
}

// fakeTools is a ToolService whose calls are recorded.
type fakeTools struct {
	mcpgate.ToolService
	mu    sync.Mutex
	calls []mcpgate.ToolCall
	set   *mcpgate.ToolSet
}

func (f *fakeTools) ToolSet(context.Context, *mcpgate.Actor) (*mcpgate.ToolSet, error) {
	return f.set, nil
}

func (f *fakeTools) CallTool(_ context.Context, _ *mcpgate.Actor, call mcpgate.ToolCall) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	return json.RawMessage(`{"done":true}`), nil
}

type fakeAuth struct{}

func (fakeAuth) Authenticate(_ context.Context, p mcpgate.Presented) (*mcpgate.Actor, error) {
	if p.Value.Reveal() != "good-key" {
		return nil, &mcpgate.AuthError{Reason: "unknown"}
	}
	return &mcpgate.Actor{UserID: "u1", WorkspaceID: "w1", KeyID: "k1", Scope: mcpgate.ScopeFull, Source: mcpgate.SourceMCP}, nil
}

const (
	lookupDef  = `{"name":"lookup","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}},"annotations":{"destructiveHint":false},"outputSchema":{"type":"object"},"x-vendor":1}`
	publishDef = `{"name":"publish","inputSchema":{"type":"object"},"outputSchema":{"type":"object"}}`
)

// serverEndpointFixture serves ServerHandler on /mcp/{server} and
// /c/{key}/mcp/{server} with the fakes.
func serverEndpointFixture(t *testing.T, eps *fakeEndpoints, limits ...func(*Options)) (string, *fakeTools) {
	t.Helper()
	tools := &fakeTools{set: &mcpgate.ToolSet{All: map[string]mcpgate.ToolInfo{}}}
	opts := Options{Tools: tools, Registry: connectors.NewRegistry(), Authenticators: []mcpgate.Authenticator{fakeAuth{}},
		PublicURL: "http://gateway.test", ConfirmationSecret: []byte("serverendpoint-test-secret-0123456789")}
	for _, f := range limits {
		f(&opts)
	}
	g := New(opts)
	t.Cleanup(g.Close)
	mux := http.NewServeMux()
	h := g.ServerHandler(eps)
	mux.Handle("/mcp/{server}", h)
	mux.Handle("/c/{key}/mcp/{server}", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, tools
}

func docsEndpoint() *mcpgate.ServerEndpoint {
	return &mcpgate.ServerEndpoint{Server: "docs",
		Init: json.RawMessage(`{"protocolVersion":"2025-11-25","serverInfo":{"name":"docs-up","version":"2"},"instructions":"hi",
			"capabilities":{"prompts":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"completions":{},"logging":{},"experimental":{"x":{}}}}`),
		Tools: []mcpgate.EndpointTool{
			{Name: "lookup", ExposedName: "docs_lookup", Approval: mcpgate.ApprovalNone, Definition: json.RawMessage(lookupDef)},
			{Name: "publish", ExposedName: "docs_publish", Approval: mcpgate.ApprovalHuman, Definition: json.RawMessage(publishDef)},
		},
		Hidden: map[string]string{"purge": "docs_purge"}}
}

// rpc posts one JSON-RPC request at a protocol version and returns the
// answer's result or error, read from JSON or SSE.
func rpc(t *testing.T, url, version, method, params string) (json.RawMessage, *jsonrpc.Error, int) {
	t.Helper()
	if params == "" {
		params = "{}"
	}
	if version == newProtocol {
		var p map[string]any
		_ = json.Unmarshal([]byte(params), &p)
		p["_meta"] = map[string]any{sdk.MetaKeyProtocolVersion: newProtocol, sdk.MetaKeyClientCapabilities: map[string]any{},
			sdk.MetaKeyClientInfo: map[string]any{"name": "t", "version": "1"}}
		b, _ := json.Marshal(p)
		params = string(b)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	if version == newProtocol {
		req.Header.Set("Mcp-Method", method)
		var named struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		}
		_ = json.Unmarshal([]byte(params), &named)
		if n := named.Name + named.URI; n != "" {
			req.Header.Set("Mcp-Name", n)
		}
	}
	req.Header.Set("Authorization", "Bearer good-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return raw, nil, resp.StatusCode
	}
	msg := raw
	if i := strings.Index(string(raw), "data: "); i >= 0 {
		msg = []byte(strings.SplitN(string(raw[i+6:]), "\n", 2)[0])
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	if err := json.Unmarshal(msg, &env); err != nil || (env.Result == nil && env.Error == nil) {
		return raw, nil, resp.StatusCode // not a JSON-RPC answer (the gateway's own refusal)
	}
	return env.Result, env.Error, resp.StatusCode
}

// TestServerHandler_Tools lists the server's tools as it defined them
// under their own names (the gateway's approval argument added where the
// workspace asks for one), and runs a call by its own name through the
// tool service under the exposed name; the exposed name is no name of
// this endpoint.
func TestServerHandler_Tools(t *testing.T) {
	url, tools := serverEndpointFixture(t, &fakeEndpoints{EndpointFn: func(string) (*mcpgate.ServerEndpoint, error) { return docsEndpoint(), nil }})
	for _, version := range []string{"2025-11-25", newProtocol} {
		res, rpcErr, _ := rpc(t, url+"/mcp/docs", version, "tools/list", "")
		if rpcErr != nil {
			t.Fatalf("tools/list err = %v", rpcErr)
		}
		var list struct {
			Tools []map[string]json.RawMessage `json:"tools"`
		}
		_ = json.Unmarshal(res, &list)
		if len(list.Tools) != 2 {
			t.Fatalf("tools/list = %s, want lookup and publish", res)
		}
		got, _ := json.Marshal(list.Tools[0])
		var want map[string]json.RawMessage
		_ = json.Unmarshal([]byte(lookupDef), &want)
		wantB, _ := json.Marshal(want)
		if string(got) != string(wantB) {
			t.Errorf("lookup listed as %s, want the definition as given %s", got, wantB)
		}
		pub := list.Tools[1]
		if _, ok := pub["outputSchema"]; ok || !strings.Contains(string(pub["inputSchema"]), approvalArg) {
			t.Errorf("publish (human approval) listed as %v, want approval_id in its input and no output schema", pub)
		}
		if version == newProtocol && !strings.Contains(string(res), `"ttlMs":0`) {
			t.Errorf("tools/list at %s = %s, want the caching hints", version, res)
		}
		if version != newProtocol && strings.Contains(string(res), "ttlMs") {
			t.Errorf("tools/list at %s = %s, want none of 2026-07-28's members", version, res)
		}
	}
	if _, rpcErr, _ := rpc(t, url+"/mcp/docs", "2025-11-25", "tools/call", `{"name":"lookup","arguments":{"q":"x"}}`); rpcErr != nil {
		t.Fatalf("tools/call lookup err = %v", rpcErr)
	}
	tools.mu.Lock()
	calls := tools.calls
	tools.mu.Unlock()
	if len(calls) != 1 || calls[0].Tool != "docs_lookup" || string(calls[0].Arguments) != `{"q":"x"}` {
		t.Errorf("tool service calls = %+v, want docs_lookup with the arguments", calls)
	}
	// A tool hidden from the caller goes to the service too, which
	// refuses it (here the fake runs it: the routing is what is observed).
	if _, rpcErr, _ := rpc(t, url+"/mcp/docs", "2025-11-25", "tools/call", `{"name":"purge","arguments":{}}`); rpcErr != nil {
		t.Fatalf("tools/call purge err = %v", rpcErr)
	}
	tools.mu.Lock()
	if n := len(tools.calls); n != 2 || tools.calls[1].Tool != "docs_purge" {
		t.Errorf("tool service calls = %+v, want purge under docs_purge", tools.calls)
	}
	tools.mu.Unlock()
	if _, rpcErr, _ := rpc(t, url+"/mcp/docs", "2025-11-25", "tools/call", `{"name":"docs_lookup","arguments":{}}`); rpcErr == nil {
		t.Error("tools/call docs_lookup on the server's endpoint err = nil, want unknown tool (its name there is lookup)")
	}
}

// TestServerHandler_Relay relays the upstream's methods and passes the
// result through: unknown members and the caller-visible _meta kept, the
// upstream's own serverInfo key dropped; a JSON-RPC error is relayed with
// the resource-not-found code of the client's version.
func TestServerHandler_Relay(t *testing.T) {
	var mu sync.Mutex
	var relayed []string
	eps := &fakeEndpoints{
		EndpointFn: func(string) (*mcpgate.ServerEndpoint, error) { return docsEndpoint(), nil },
		RelayFn: func(server, method string, params json.RawMessage) (json.RawMessage, error) {
			mu.Lock()
			relayed = append(relayed, server+" "+method+" "+string(params))
			mu.Unlock()
			if method == "resources/read" {
				return nil, &mcpgate.UpstreamRPCError{Code: -32602, Message: "Resource not found"}
			}
			return json.RawMessage(`{"messages":[],"vendor":{"a":1},"_meta":{"trace":"t","io.modelcontextprotocol/serverInfo":{"name":"up"}}}`), nil
		}}
	url, _ := serverEndpointFixture(t, eps)
	res, rpcErr, _ := rpc(t, url+"/c/good-key/mcp/docs", "2025-11-25", "prompts/get", `{"name":"greet","arguments":{"who":"ada"}}`)
	if rpcErr != nil {
		t.Fatalf("prompts/get err = %v", rpcErr)
	}
	if s := string(res); !strings.Contains(s, `"vendor":{"a":1}`) || !strings.Contains(s, `"trace":"t"`) || strings.Contains(s, `"up"`) || strings.Contains(s, "resultType") {
		t.Errorf("prompts/get result = %s, want the upstream's members and _meta, without its serverInfo or 2026-07-28's resultType", s)
	}
	mu.Lock()
	if len(relayed) != 1 || !strings.HasPrefix(relayed[0], "docs prompts/get ") || !strings.Contains(relayed[0], `"who":"ada"`) {
		t.Errorf("relayed = %v", relayed)
	}
	mu.Unlock()
	for version, code := range map[string]int64{"2025-11-25": -32002, newProtocol: -32602} {
		_, rpcErr, _ = rpc(t, url+"/mcp/docs", version, "resources/read", `{"uri":"file:///x"}`)
		if rpcErr == nil || rpcErr.Code != code || rpcErr.Message != "Resource not found" {
			t.Errorf("resources/read at %s err = %v, want code %d", version, rpcErr, code)
		}
	}
	if _, rpcErr, _ = rpc(t, url+"/mcp/docs", "2025-11-25", "resources/subscribe", `{"uri":"file:///x"}`); rpcErr == nil {
		t.Error("resources/subscribe err = nil, want a refusal: subscriptions are not relayed")
	}
}

// TestServerHandler_Initialize answers with the upstream's name and
// instructions and its capabilities less subscriptions and what the
// endpoint does not relay (its prompts and resources list changes kept).
func TestServerHandler_Initialize(t *testing.T) {
	url, _ := serverEndpointFixture(t, &fakeEndpoints{EndpointFn: func(string) (*mcpgate.ServerEndpoint, error) { return docsEndpoint(), nil }})
	res, rpcErr, _ := rpc(t, url+"/mcp/docs", "2025-11-25", "initialize",
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	if rpcErr != nil {
		t.Fatal(rpcErr)
	}
	var init struct {
		ServerInfo   sdk.Implementation         `json:"serverInfo"`
		Instructions string                     `json:"instructions"`
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(res, &init)
	if init.ServerInfo.Name != "docs-up" || init.Instructions != "hi" {
		t.Errorf("initialize = %s", res)
	}
	for _, c := range []string{"prompts", "resources", "completions", "logging", "tools"} {
		if _, ok := init.Capabilities[c]; !ok {
			t.Errorf("capabilities %s lack %s", res, c)
		}
	}
	if _, ok := init.Capabilities["experimental"]; ok || strings.Contains(string(init.Capabilities["resources"]), "subscribe") ||
		string(init.Capabilities["resources"]) != `{"listChanged":true}` || string(init.Capabilities["prompts"]) != `{"listChanged":true}` {
		t.Errorf("capabilities = %s, want the upstream's list changes and no subscribe or experimental", res)
	}
}

// TestServerHandler_NotFound answers a server the service does not give
// the caller with 404, and a missing credential with 401 before asking.
func TestServerHandler_NotFound(t *testing.T) {
	asked := 0
	url, _ := serverEndpointFixture(t, &fakeEndpoints{EndpointFn: func(string) (*mcpgate.ServerEndpoint, error) {
		asked++
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "this workspace has no upstream server of that name turned on")
	}})
	if _, _, status := rpc(t, url+"/mcp/nope", "2025-11-25", "tools/list", ""); status != http.StatusNotFound {
		t.Errorf("missing server = %d, want 404", status)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp/nope", strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || asked != 1 {
		t.Errorf("no credential = %d after %d lookups, want 401 and no lookup", resp.StatusCode, asked)
	}
}

// TestServerHandler_RelayLimited counts a read of a prompt against the
// key's limit as a tool call, and a list not against it.
func TestServerHandler_RelayLimited(t *testing.T) {
	relays := 0
	eps := &fakeEndpoints{
		EndpointFn: func(string) (*mcpgate.ServerEndpoint, error) { return docsEndpoint(), nil },
		RelayFn: func(string, string, json.RawMessage) (json.RawMessage, error) {
			relays++
			return json.RawMessage(`{"messages":[],"prompts":[]}`), nil
		}}
	url, _ := serverEndpointFixture(t, eps, func(o *Options) { o.KeyRate, o.KeyBurst = 0.0001, 1 })
	for range 3 {
		if _, rpcErr, _ := rpc(t, url+"/mcp/docs", "2025-11-25", "prompts/list", ""); rpcErr != nil {
			t.Fatalf("prompts/list err = %v, want lists free of the call limit", rpcErr)
		}
	}
	if _, rpcErr, _ := rpc(t, url+"/mcp/docs", "2025-11-25", "prompts/get", `{"name":"greet"}`); rpcErr != nil {
		t.Fatalf("first prompts/get err = %v", rpcErr)
	}
	_, rpcErr, _ := rpc(t, url+"/mcp/docs", "2025-11-25", "prompts/get", `{"name":"greet"}`)
	if rpcErr == nil || !strings.Contains(rpcErr.Message, "too many") {
		t.Errorf("second prompts/get err = %v, want the key's limit", rpcErr)
	}
	if relays != 4 {
		t.Errorf("relayed %d requests, want 4 (the refused one never reaches the upstream)", relays)
	}
}

// TestServerHandler_RelayListBound: the lists a server's endpoint relays
// are bounded per credential and server: a client listing everything at
// each connect, even every three seconds for hours, is never refused, and
// its calls never wait on its lists; a client hammering the lists gets
// the burst through to the upstream and then a refusal with the wait, so
// what reaches the upstream is bounded by the bucket. Another server's
// lists have a bucket of their own.
func TestServerHandler_RelayListBound(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	relayed := map[string]int{}
	eps := &fakeEndpoints{
		EndpointFn: func(server string) (*mcpgate.ServerEndpoint, error) {
			ep := docsEndpoint()
			ep.Server = server
			return ep, nil
		},
		RelayFn: func(server, _ string, _ json.RawMessage) (json.RawMessage, error) {
			mu.Lock()
			defer mu.Unlock()
			relayed[server]++
			return json.RawMessage(`{"prompts":[],"resources":[],"resourceTemplates":[]}`), nil
		}}
	url, tools := serverEndpointFixture(t, eps, func(o *Options) {
		o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	tools.set = &mcpgate.ToolSet{All: map[string]mcpgate.ToolInfo{"docs_lookup": {Name: "docs_lookup", Enabled: true}},
		Tools: []mcpgate.ToolInfo{{Name: "docs_lookup", Enabled: true}}}
	lists := []string{"prompts/list", "resources/list", "resources/templates/list"}
	// An ordinary client: connects, lists everything, every 3 seconds
	// (after a first burst of connects in a row), for 100 connects.
	for i := range 100 {
		if i >= relayListBurst/len(lists) {
			mu.Lock()
			now = now.Add(3 * time.Second)
			mu.Unlock()
		}
		for _, m := range lists {
			if _, rpcErr, _ := rpc(t, url+"/mcp/docs", "2025-11-25", m, ""); rpcErr != nil {
				t.Fatalf("connect %d: %s err = %v, want an ordinary client never refused", i, m, rpcErr)
			}
		}
	}
	// A client hammering: the bucket is empty now, so at most what refills
	// gets through, and the refusal says how long to wait.
	before := relayed["docs"]
	refused := 0
	for range 20 {
		_, rpcErr, _ := rpc(t, url+"/mcp/docs", "2025-11-25", "resources/list", "")
		if rpcErr != nil {
			if !strings.Contains(rpcErr.Message, "too often") {
				t.Fatalf("refusal = %v, want the list limit", rpcErr)
			}
			refused++
		}
	}
	if got := relayed["docs"] - before; got > 1 || refused < 19 {
		t.Errorf("hammering: %d lists reached the upstream and %d were refused, want at most the one token left", got, refused)
	}
	// Its calls are not held to its lists, and another server's lists have
	// their own bucket.
	if _, rpcErr, _ := rpc(t, url+"/mcp/docs", "2025-11-25", "tools/call", `{"name":"lookup","arguments":{}}`); rpcErr != nil {
		t.Errorf("tools/call after the lists ran out: %v, want it served", rpcErr)
	}
	if _, rpcErr, _ := rpc(t, url+"/mcp/wiki", "2025-11-25", "prompts/list", ""); rpcErr != nil {
		t.Errorf("another server's prompts/list: %v, want its own bucket", rpcErr)
	}
	// With time, the bucket refills at its rate, no faster.
	mu.Lock()
	now = now.Add(5 * time.Second)
	mu.Unlock()
	before = relayed["docs"]
	for range 10 {
		rpc(t, url+"/mcp/docs", "2025-11-25", "prompts/list", "")
	}
	if got := relayed["docs"] - before; got != 5 {
		t.Errorf("5 seconds later: %d lists reached the upstream, want %d (the rate)", got, 5*relayListRate)
	}
}
