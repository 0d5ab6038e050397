package mcp

// Benchmarks of the hot path of one MCP tool call, piece by piece: key
// lookup (authenticate, cached), policy check, dispatch through the tool
// service, and the whole tools/call round trip through the SDK over loopback
// HTTP. The services run on the test database but the tool does no I/O, so
// these measure the gateway's own cost; `make bench` measures it end to end. Seal/open: vault's
// BenchmarkSeal and BenchmarkOpen.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

type discardAudit struct{}

func (discardAudit) Record(context.Context, mcpgate.AuditEvent) {}
func (discardAudit) Saturated() bool                            { return false }

// benchConnector has one read-only tool that answers a sandbox-sized object
// without any I/O.
type benchConnector struct{ tools []*connectors.Tool }

func (c *benchConnector) Name() string                                          { return "bench" }
func (c *benchConnector) CheckCredential(context.Context, mcpgate.Secret) error { return nil }
func (c *benchConnector) CredentialHint(mcpgate.Secret) string                  { return "…" }
func (c *benchConnector) Tools() []*connectors.Tool                             { return c.tools }

type benchIn struct {
	SandboxID string `json:"sandbox_id"`
	Limit     int    `json:"limit,omitempty"`
}

type benchOut struct {
	SandboxID  string            `json:"sandbox_id"`
	TemplateID string            `json:"template_id"`
	State      string            `json:"state"`
	CPUCount   int               `json:"cpu_count"`
	MemoryMB   int               `json:"memory_mb"`
	StartedAt  time.Time         `json:"started_at"`
	EndAt      time.Time         `json:"end_at"`
	Metadata   map[string]string `json:"metadata"`
}

func newBenchGateway(b *testing.B) (*Fixture, string) {
	b.Helper()
	tool := connectors.NewTool(connectors.Spec{Name: "bench_get_sandbox", Title: "Get sandbox", Description: "bench",
		Annotations: connectors.Annotations{ReadOnly: true, Idempotent: true, OpenWorld: true}, DefaultEnabled: true},
		func(_ context.Context, _ mcpgate.Secret, in benchIn) (benchOut, error) {
			now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
			return benchOut{SandboxID: in.SandboxID, TemplateID: "base", State: "running", CPUCount: 2, MemoryMB: 512,
				StartedAt: now, EndAt: now.Add(time.Hour), Metadata: map[string]string{"app": "bench"}}, nil
		})
	fx := NewFixture(b, FixtureOptions{Registry: connectors.NewRegistry(&benchConnector{tools: []*connectors.Tool{tool}}),
		Credential: "e2b_0123456789abcdef", Audit: discardAudit{}, KeyRate: rate.Inf, KeyBurst: 1})
	key, _ := fx.AddKey(b, mcpgate.ScopeFull)
	return fx, key
}

// BenchmarkAuthenticate is the key lookup of every MCP request, with the key
// cached (the steady state): read from the request, parse, SHA-256,
// constant-time compare.
func BenchmarkAuthenticate(b *testing.B) {
	fx, key := newBenchGateway(b)
	r := KeyRequest(key)
	if a, _, err := fx.Gateway.authenticate(r); err != nil || a == nil {
		b.Fatalf("authenticate() = %v, %v", a, err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if a, _, _ := fx.Gateway.authenticate(r); a == nil {
				b.Fatal("key refused")
			}
		}
	})
}

// BenchmarkAuthenticateMiss is the same lookup when the cache has just been
// invalidated: one query of the test database.
func BenchmarkAuthenticateMiss(b *testing.B) {
	fx, key := newBenchGateway(b)
	r := KeyRequest(key)
	b.ReportAllocs()
	for b.Loop() {
		fx.Keys.Invalidate("keys", fx.Workspace)
		if a, _, _ := fx.Gateway.authenticate(r); a == nil {
			b.Fatal("key refused")
		}
	}
}

