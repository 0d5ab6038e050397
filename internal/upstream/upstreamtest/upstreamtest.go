// Package upstreamtest runs a real go-sdk MCP server over real HTTP on
// loopback, for the tests of the packages that add upstream servers: its
// tools can be redefined between discoveries (a server that changes a tool
// after it was trusted), and it records the headers it received. No code
// of the gateway's runs behind its handler. It is imported by tests only.
//
// Everything runs the official reference server the same way for every
// package that tests against it.
//
// Imports from this module: internal/testutil/npmtest.
package upstreamtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is an MCP server on 127.0.0.1 (plain http: reach it through a
// Network whose Private lists 127.0.0.0/8).
type Server struct {
	URL     string
	current atomic.Pointer[mcp.Server]
	mu      sync.Mutex
	headers []http.Header
}

// New starts a server listing tools and closes it in tb's Cleanup.
func New(tb testing.TB, tools ...*mcp.Tool) *Server {
	tb.Helper()
	s := &Server{}
	s.SetTools(tools...)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.current.Load() }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	tb.Cleanup(ts.Close)
	s.URL = ts.URL + "/mcp"
	return s
}

// SetTools replaces what the server lists, for the sessions opened from
// now on. Each tool answers its own name as text.
func (s *Server) SetTools(tools ...*mcp.Tool) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "upstreamtest", Version: "v1.2.3"}, nil)
	for _, t := range tools {
		t := *t
		if t.InputSchema == nil {
			t.InputSchema = map[string]any{"type": "object"}
		}
		name := t.Name
		srv.AddTool(&t, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
		})
	}
	s.current.Store(srv)
}

// Received returns the headers of every request so far.
func (s *Server) Received() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

// Bool returns a pointer to v, for the annotations' optional hints.
func Bool(v bool) *bool { return &v }
