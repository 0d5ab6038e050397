package mcp_test

// Tests of the gateway with a clock the test controls: what the end-to-end
// tests in cmd/mcpgate cannot reach in reasonable time (expiry of
// confirmation tokens and request states).

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/mcp"
)

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
			Annotations: connectors.Annotations{Destructive: true}, DefaultEnabled: true, DefaultApproval: mcpgate.ApprovalModel},
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

// gwGateway is the fixture with the demo connector and a fake clock.
type gwGateway struct {
	*mcp.Fixture
	url   string
	clock *e2bsim.ManualClock
	conn  *gwConnector
}

func newGWGateway(t *testing.T) *gwGateway {
	t.Helper()
	tg := &gwGateway{clock: e2bsim.NewManualClock(time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)), conn: newGWConnector()}
	tg.Fixture = mcp.NewFixture(t, mcp.FixtureOptions{Registry: connectors.NewRegistry(tg.conn),
		Credential: "demo-credential", Now: tg.clock.Now})
	tg.url = tg.URL
	return tg
}

// connect opens a client session with a key; version "" is 2026-07-28.
func (tg *gwGateway) connect(t *testing.T, key, version string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	var so *sdk.ClientSessionOptions
	if version != "" {
		so = &sdk.ClientSessionOptions{ProtocolVersion: version}
	}
	// No standalone stream (listen_test.go tests it): with retries off, a
	// session fails when a stop ends that stream, and the call tests that
	// stop the gateway wait for their call's answer instead.
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "v0"}, opts).Connect(t.Context(),
		&sdk.StreamableClientTransport{Endpoint: tg.url + "/mcp", HTTPClient: &http.Client{Transport: mcp.BearerTransport{Key: key}},
			MaxRetries: -1, DisableStandaloneSSE: true}, so)
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
			key, _ := tg.AddKey(t, mcpgate.ScopeFull)
			cs := tg.connect(t, key, "2025-11-25", nil)
			first := gwCall(t, cs, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": "x1"}})
			out, _ := first.StructuredContent.(map[string]any)
			tok, _ := out["confirmation_token"].(string)
			if first.IsError || tok == "" {
				t.Fatalf("first call = %q, want a confirmation token", testutil.ToolText(first))
			}
			tg.clock.Advance(tt.wait)
			res := gwCall(t, cs, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": "x1", "confirmation_token": tok}})
			deleted := tg.conn.deletedIDs()
			if tt.wantErr {
				if !res.IsError || !strings.Contains(testutil.ToolText(res), "not valid") || len(deleted) != 0 {
					t.Fatalf("token after %v = %q (deleted %v), want refused and nothing deleted", tt.wait, testutil.ToolText(res), deleted)
				}
				return
			}
			if res.IsError || len(deleted) != 1 {
				t.Fatalf("token after %v = %q (deleted %v), want the call done", tt.wait, testutil.ToolText(res), deleted)
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
			key, _ := tg.AddKey(t, mcpgate.ScopeFull)
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
				t.Fatalf("answer after %v = %q (deleted %v), want refused: %v", tt.wait, testutil.ToolText(res), deleted, tt.wantErr)
			}
		})
	}
}
