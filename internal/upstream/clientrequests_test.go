//lint:file-ignore SA1019 sampling and roots are relayed while the protocol still has them (deprecated from 2026-07-28)

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

// askingServer is a go-sdk server whose tools ask their client during the
// call, and which records the capabilities each session declared.
type askingServer struct {
	mu       sync.Mutex
	declared []*mcp.ClientCapabilities
	// cancelled receives what the "brief" tool's elicitation returned
	// after the tool gave up on it.
	cancelled chan error
}

func (a *askingServer) serve(t *testing.T, stateless bool) string {
	t.Helper()
	a.cancelled = make(chan error, 1)
	s := mcp.NewServer(&mcp.Implementation{Name: "asking", Version: "v1"}, &mcp.ServerOptions{
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.declared = append(a.declared, req.Session.InitializeParams().Capabilities)
		}})
	say := func(format string, args ...any) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: text(fmt.Sprintf(format, args...))}
	}
	failed := func(err error) *mcp.CallToolResult {
		var w *jsonrpc.Error
		if errors.As(err, &w) {
			return say("error %d: %s", w.Code, w.Message)
		}
		return say("error: %v", err)
	}
	obj := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "colour?", RequestedSchema: map[string]any{"type": "object",
			"properties": map[string]any{"colour": map[string]any{"type": "string"}}}})
		if err != nil {
			return failed(err), nil
		}
		return say("%s %v", res.Action, res.Content["colour"]), nil
	})
	s.AddTool(&mcp.Tool{Name: "think", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "2+2?"}}}})
		if err != nil {
			return failed(err), nil
		}
		tc, _ := res.Content.(*mcp.TextContent)
		return say("%s %s", res.Model, tc.Text), nil
	})
	s.AddTool(&mcp.Tool{Name: "roots", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return failed(err), nil
		}
		return say("%d %s", len(res.Roots), res.Roots[0].URI), nil
	})
	s.AddTool(&mcp.Tool{Name: "brief", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err := req.Session.Elicit(short, &mcp.ElicitParams{Message: "quick", RequestedSchema: map[string]any{"type": "object"}})
		return say("gave up: %v", err != nil), nil
	})
	s.AddTool(&mcp.Tool{Name: "pick", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState == "" {
			return &mcp.CallToolResult{RequestState: "state-1", InputRequests: mcp.InputRequestMap{"c": &mcp.ElicitParams{
				Message: "colour?", RequestedSchema: map[string]any{"type": "object"}}}}, nil
		}
		r, _ := req.Params.InputResponses["c"].(*mcp.ElicitResult)
		return say("%s %s %v", req.Params.RequestState, r.Action, r.Content["colour"]), nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func (a *askingServer) lastDeclared() *mcp.ClientCapabilities {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.declared) == 0 {
		return nil
	}
	return a.declared[len(a.declared)-1]
}

func callText(t *testing.T, p *Pool[string], key string, target Target, req CallRequest) string {
	t.Helper()
	res, err := p.Call(context.Background(), key, target, req)
	if err != nil {
		t.Fatalf("Call(%s) err = %v", req.Tool, err)
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(res.Raw, &r) != nil || len(r.Content) == 0 {
		return string(res.Raw)
	}
	return r.Content[0].Text
}

// TestClientRequests_RelayedToTheCall: on a 2025-11-25 session, the
// server's elicitation, sampling and roots requests during a call reach
// the call's OnRequest with their params, its answers reach the server's
// tool; a session declares exactly its target's capabilities; a caller's
// JSON-RPC error reaches the server with its code; without OnRequest the
// server is told no one can answer.
func TestClientRequests_RelayedToTheCall(t *testing.T) {
	noLeaks(t)
	srv := &askingServer{}
	url := srv.serve(t, false)
	p := newPool(t, Options{ProtocolVersion: "2025-11-25"})
	caps := Capabilities{ClientCapabilities: mcpgate.ClientCapabilities{Sampling: true, ElicitationForm: true, Roots: true}}
	target := Target{URL: url, Capabilities: caps}
	var mu sync.Mutex
	var seen []string
	onRequest := func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		mu.Lock()
		seen = append(seen, method+" "+string(params))
		mu.Unlock()
		switch method {
		case mcpgate.MethodElicit:
			return json.RawMessage(`{"action":"accept","content":{"colour":"teal"}}`), nil
		case mcpgate.MethodCreateMessage:
			return json.RawMessage(`{"role":"assistant","model":"m1","content":{"type":"text","text":"4"}}`), nil
		case mcpgate.MethodListRoots:
			return json.RawMessage(`{"roots":[{"uri":"file:///work","name":"work"}]}`), nil
		}
		return nil, errors.New("unexpected")
	}
	for tool, want := range map[string]string{"ask": "accept teal", "think": "m1 4", "roots": "1 file:///work"} {
		if got := callText(t, p, "k1", target, CallRequest{Tool: tool, OnRequest: onRequest}); got != want {
			t.Errorf("%s = %q, want %q", tool, got, want)
		}
	}
	mu.Lock()
	if len(seen) != 3 || !strings.Contains(strings.Join(seen, "\n"), `"message":"colour?"`) ||
		!strings.Contains(strings.Join(seen, "\n"), "roots/list {}") {
		t.Errorf("OnRequest saw %q, want the three requests with their params", seen)
	}
	mu.Unlock()
	if d := srv.lastDeclared(); d == nil || d.Sampling == nil || d.Sampling.Tools != nil || d.Elicitation == nil ||
		d.Elicitation.Form == nil || d.Elicitation.URL != nil || d.RootsV2 == nil {
		t.Errorf("declared %+v, want sampling (no tools), form elicitation and roots", d)
	}

	refuse := func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return nil, &mcpgate.ClientRPCError{Code: -32042, Message: "the person said no"}
	}
	if got := callText(t, p, "k1", target, CallRequest{Tool: "ask", OnRequest: refuse}); got != "error -32042: the person said no" {
		t.Errorf("ask refused by the caller = %q, want its JSON-RPC error", got)
	}
	if got := callText(t, p, "k1", target, CallRequest{Tool: "ask"}); !strings.HasPrefix(got, fmt.Sprintf("error %d", codeNoClient)) {
		t.Errorf("ask without OnRequest = %q, want method not found", got)
	}

	none := Target{URL: url}
	if got := callText(t, p, "k2", none, CallRequest{Tool: "ask", OnRequest: onRequest}); !strings.HasPrefix(got, "error") {
		t.Errorf("ask on a session that declared nothing = %q, want refused by the server", got)
	}
	if d := srv.lastDeclared(); d == nil || d.Sampling != nil || d.Elicitation != nil || d.RootsV2 != nil {
		t.Errorf("declared %+v with no capabilities, want none", d)
	}
}

