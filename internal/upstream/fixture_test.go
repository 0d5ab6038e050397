package upstream

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// loopback is the policy every fixture test uses: httptest listens on
// 127.0.0.1 over plain http, which only a listed private network allows.
var loopback = Network{Private: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

// noLeaks fails the test when goroutines it started outlive it. Register it
// first, so it runs after every other cleanup.
func noLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

type echoIn struct {
	Text string `json:"text,omitempty"`
}

type sumOut struct {
	Sum int `json:"sum"`
}

type sumIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type waitIn struct {
	Steps  int `json:"steps"`
	EveryM int `json:"every_ms"`
}

// pngPixel is a 1x1 PNG.
var pngPixel, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")

// fixture is a go-sdk MCP server (no code of ours behind the handler)
// with tools of every annotation kind and result kind, prompts, resources
// and a template, plus counters the tests read.
type fixture struct {
	calls        atomic.Int64 // tools/call of "count"
	mu           sync.Mutex
	headers      []http.Header // every request's headers, as received
	inits        atomic.Int64  // sessions initialized (notifications/initialized)
	handler      atomic.Pointer[http.Handler]
	stateless    bool
	jsonResponse bool
}

func (f *fixture) mcpServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "fixture", Version: "v1"}, &mcp.ServerOptions{PageSize: 3, Instructions: "fixture",
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) { f.inits.Add(1) }})
	f.addTools(s)
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "say hello"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "file:///readme", Name: "readme", MIMEType: "text/plain"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "file:///readme", Text: "hi"}}}, nil
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "file:///docs/{name}", Name: "doc"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return nil, nil
	})
	return s
}

func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

func (f *fixture) addTools(s *mcp.Server) {
	no := jsonschema.Ptr(false)
	mcp.AddTool(s, &mcp.Tool{Name: "bare", Description: "no annotations"}, func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: text("bare")}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "read", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: no}}, func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: text("read")}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "delete", Annotations: &mcp.ToolAnnotations{DestructiveHint: jsonschema.Ptr(true), IdempotentHint: true}}, func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: text("deleted")}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "write", Annotations: &mcp.ToolAnnotations{DestructiveHint: no}}, func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: text("written")}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "sum", Description: "structured"}, func(_ context.Context, _ *mcp.CallToolRequest, in sumIn) (*mcp.CallToolResult, sumOut, error) {
		return nil, sumOut{Sum: in.A + in.B}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "media"}, func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "see"},
			&mcp.ImageContent{Data: pngPixel, MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///readme", MIMEType: "text/plain", Text: "hi"}},
			&mcp.ResourceLink{URI: "file:///docs/a", Name: "a"},
		}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail"}, func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: text("it broke"), IsError: true}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: text(strings.Repeat("x", 256<<10))}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "count"}, func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
		f.calls.Add(1)
		return &mcp.CallToolResult{Content: text("counted")}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "meta"}, func(_ context.Context, req *mcp.CallToolRequest, _ echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: text("meta"), Meta: mcp.Meta{"seen": req.Params.Meta}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "wait"}, func(ctx context.Context, req *mcp.CallToolRequest, in waitIn) (*mcp.CallToolResult, any, error) {
		for i := range in.Steps {
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(time.Duration(in.EveryM) * time.Millisecond):
			}
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i + 1), Total: float64(in.Steps)})
			}
		}
		return &mcp.CallToolResult{Content: text("waited")}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "silent"}, func(ctx context.Context, _ *mcp.CallToolRequest, in waitIn) (*mcp.CallToolResult, any, error) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(in.EveryM) * time.Millisecond):
		}
		return &mcp.CallToolResult{Content: text("late")}, nil, nil
	})
}

// serve starts the fixture behind go-sdk's streamable handler, recording
// the headers of every request; reset swaps in a new handler, which knows
// none of the old sessions (a restarted upstream).
func (f *fixture) serve(t *testing.T) *httptest.Server {
	f.reset()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.headers = append(f.headers, r.Header.Clone())
		f.mu.Unlock()
		(*f.handler.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (f *fixture) reset() {
	s := f.mcpServer()
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: f.stateless, JSONResponse: f.jsonResponse})
	f.handler.Store(&h)
}

func (f *fixture) received() []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]http.Header(nil), f.headers...)
}

func newPool(t *testing.T, opts Options) *Pool[string] {
	t.Helper()
	if opts.Network.Private == nil {
		opts.Network = loopback
	}
	p := New[string](opts)
	t.Cleanup(func() { _ = p.Close() })
	return p
}
