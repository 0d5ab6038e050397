package main

// End to end: a tools list change made on one replica reaches the clients
// holding a stream on the other as notifications/tools/list_changed, on
// both protocol generations, and only the clients of the workspace that
// changed.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMCPEndToEnd_PushedListChanges(t *testing.T) {
	f := newMCPFixture(t)
	e := f.e
	// Each generation turns a tool of its own off, so that nothing the
	// other did is still on its way.
	for version, tool := range map[string]string{"2025-11-25": toolList, "2026-07-28": "e2b_list_templates"} {
		t.Run(version, func(t *testing.T) {
			listen := func(key string) (*mcp.ClientSession, chan struct{}) {
				changed := make(chan struct{}, 8)
				cs := e.session(t, f.r1.url+"/mcp", e2eBearer(key), version, &mcp.ClientOptions{
					ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
				return cs, changed
			}
			csA, changedA := listen(f.alice.with(t).createKey(f.wsA, "push "+version, "full", nil).Key)
			csB, changedB := listen(f.bob.with(t).createKey(f.wsB, "push "+version, "full", nil).Key)
			wait := func(who string, changed <-chan struct{}) {
				t.Helper()
				select {
				case <-changed:
				case <-time.After(appliedWait):
					t.Fatalf("%s got no notifications/tools/list_changed", who)
				}
			}

			// Bob's admin, on replica 2, turns a tool of his workspace off:
			// his client on replica 1 hears it.
			bob2 := f.bob.with(t)
			bob2.base = f.r2.url
			bob2.setTool(f.wsB, tool, map[string]any{"enabled": false})
			wait("bob", changedB)
			if names := e2eToolNames(t, csB); slices.Contains(names, tool) {
				t.Fatalf("bob's tools after the notification = %v", names)
			}

			// Alice's change is the only one her client hears: bob's, made
			// first, would have come before it on the same stream.
			alice2 := f.alice.with(t)
			alice2.base = f.r2.url
			alice2.setTool(f.wsA, tool, map[string]any{"enabled": false})
			changedAt := time.Now()
			wait("alice", changedA)
			// Measured, not asserted: the debounce (250 ms) is most of it.
			t.Logf("notification %v after the change's answer on the other replica", time.Since(changedAt).Round(time.Millisecond))
			if names := e2eToolNames(t, csA); slices.Contains(names, tool) {
				t.Fatalf("alice's tools after the notification = %v", names)
			}
			select {
			case <-changedA:
				t.Error("alice's client heard another workspace's change")
			default:
			}
		})
	}
}
