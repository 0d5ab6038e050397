package main

// End-to-end tests of MCP keys: the protocol versions, every way to present
// a key (bearer, X-API-Key, connector URL), read-only keys, the key list and
// the request size limit. The harness is in e2e_harness_test.go.

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
)

func TestMCPEndToEnd_Keys(t *testing.T) {
	f := newMCPFixture(t)
	e, r1, r2, alice, teamA, wsA, keyA := f.e, f.r1, f.r2, f.alice, f.teamA, f.wsA, f.keyA

	t.Run("Protocols", func(t *testing.T) {
		keyA := alice.with(t).createKey(wsA, "protocols", "full", nil)
		for _, tt := range []struct{ version, want string }{
			{"", "2026-07-28"},
			{"2025-11-25", "2025-11-25"},
			{"2025-06-18", "2025-06-18"},
		} {
			t.Run(tt.want, func(t *testing.T) {
				cs := e.session(t, r1.url+"/mcp", e2eBearer(keyA.Key), tt.version, nil)
				if got := cs.InitializeResult().ProtocolVersion; got != tt.want {
					t.Fatalf("negotiated protocol = %s, want %s", got, tt.want)
				}
				names := e2eToolNames(t, cs)
				for _, n := range []string{toolList, toolCreate} {
					if !slices.Contains(names, n) {
						t.Errorf("tools/list = %v, missing %s", names, n)
					}
				}
				out := e2eCallOK(t, cs, toolCreate, map[string]any{"timeout": 120, "metadata": map[string]any{"proto": tt.want}})
				id, _ := out["sandbox_id"].(string)
				if state, _ := e.simSandboxState(teamA, id); state != "running" {
					t.Fatalf("sandbox %q from create = state %q on E2B, want running", id, state)
				}
				list := e2eCallOK(t, cs, toolList, map[string]any{"metadata": "proto=" + tt.want})
				if data, _ := list["data"].([]any); len(data) != 1 || !strings.Contains(fmt.Sprint(data), id) {
					t.Errorf("%s(metadata proto=%s) = %v, want exactly %s", toolList, tt.want, list, id)
				}
			})
		}
	})

	t.Run("AuthMethods", func(t *testing.T) {
		keyA := alice.with(t).createKey(wsA, "auth methods", "full", nil)
		for _, tt := range []struct {
			name     string
			endpoint string
			header   http.Header
		}{
			{"bearer", r1.url + "/mcp", e2eBearer(keyA.Key)},
			{"lowercase bearer", r1.url + "/mcp", http.Header{"Authorization": {"bearer " + keyA.Key}}},
			{"X-API-Key", r1.url + "/mcp", http.Header{"X-Api-Key": {keyA.Key}}},
			{"connector URL", e2eConnectorURL(r1.url, keyA), nil},
		} {
			for _, version := range []string{"", "2025-11-25"} {
				t.Run(tt.name+" "+version, func(t *testing.T) {
					cs := e.session(t, tt.endpoint, tt.header, version, nil)
					if names := e2eToolNames(t, cs); !slices.Contains(names, toolList) {
						t.Fatalf("tools/list = %v, missing %s", names, toolList)
					}
					e2eCallOK(t, cs, toolList, nil)
				})
			}
		}
	})

	t.Run("ReadOnlyKey", func(t *testing.T) {
		alice := alice.with(t)
		ro := alice.createKey(wsA, "read only", "read_only", nil)
		var tools struct {
			Tools []mcpgate.ToolInfo `json:"tools"`
		}
		alice.decode(alice.api(http.MethodGet, "/api/v1/workspaces/"+wsA+"/tools", nil, http.StatusOK), &tools)
		var want []string
		for _, tl := range tools.Tools {
			if tl.Enabled && tl.ReadOnly {
				want = append(want, tl.Name)
			}
		}
		slices.Sort(want)
		for _, version := range []string{"", "2025-11-25"} {
			cs := e.session(t, r1.url+"/mcp", e2eBearer(ro.Key), version, nil)
			if got := e2eToolNames(t, cs); !slices.Equal(got, want) {
				t.Errorf("tools/list (read_only, %q) = %v, want the enabled read-only tools %v", version, got, want)
			}
			e2eCallOK(t, cs, toolList, nil)
			mark := e.simLog.mark()
			msg := e2eCallErr(t, cs, toolCreate, nil)
			if !strings.Contains(msg, "read-only") || !strings.Contains(msg, "full scope") {
				t.Errorf("create with a read_only key = %q, want it refused as read-only, naming full scope", msg)
			}
			if reqs := e.simLog.since(mark); len(reqs) != 0 {
				t.Errorf("refused call reached E2B: %v", reqs)
			}
		}
	})

	t.Run("KeyList", func(t *testing.T) {
		alice := alice.with(t)
		used := alice.createKey(wsA, "used", "full", nil)
		ro := alice.createKey(wsA, "listed read only", "read_only", nil)
		gone := alice.createKey(wsA, "listed revoked", "full", nil)
		alice.revokeKey(wsA, gone.ID)
		if resp, body := e.rawMCP(t, r2.url+"/mcp", e2eBearer(used.Key), ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("valid key = %d %s", resp.StatusCode, body)
		}
		type keyInfo struct {
			ID         string     `json:"id"`
			Scope      string     `json:"scope"`
			OwnerEmail string     `json:"owner_email"`
			LastUsedAt *time.Time `json:"last_used_at"`
			RevokedAt  *time.Time `json:"revoked_at"`
		}
		find := func(keys []keyInfo, id string) keyInfo {
			for _, k := range keys {
				if k.ID == id {
					return k
				}
			}
			t.Fatalf("GET keys lacks key %s", id)
			return keyInfo{}
		}
		// Last use is written in batches, every 2 s: the bound is generous,
		// for a loaded machine; nothing here measures the interval.
		deadline := time.Now().Add(30 * time.Second)
		for {
			var list struct {
				Keys []keyInfo `json:"keys"`
			}
			alice.decode(alice.api(http.MethodGet, "/api/v1/workspaces/"+wsA+"/keys", nil, http.StatusOK), &list)
			if k := find(list.Keys, used.ID); k.LastUsedAt != nil {
				if k.Scope != "full" || k.OwnerEmail != alice.email || k.RevokedAt != nil {
					t.Errorf("listed used key = %+v", k)
				}
				if k := find(list.Keys, ro.ID); k.Scope != "read_only" || k.LastUsedAt != nil {
					t.Errorf("listed read-only key = %+v", k)
				}
				if k := find(list.Keys, gone.ID); k.RevokedAt == nil {
					t.Errorf("listed revoked key = %+v, want revoked_at", k)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET keys never showed the last use of a used key")
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("BodyLimit", func(t *testing.T) {
		huge := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e2b_list_sandboxes","arguments":{"template":"` +
			strings.Repeat("x", 1<<20) + `"}}}`
		req, _ := http.NewRequest(http.MethodPost, r1.url+"/mcp", strings.NewReader(huge))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := e.httpClient(e2eBearer(keyA.Key), "").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Errorf("request over 1 MiB = %d, want it refused with a 4xx", resp.StatusCode)
		}
	})
	e.noSecretLeaks(t)
}