// BenchmarkPolicyCheck is the per-call policy decision: the workspace's
// cached tool set for the key's scope.
func BenchmarkPolicyCheck(b *testing.B) {
	fx, key := newBenchGateway(b)
	a, _, _ := fx.Gateway.authenticate(KeyRequest(key))
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			set, err := fx.Service.Tools.ToolSet(ctx, a)
			if err != nil || len(set.Tools) != 1 || set.Tools[0].Approval != mcpgate.ApprovalNone {
				b.Fatal("tool not callable", err)
			}
		}
	})
}

// BenchmarkCall is tool dispatch without MCP: policy, argument decoding and
// validation, credential, the tool, audit, metrics and output encoding.
func BenchmarkCall(b *testing.B) {
	fx, key := newBenchGateway(b)
	a, _, _ := fx.Gateway.authenticate(KeyRequest(key))
	ctx := context.Background()
	call := mcpgate.ToolCall{Tool: "bench_get_sandbox", Arguments: json.RawMessage(`{"sandbox_id":"i0123456789abcdefghij"}`)}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := fx.Service.Tools.CallTool(ctx, a, call); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkToolsCallHTTP is one whole tools/call through the gateway's
// handler on loopback HTTP, from a go-sdk client (protocol 2026-07-28,
// stateless). It includes the client's own cost, which is of the same order.
func BenchmarkToolsCallHTTP(b *testing.B) {
	fx, key := newBenchGateway(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: fx.URL + "/mcp", HTTPClient: &http.Client{Transport: BearerTransport{Key: key, Base: tr}},
			MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &sdk.CallToolParams{Name: "bench_get_sandbox", Arguments: map[string]any{"sandbox_id": "i0123456789abcdefghij"}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := cs.CallTool(ctx, params)
			if err != nil || res.IsError {
				b.Fatalf("CallTool() = %v, %v", res, err)
			}
		}
	})
}

// benchWriter is a ResponseWriter that keeps only the status and size, so
// that the raw benchmarks count the gateway's allocations and not a
// recorder's.
type benchWriter struct {
	h      http.Header
	status int
	n      int
	body   []byte
}

func (w *benchWriter) Header() http.Header { return w.h }
func (w *benchWriter) WriteHeader(s int)   { w.status = s }
func (w *benchWriter) Flush()              {}
func (w *benchWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(b)
	if len(w.body) < 512 {
		w.body = append(w.body, b[:min(len(b), 512)]...)
	}
	return len(b), nil
}

// BenchmarkToolsCallRaw is one whole tools/call through the gateway's
// handler, called in process with a prepared request and no client at all:
// authentication, parsing, policy, the call, audit, metrics and the answer.
// "fast" is the fast path, "sdk" the same gateway through go-sdk only; the
// two B/op and ns/op figures are the ratio to read (absolute ones are noise
// on a shared machine).
func BenchmarkToolsCallRaw(b *testing.B) {
	fx, key := newBenchGateway(b)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bench_get_sandbox","arguments":{"sandbox_id":"i0123456789abcdefghij"}}}`)
	for _, mode := range []struct {
		name string
		fast bool
	}{{"fast", true}, {"sdk", false}} {
		b.Run(mode.name, func(b *testing.B) {
			h := fx.Gateway.handler(mode.fast)
			served := fx.Gateway.fastServed.n.Load()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &benchWriter{h: http.Header{}}
				for pb.Next() {
					r, _ := http.NewRequest(http.MethodPost, "http://gateway.test/mcp", bytes.NewReader(body))
					r.Header = http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"},
						"Accept": {"application/json, text/event-stream"}, "Mcp-Protocol-Version": {"2025-11-25"}}
					clear(w.h)
					w.status, w.n, w.body = 0, 0, w.body[:0]
					h.ServeHTTP(w, r)
					if w.status != http.StatusOK || !bytes.Contains(w.body, []byte(`"structuredContent"`)) {
						b.Fatalf("tools/call answered %d %s", w.status, w.body)
					}
				}
			})
			if fast := fx.Gateway.fastServed.n.Load() > served; fast != mode.fast {
				b.Fatalf("fast path used = %v, want %v", fast, mode.fast)
			}
		})
	}
}
