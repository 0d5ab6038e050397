package mcp

// Benchmarks of the hot path of one MCP tool call, piece by piece: key
// lookup (authenticate, cached), policy check, dispatch through Call, and
// the whole tools/call round trip through the SDK over loopback HTTP. The
// backend and the tool are in-memory fakes, so these measure the gateway's
// own cost; `make bench` measures it end to end. Seal/open: vault's
// BenchmarkSeal and BenchmarkOpen.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// benchBackend serves one key, one workspace and one credential from memory.
type benchBackend struct {
	key  mcpgate.APIKey
	hash []byte
}

func (b *benchBackend) FindKeyForAuth(_ context.Context, id string) (*mcpgate.APIKey, []byte, error) {
	if id != b.key.ID {
		return nil, nil, mcpgate.Errorf(mcpgate.ENotFound, "key not found")
	}
	k := b.key
	return &k, b.hash, nil
}
func (b *benchBackend) TouchKeys(context.Context, map[string]time.Time) error { return nil }
func (b *benchBackend) ToolPolicies(context.Context, string) (map[string]mcpgate.ToolPolicy, error) {
	return nil, nil
}
func (b *benchBackend) SetToolPolicy(context.Context, string, string, mcpgate.ToolPolicy) error {
	return nil
}
func (b *benchBackend) OpenCredential(context.Context, string, string) (mcpgate.Secret, error) {
	return "e2b_0123456789abcdef", nil
}
func (b *benchBackend) PutConnection(context.Context, *mcpgate.Connection, mcpgate.Secret) error {
	return nil
}
func (b *benchBackend) FindConnection(context.Context, string, string) (*mcpgate.Connection, error) {
	return nil, mcpgate.Errorf(mcpgate.ENotFound, "not found")
}
func (b *benchBackend) DeleteConnection(context.Context, string, string) error { return nil }
func (b *benchBackend) MarkAuthFailure(context.Context, string, string) error  { return nil }
func (b *benchBackend) SpendToken(context.Context, string, time.Time) (bool, error) {
	return true, nil
}

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

func newBenchGateway(b *testing.B) (*Gateway, string, *benchBackend) {
	b.Helper()
	tool := connectors.NewTool(connectors.Spec{Name: "bench_get_sandbox", Title: "Get sandbox", Description: "bench",
		Annotations: connectors.Annotations{ReadOnly: true, Idempotent: true, OpenWorld: true}, DefaultEnabled: true},
		func(_ context.Context, _ mcpgate.Secret, in benchIn) (benchOut, error) {
			now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
			return benchOut{SandboxID: in.SandboxID, TemplateID: "base", State: "running", CPUCount: 2, MemoryMB: 512,
				StartedAt: now, EndAt: now.Add(time.Hour), Metadata: map[string]string{"app": "bench"}}, nil
		})
	key, id, hash := mcpgate.NewMCPKey()
	be := &benchBackend{key: mcpgate.APIKey{ID: id, WorkspaceID: "ws-bench", UserID: "user-bench", Scope: mcpgate.ScopeFull}, hash: hash}
	g := New(Options{
		Registry: connectors.NewRegistry(&benchConnector{tools: []*connectors.Tool{tool}}),
		Backend:  be, Audit: discardAudit{}, PublicURL: "http://gateway.test", Version: "bench",
		ConfirmationSecret: []byte("0123456789abcdef0123456789abcdef"),
		KeyRate:            rate.Inf, KeyBurst: 1,
	})
	b.Cleanup(g.Close)
	return g, key, be
}

// BenchmarkAuthenticate is the key lookup of every MCP request, with the key
// cached (the steady state): parse, SHA-256, constant-time compare.
func BenchmarkAuthenticate(b *testing.B) {
	g, key, _ := newBenchGateway(b)
	ctx := context.Background()
	if id, _, err := g.authenticate(ctx, key); err != nil || id == nil {
		b.Fatalf("authenticate() = %v, %v", id, err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if id, _, _ := g.authenticate(ctx, key); id == nil {
				b.Fatal("key refused")
			}
		}
	})
}

// BenchmarkAuthenticateMiss is the same lookup when the cache has just been
// invalidated (a fake backend: the database round trip is not included).
func BenchmarkAuthenticateMiss(b *testing.B) {
	g, key, _ := newBenchGateway(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		g.Invalidate("keys", "ws-bench")
		if id, _, _ := g.authenticate(ctx, key); id == nil {
			b.Fatal("key refused")
		}
	}
}

// BenchmarkPolicyCheck is the per-call policy decision: the workspace's
// cached policy, then whether the tool is visible to the key's scope.
func BenchmarkPolicyCheck(b *testing.B) {
	g, _, _ := newBenchGateway(b)
	ctx := context.Background()
	t, _ := g.opts.Registry.Tool("bench_get_sandbox")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			wt, err := g.workspace(ctx, "ws-bench")
			if err != nil {
				b.Fatal(err)
			}
			p := wt.policy[t.Name]
			if !visible(t, p, mcpgate.ScopeFull) || p.NeedsConfirmation {
				b.Fatal("tool not callable")
			}
		}
	})
}

// BenchmarkCall is tool dispatch without MCP: policy, argument decoding and
// validation, credential, the tool, audit, metrics and output encoding.
func BenchmarkCall(b *testing.B) {
	g, _, _ := newBenchGateway(b)
	ctx := context.Background()
	args := json.RawMessage(`{"sandbox_id":"i0123456789abcdefghij"}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Call(ctx, Call{WorkspaceID: "ws-bench", UserID: "user-bench", Tool: "bench_get_sandbox",
				Arguments: args, Source: "mcp", Confirmed: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkToolsCallHTTP is one whole tools/call through the gateway's
// handler on loopback HTTP, from a go-sdk client (protocol 2026-07-28,
// stateless). It includes the client's own cost, which is of the same order.
func BenchmarkToolsCallHTTP(b *testing.B) {
	g, key, _ := newBenchGateway(b)
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: benchBearer{key, tr}},
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

type benchBearer struct {
	key  string
	base http.RoundTripper
}

func (b benchBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}
