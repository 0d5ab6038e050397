package mcp_test

// Tests of the gateway with a clock the test controls and a fake backend:
// what the end-to-end tests in cmd/mcpgate cannot reach in reasonable time
// (expiry of confirmation tokens and request states) or cannot make happen
// on purpose (a cache load racing an invalidation).

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/mcp"
)

const gwWorkspace = "ws-1"

// gwClock is a clock that moves only when told.
type gwClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *gwClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *gwClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// gwBackend keeps keys, policies and spent tokens in memory. The Fn
// fields, when set, replace a method.
type gwBackend struct {
	mu       sync.Mutex
	keys     map[string]mcpgate.APIKey
	hashes   map[string][]byte
	policies map[string]mcpgate.ToolPolicy
	spent    map[string]bool
	// credential is what OpenCredential returns.
	credential mcpgate.Secret

	FindKeyForAuthFn func(ctx context.Context, id string) (*mcpgate.APIKey, []byte, error)
	ToolPoliciesFn   func(ctx context.Context, workspaceID string) (map[string]mcpgate.ToolPolicy, error)
}

func newGWBackend() *gwBackend {
	return &gwBackend{keys: map[string]mcpgate.APIKey{}, hashes: map[string][]byte{},
		policies: map[string]mcpgate.ToolPolicy{}, spent: map[string]bool{}, credential: "demo-credential"}
}

// addKey creates a full-scope key of gwWorkspace and returns it.
func (b *gwBackend) addKey() (key, id string) {
	key, id, hash := mcpgate.NewMCPKey()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keys[id] = mcpgate.APIKey{ID: id, WorkspaceID: gwWorkspace, UserID: "user-1", Name: "test", Scope: mcpgate.ScopeFull}
	b.hashes[id] = hash
	return key, id
}

func (b *gwBackend) revoke(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.keys[id]
	now := time.Now()
	k.RevokedAt = &now
	b.keys[id] = k
}

func (b *gwBackend) findKey(id string) (*mcpgate.APIKey, []byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k, ok := b.keys[id]
	if !ok {
		return nil, nil, mcpgate.Errorf(mcpgate.ENotFound, "key not found")
	}
	return &k, b.hashes[id], nil
}

func (b *gwBackend) policySnapshot() map[string]mcpgate.ToolPolicy {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]mcpgate.ToolPolicy{}
	for k, v := range b.policies {
		out[k] = v
	}
	return out
}

func (b *gwBackend) FindKeyForAuth(ctx context.Context, id string) (*mcpgate.APIKey, []byte, error) {
	if b.FindKeyForAuthFn != nil {
		return b.FindKeyForAuthFn(ctx, id)
	}
	return b.findKey(id)
}

func (b *gwBackend) TouchKeys(context.Context, map[string]time.Time) error { return nil }

func (b *gwBackend) ToolPolicies(ctx context.Context, workspaceID string) (map[string]mcpgate.ToolPolicy, error) {
	if b.ToolPoliciesFn != nil {
		return b.ToolPoliciesFn(ctx, workspaceID)
	}
	return b.policySnapshot(), nil
}

func (b *gwBackend) SetToolPolicy(_ context.Context, _, _ string, p mcpgate.ToolPolicy) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.policies[p.Tool] = p
	return nil
}

func (b *gwBackend) OpenCredential(context.Context, string, string) (mcpgate.Secret, error) {
	return b.credential, nil
}

func (b *gwBackend) PutConnection(context.Context, *mcpgate.Connection, mcpgate.Secret) error {
	return nil
}

func (b *gwBackend) FindConnection(context.Context, string, string) (*mcpgate.Connection, error) {
	return &mcpgate.Connection{}, nil
}

func (b *gwBackend) DeleteConnection(context.Context, string, string) error { return nil }

func (b *gwBackend) MarkAuthFailure(context.Context, string, string) error { return nil }

func (b *gwBackend) SpendToken(_ context.Context, id string, _ time.Time) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spent[id] {
		return false, nil
	}
	b.spent[id] = true
	return true, nil
}

// gwConnector has a read-only tool and a destructive one that needs
// confirmation; it records what it deleted.
type gwConnector struct {
	tools   []*connectors.Tool
	mu      sync.Mutex
	deleted []string
}

type gwDeleteIn struct {
	ID string `json:"id" jsonschema:"what to delete"`
}

