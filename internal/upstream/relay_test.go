package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRelay relays each method a server's own endpoint serves to a go-sdk
// server, on both protocol generations, and gets the upstream's raw
// answers; an unknown resource is the upstream's JSON-RPC error, which
// leaves the session in place.
func TestRelay(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		name := "sessions"
		if stateless {
			name = "stateless"
		}
		t.Run(name, func(t *testing.T) {
			noLeaks(t)
			f := &fixture{stateless: stateless}
			ts := f.serve(t)
			p := newPool(t, Options{})
			target := Target{URL: ts.URL}
			relay := func(method, params string) string {
				t.Helper()
				raw, err := p.Relay(context.Background(), "k", target, method, json.RawMessage(params))
				if err != nil {
					t.Fatalf("Relay(%s) err = %v", method, err)
				}
				return string(raw)
			}
			if got := relay(MethodPromptsList, `{}`); !strings.Contains(got, `"greet"`) {
				t.Errorf("prompts/list = %s", got)
			}
			if got := relay(MethodPromptsGet, `{"name":"greet"}`); !strings.Contains(got, `"hello"`) {
				t.Errorf("prompts/get = %s", got)
			}
			if got := relay(MethodResourcesList, `{}`); !strings.Contains(got, `"file:///readme"`) {
				t.Errorf("resources/list = %s", got)
			}
			if got := relay(MethodResourcesRead, `{"uri":"file:///readme"}`); !strings.Contains(got, `"text":"hi"`) {
				t.Errorf("resources/read = %s", got)
			}
			if got := relay(MethodResourceTemplatesList, `{}`); !strings.Contains(got, `file:///docs/{name}`) {
				t.Errorf("resources/templates/list = %s", got)
			}
			if got := relay(MethodLoggingSetLevel, `{"level":"info"}`); got != "{}" {
				t.Errorf("logging/setLevel = %s, want {}", got)
			}
			_, err := p.Relay(context.Background(), "k", target, MethodResourcesRead, json.RawMessage(`{"uri":"file:///nope"}`))
			var rpcErr *RPCError
			if !errors.As(err, &rpcErr) {
				t.Fatalf("read of an unknown resource err = %v, want *RPCError", err)
			}
			if p.Sessions() != 1 {
				t.Errorf("Sessions() = %d after an upstream error, want the one session kept", p.Sessions())
			}
			if _, err := p.Relay(context.Background(), "k", target, "tools/call", nil); err == nil {
				t.Error("Relay(tools/call) err = nil, want a refusal: calls go through Call")
			}
		})
	}
}

// TestRelay_StripsHopMeta relays the caller's _meta without the keys of
// the hop (its progress token and protocol keys), and refuses params the
// method cannot hold without retiring the session.
func TestRelay_StripsHopMeta(t *testing.T) {
	var got *mcp.GetPromptParams
	send := sendAs(func(_ *mcp.ClientSession, _ context.Context, p *mcp.GetPromptParams) (any, error) {
		got = p
		return nil, nil
	})
	raw := `{"name":"greet","_meta":{"progressToken":"client-token","io.modelcontextprotocol/clientInfo":{"name":"x"},"trace":"t1"}}`
	if _, err := send(context.Background(), nil, json.RawMessage(raw)); err != nil {
		t.Fatal(err)
	}
	if got.Name != "greet" || len(got.Meta) != 1 || got.Meta["trace"] != "t1" {
		t.Errorf("relayed params = %+v, want the name and only the caller's own _meta key", got)
	}

	noLeaks(t)
	f := &fixture{}
	ts := f.serve(t)
	p := newPool(t, Options{})
	target := Target{URL: ts.URL}
	if _, err := p.Relay(context.Background(), "k", target, MethodPromptsGet, json.RawMessage(`{"name":"greet"}`)); err != nil {
		t.Fatalf("Relay() err = %v", err)
	}
	if _, err := p.Relay(context.Background(), "k", target, MethodPromptsGet, json.RawMessage(`{"name":42}`)); !errors.Is(err, errBadParams) {
		t.Errorf("Relay(bad params) err = %v, want errBadParams", err)
	}
	if p.Sessions() != 1 {
		t.Errorf("Sessions() = %d, want 1", p.Sessions())
	}
}

// TestRelay_FromSDKHandler relays from inside a go-sdk server's handler
// serving a 2026-07-28 client, to an upstream with sessions (2025-11-25):
// the session the relay opens must not take the calling client's protocol
// version from the handler's context (go-sdk's client reads the key its
// server sets), which that upstream refuses.
func TestRelay_FromSDKHandler(t *testing.T) {
	noLeaks(t)
	f := &fixture{}
	ts := f.serve(t)
	p := newPool(t, Options{})
	front := mcp.NewServer(&mcp.Implementation{Name: "front"}, nil)
	front.AddTool(&mcp.Tool{Name: "relay", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			raw, err := p.Relay(ctx, "k", Target{URL: ts.URL}, MethodPromptsList, nil)
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return front },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != newProtocolVersion {
		t.Fatalf("client speaks %s, want %s", v, newProtocolVersion)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "relay", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; res.IsError || !strings.Contains(text, `"greet"`) {
		t.Errorf("relay from a handler = %s (isError %t), want the upstream's prompts", text, res.IsError)
	}
	_ = p.Close()
	srv.CloseClientConnections()
}