// TestClientRequests_IdleHeldAndCancelled: the idle timeout does not run
// while a request waits for its answer (an answer three idle timeouts
// late still reaches the tool), and a request the server gives up on ends
// OnRequest's context.
func TestClientRequests_IdleHeldAndCancelled(t *testing.T) {
	noLeaks(t)
	srv := &askingServer{}
	url := srv.serve(t, false)
	p := newPool(t, Options{ProtocolVersion: "2025-11-25"})
	target := Target{URL: url, Capabilities: Capabilities{ClientCapabilities: mcpgate.ClientCapabilities{ElicitationForm: true}}}
	const idle = 150 * time.Millisecond
	slow := func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		time.Sleep(3 * idle) // a person answering: the hold, not an assertion
		return json.RawMessage(`{"action":"accept","content":{"colour":"red"}}`), nil
	}
	if got := callText(t, p, "k1", target, CallRequest{Tool: "ask", OnRequest: slow, Limits: Limits{IdleTimeout: idle}}); got != "accept red" {
		t.Fatalf("ask answered after 3 idle timeouts = %q, want the answer", got)
	}
	ended := make(chan error, 1)
	wait := func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	}
	if got := callText(t, p, "k1", target, CallRequest{Tool: "brief", OnRequest: wait}); got != "gave up: true" {
		t.Fatalf("brief = %q", got)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("OnRequest still waits after the server cancelled its request")
	}
}

// TestClientRequests_InputRequired2026: on a 2026-07-28 session, an
// input_required result comes back as it came where the caller retries
// (PassInputRequests), and the retry's state and answers reach the
// server; otherwise the pool answers the input requests through OnRequest
// and retries the call itself.
func TestClientRequests_InputRequired2026(t *testing.T) {
	noLeaks(t)
	srv := &askingServer{}
	url := srv.serve(t, true)
	p := newPool(t, Options{})
	form := mcpgate.ClientCapabilities{ElicitationForm: true}
	pass := Target{URL: url, Capabilities: Capabilities{ClientCapabilities: form, PassInputRequests: true}}
	res, err := p.Call(context.Background(), "k1", pass, CallRequest{Tool: "pick"})
	if err != nil {
		t.Fatal(err)
	}
	if ir := ReadInputRequired(res.Raw); ir == nil || ir.RequestState != "state-1" || ir.InputRequests["c"].Method != mcpgate.MethodElicit {
		t.Fatalf("first call = %s, want the upstream's input_required as it came", res.Raw)
	}
	retry := CallRequest{Tool: "pick", RequestState: "state-1", InputResponses: json.RawMessage(`{"c":{"action":"accept","content":{"colour":"blue"}}}`)}
	if got := callText(t, p, "k1", pass, retry); got != "state-1 accept blue" {
		t.Fatalf("retry = %q, want the state and the answer at the server", got)
	}
	answer := func(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"action":"accept","content":{"colour":"green"}}`), nil
	}
	self := Target{URL: url, Capabilities: Capabilities{ClientCapabilities: form}}
	if got := callText(t, p, "k2", self, CallRequest{Tool: "pick", OnRequest: answer}); got != "state-1 accept green" {
		t.Fatalf("answered by the pool = %q, want the retry's answer at the server", got)
	}
	bad := CallRequest{Tool: "pick", RequestState: "state-1", InputResponses: json.RawMessage(`{"c":{"nothing":1}}`)}
	if _, err := p.Call(context.Background(), "k1", pass, bad); !errors.Is(err, errBadParams) {
		t.Fatalf("unreadable inputResponses: err = %v, want errBadParams", err)
	}
}
