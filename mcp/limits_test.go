package mcp_test

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/mcp"
)

// TestRateLimited_AuditedInAggregate: calls a rate limit refuses never
// reach the audited path, so they leave one aggregate audit entry per
// credential and limit ("refused N calls between T1 and T2"), never a row
// per refused call; the entry names the key, so an admin can see who.
func TestRateLimited_AuditedInAggregate(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo_list","arguments":{}}}`
	f := mcp.NewFixture(t, mcp.FixtureOptions{Registry: connectors.NewRegistry(newGWConnector()), Credential: "demo-credential",
		KeyRate: 0.001, KeyBurst: 1})
	noisy, noisyID := f.AddKey(t, mcpgate.ScopeFull)
	quiet, quietID := f.AddKey(t, mcpgate.ScopeFull)
	refused := map[string]int{}
	for i := range 8 {
		key, id := noisy, noisyID
		if i%4 == 3 {
			key, id = quiet, quietID
		}
		if _, _, body := postMCP(t, f.URL, key, call, nil); strings.Contains(body, "too many tool calls") {
			refused[id]++
		}
	}
	if refused[noisyID] != 5 || refused[quietID] != 1 {
		t.Fatalf("refused calls per key = %v, want 5 of the noisy key's 6 and 1 of the quiet key's 2", refused)
	}
	f.Gateway.Close() // writes the open aggregates, as at a stop
	var rows []mcpgate.AuditEvent
	for _, ev := range f.Audit.Events() {
		if ev.Kind == mcpgate.KindRefused {
			rows = append(rows, ev)
		}
	}
	if len(rows) != 2 {
		t.Fatalf("%d refused-call audit rows, want 2 (one per key): %+v", len(rows), rows)
	}
	for _, ev := range rows {
		want := refused[ev.KeyID]
		if ev.Arguments["refused_calls"] != want || ev.Arguments["limit"] != "key" || ev.Action != "rate_limit" ||
			ev.Outcome != mcpgate.OutcomeDenied || ev.WorkspaceID != f.Workspace || ev.ActorID != f.UserID ||
			!strings.Contains(ev.Message, "tool calls refused by the per-key rate limit between") {
			t.Errorf("aggregate row = %+v, want %d refused calls of key %s", ev, want, ev.KeyID)
		}
	}
}