func newGWConnector() *gwConnector {
	c := &gwConnector{}
	c.tools = []*connectors.Tool{
		connectors.NewTool(connectors.Spec{Name: "demo_list", Title: "List things", Description: "Lists things.",
			Annotations: connectors.Annotations{ReadOnly: true, Idempotent: true}, DefaultEnabled: true},
			func(context.Context, mcpgate.Secret, struct{}) (map[string]any, error) {
				return map[string]any{"items": []string{"a", "b"}}, nil
			}),
		connectors.NewTool(connectors.Spec{Name: "demo_delete", Title: "Delete a thing", Description: "Deletes a thing.",
			Annotations: connectors.Annotations{Destructive: true}, DefaultEnabled: true, DefaultNeedsConfirmation: true},
			func(_ context.Context, _ mcpgate.Secret, in gwDeleteIn) (map[string]any, error) {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.deleted = append(c.deleted, in.ID)
				return map[string]any{"deleted": in.ID}, nil
			}),
	}
	return c
}

func (c *gwConnector) Name() string                                          { return "demo" }
func (c *gwConnector) CheckCredential(context.Context, mcpgate.Secret) error { return nil }
func (c *gwConnector) CredentialHint(mcpgate.Secret) string                  { return "demo_…" }
func (c *gwConnector) Tools() []*connectors.Tool                             { return c.tools }

func (c *gwConnector) deletedIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.deleted...)
}

// gwGateway is a gateway served over HTTP with a fake clock and backend.
type gwGateway struct {
	*mcp.Gateway
	url     string
	clock   *gwClock
	backend *gwBackend
	conn    *gwConnector
}

func newGWGateway(t *testing.T) *gwGateway {
	t.Helper()
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	tg := &gwGateway{clock: &gwClock{t: time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)},
		backend: newGWBackend(), conn: newGWConnector()}
	tg.Gateway = mcp.New(mcp.Options{Registry: connectors.NewRegistry(tg.conn), Backend: tg.backend,
		PublicURL: "http://gateway.test", ConfirmationSecret: secret, Now: tg.clock.Now})
	t.Cleanup(tg.Close)
	srv := httptest.NewServer(tg.Handler())
	t.Cleanup(srv.Close)
	tg.url = srv.URL
	return tg
}

// gwBearer sends a key as a bearer token through base (by default
// http.DefaultTransport).
type gwBearer struct {
	key  string
	base http.RoundTripper
}

func (b gwBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	if b.base == nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	return b.base.RoundTrip(r)
}

// connect opens a client session with a key; version "" is 2026-07-28.
func (tg *gwGateway) connect(t *testing.T, key, version string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	var so *sdk.ClientSessionOptions
	if version != "" {
		so = &sdk.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "v0"}, opts).Connect(t.Context(),
		&sdk.StreamableClientTransport{Endpoint: tg.url + "/mcp", HTTPClient: &http.Client{Transport: gwBearer{key: key}}, MaxRetries: -1}, so)
	if err != nil {
		t.Fatalf("Connect() err = %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func gwCall(t *testing.T, cs *sdk.ClientSession, p *sdk.CallToolParams) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), p)
	if err != nil {
		t.Fatalf("CallTool(%s) err = %v", p.Name, err)
	}
	return res
}

func gwText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestConfirmationToken_Expiry: a two-step confirmation token works until
// five minutes after it was issued, and not from then on.
func TestConfirmationToken_Expiry(t *testing.T) {
	tests := []struct {
		name    string
		wait    time.Duration
		wantErr bool
	}{
		{name: "just before expiry", wait: 5*time.Minute - time.Second},
		{name: "at expiry", wait: 5 * time.Minute, wantErr: true},
		{name: "long after", wait: time.Hour, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := newGWGateway(t)
			key, _ := tg.backend.addKey()
			cs := tg.connect(t, key, "2025-11-25", nil)
			first := gwCall(t, cs, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": "x1"}})
			out, _ := first.StructuredContent.(map[string]any)
			tok, _ := out["confirmation_token"].(string)
			if first.IsError || tok == "" {
				t.Fatalf("first call = %q, want a confirmation token", gwText(first))
			}
			tg.clock.Advance(tt.wait)
			res := gwCall(t, cs, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": "x1", "confirmation_token": tok}})
			deleted := tg.conn.deletedIDs()
			if tt.wantErr {
				if !res.IsError || !strings.Contains(gwText(res), "not valid") || len(deleted) != 0 {
					t.Fatalf("token after %v = %q (deleted %v), want refused and nothing deleted", tt.wait, gwText(res), deleted)
				}
				return
			}
			if res.IsError || len(deleted) != 1 {
				t.Fatalf("token after %v = %q (deleted %v), want the call done", tt.wait, gwText(res), deleted)
			}
		})
	}
}

// TestRequestState_Expiry: the request state of an input request
// (2026-07-28) expires like a token.
func TestRequestState_Expiry(t *testing.T) {
	for _, tt := range []struct {
		name    string
		wait    time.Duration
		wantErr bool
	}{
		{name: "in time", wait: time.Minute},
		{name: "expired", wait: 5*time.Minute + time.Second, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tg := newGWGateway(t)
			key, _ := tg.backend.addKey()
			cs := tg.connect(t, key, "", &sdk.ClientOptions{
				MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true},
				ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
					return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
				}})
			first := gwCall(t, cs, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": "x1"}})
			if first.RequestState == "" || first.InputRequests["confirm"] == nil {
				t.Fatalf("first call = %+v, want an input request", first)
			}
			tg.clock.Advance(tt.wait)
			res := gwCall(t, cs, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": "x1"},
				RequestState:   first.RequestState,
				InputResponses: sdk.InputResponseMap{"confirm": &sdk.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}})
			deleted := tg.conn.deletedIDs()
			if tt.wantErr != res.IsError || tt.wantErr != (len(deleted) == 0) {
				t.Fatalf("answer after %v = %q (deleted %v), want refused: %v", tt.wait, gwText(res), deleted, tt.wantErr)
			}
		})
	}
}

