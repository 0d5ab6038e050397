package main

// End-to-end tests across the two replicas: a change on one (policy, a
// revoked key, a removed member) is served by the other once it has heard
// of it, and the per-key rate limit is shared out between them.

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestMCPEndToEnd_Replicas(t *testing.T) {
	f := newMCPFixture(t)
	e, r1, r2, alice, carol, wsA, keyA, keyC := f.e, f.r1, f.r2, f.alice, f.carol, f.wsA, f.keyA, f.keyC

	t.Run("Replicas", func(t *testing.T) {
		alice := alice.with(t)
		k := alice.createKey(wsA, "replicated", "full", nil) // on replica 1
		cs2 := e.session(t, r2.url+"/mcp", e2eBearer(k.Key), "", nil)
		names := e2eToolNames(t, cs2) // replica 2 now caches the key and the policy
		if !slices.Contains(names, "e2b_list_templates") {
			t.Fatalf("tools/list on replica 2 = %v", names)
		}
		e2eCallOK(t, cs2, toolList, nil)

		// Each change is made on replica 1; replica 2 serves it once it has
		// applied the change's notification (waitApplied), and at once.
		alice.setTool(wsA, "e2b_list_templates", map[string]any{"enabled": false})
		e.waitApplied(t, r2)
		if names := e2eToolNames(t, cs2); slices.Contains(names, "e2b_list_templates") {
			t.Fatalf("tool disabled: tools/list on replica 2 = %v, want no e2b_list_templates", names)
		}
		if msg := e2eCallErr(t, cs2, "e2b_list_templates", nil); !strings.Contains(msg, "turned off") {
			t.Errorf("disabled tool on replica 2 = %q", msg)
		}
		alice.setTool(wsA, "e2b_list_templates", map[string]any{"enabled": true})
		e.waitApplied(t, r2)
		if names := e2eToolNames(t, cs2); !slices.Contains(names, "e2b_list_templates") {
			t.Fatalf("tool enabled: tools/list on replica 2 = %v, want e2b_list_templates", names)
		}

		alice.revokeKey(wsA, k.ID)
		e.waitApplied(t, r2)
		if resp, body := e.rawMCP(t, r2.url+"/mcp", e2eBearer(k.Key), "127.0.0.5"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("key revoked: replica 2 answers %d %s, want 401", resp.StatusCode, body)
		}
		if _, err := cs2.ListTools(context.Background(), nil); err == nil {
			t.Errorf("revoked key's session on replica 2 still lists tools")
		}

		// A member's keys die with their membership, on every replica.
		csC := e.session(t, r2.url+"/mcp", e2eBearer(keyC.Key), "", nil)
		e2eCallOK(t, csC, toolList, nil)
		alice.api(http.MethodDelete, "/api/v1/workspaces/"+wsA+"/members/"+carol.id, nil, http.StatusNoContent)
		e.waitApplied(t, r2)
		if resp, body := e.rawMCP(t, r2.url+"/mcp", e2eBearer(keyC.Key), "127.0.0.5"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("member removed: replica 2 answers %d %s to their key, want 401", resp.StatusCode, body)
		}
	})

	t.Run("RateLimit", func(t *testing.T) {
		alice := alice.with(t)
		k := alice.createKey(wsA, "busy", "full", nil)
		// The limit counts tool calls only: a client's handshakes, lists
		// and notifications never use it up.
		for range 60 {
			if resp, body := e.rawMCP(t, r1.url+"/mcp", e2eBearer(k.Key), ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("initialize answered %d %s; the per-key limit must not count it", resp.StatusCode, body)
			}
		}
		// Workers send tool calls back to back until one is limited: far
		// faster than the refill (20/s), however slow the machine.
		call := func() string {
			req, _ := http.NewRequest(http.MethodPost, r1.url+"/mcp", strings.NewReader(
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+toolList+`","arguments":{}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			resp, err := e.httpClient(e2eBearer(k.Key), "").Do(req)
			if err != nil {
				t.Errorf("tools/call: %v", err)
				return ""
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("tools/call status = %d %s", resp.StatusCode, body)
			}
			return string(body)
		}
		var (
			mu         sync.Mutex
			ok         int
			firstLimit string
			stop       = make(chan struct{})
			once       sync.Once
			wg         sync.WaitGroup
		)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 40 {
					select {
					case <-stop:
						return
					default:
					}
					body := call()
					mu.Lock()
					if strings.Contains(body, "too many tool calls") {
						if firstLimit == "" {
							firstLimit = body
						}
						once.Do(func() { close(stop) })
					} else if strings.Contains(body, `"structuredContent"`) {
						ok++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if firstLimit == "" {
			t.Fatalf("%d tool calls of one key went through, none was limited", ok)
		}
		// All on one of the replicas: its share of the key's burst of 40.
		if share := 40 / len(e.replicas); ok < share {
			t.Errorf("%d tool calls went through, want at least this replica's share (%d) of the burst of 40", ok, share)
		}
		if !strings.Contains(firstLimit, `"isError":true`) || !strings.Contains(firstLimit, `"retryAfterSeconds":`) {
			t.Errorf("limited call answered %s, want a tool error with retryAfterSeconds", firstLimit)
		}
		// Another key is not affected.
		cs := e.session(t, r1.url+"/mcp", e2eBearer(keyA.Key), "", nil)
		e2eCallOK(t, cs, toolList, nil)
	})
	e.noSecretLeaks(t)
}