// TestInvalidate_DuringLoad: a key or policy read from the database just
// before a change commits, and cached just after the change's notification
// was handled, must not stay cached: the change would be ignored on this
// replica until the cache TTL (30 s) ran out.
func TestInvalidate_DuringLoad(t *testing.T) {
	t.Run("revoked key", func(t *testing.T) {
		tg := newGWGateway(t)
		key, id := tg.backend.addKey()
		started, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		tg.backend.FindKeyForAuthFn = func(ctx context.Context, id string) (*mcpgate.APIKey, []byte, error) {
			k, hash, err := tg.backend.findKey(id) // read before the revocation commits
			once.Do(func() {
				close(started)
				<-release
			})
			return k, hash, err
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			cs := tg.connect(t, key, "", nil)
			_, _ = cs.ListTools(context.Background(), nil)
		}()
		<-started
		tg.backend.revoke(id)
		tg.Invalidate("keys", gwWorkspace) // the NOTIFY of the revocation
		close(release)
		<-done

		resp := gwPostInitialize(t, tg.url, key)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("revoked key after its invalidation = %d, want 401", resp.StatusCode)
		}
	})
	t.Run("disabled tool", func(t *testing.T) {
		tg := newGWGateway(t)
		started, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		tg.backend.ToolPoliciesFn = func(ctx context.Context, ws string) (map[string]mcpgate.ToolPolicy, error) {
			p := tg.backend.policySnapshot() // read before the change commits
			once.Do(func() {
				close(started)
				<-release
			})
			return p, nil
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = tg.Tools(context.Background(), gwWorkspace)
		}()
		<-started
		_ = tg.backend.SetToolPolicy(context.Background(), gwWorkspace, "", mcpgate.ToolPolicy{Tool: "demo_list", Enabled: false})
		tg.Invalidate("policy", gwWorkspace) // the NOTIFY of the change
		close(release)
		<-done

		tools, err := tg.Tools(context.Background(), gwWorkspace)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range tools {
			if tl.Name == "demo_list" && tl.Enabled {
				t.Fatalf("demo_list after its disabling was notified = enabled, want disabled")
			}
		}
	})
}

func gwPostInitialize(t *testing.T, url, key string) *http.Response {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"v0"}}}`
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp
}

// saturatedAudit is an audit log that cannot take events.
type saturatedAudit struct{ recorded int }

func (a *saturatedAudit) Record(context.Context, mcpgate.AuditEvent) { a.recorded++ }
func (a *saturatedAudit) Saturated() bool                            { return true }

// A call that cannot be audited must not run: the gateway fails closed.
func TestCall_RefusedWhenAuditSaturated(t *testing.T) {
	conn := newGWConnector()
	b := newGWBackend()
	g := mcp.New(mcp.Options{Registry: connectors.NewRegistry(conn), Backend: b, Audit: &saturatedAudit{},
		PublicURL: "http://gateway.test", ConfirmationSecret: make([]byte, 32)})
	t.Cleanup(g.Close)
	_, err := g.Call(context.Background(), mcp.Call{WorkspaceID: gwWorkspace, UserID: "u", Tool: "demo_delete",
		Arguments: []byte(`{"id":"x"}`), Source: "dashboard", Confirmed: true})
	if mcpgate.ErrorCode(err) != mcpgate.EUnavailable {
		t.Fatalf("Call() err = %v, want unavailable", err)
	}
	if got := conn.deletedIDs(); len(got) != 0 {
		t.Fatalf("the tool ran (deleted %v) although the call could not be audited", got)
	}
}
