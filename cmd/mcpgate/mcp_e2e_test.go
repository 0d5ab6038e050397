package main

// End-to-end tests of the MCP endpoint: the real program,
// two replicas on one PostgreSQL, the E2B simulator, the JSON API over HTTP
// and go-sdk clients over streamable HTTP. The harness is in
// e2e_harness_test.go.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

const (
	toolList   = "e2b_list_sandboxes"
	toolCreate = "e2b_create_sandbox"
	toolKill   = "e2b_kill_sandbox"
)

func TestMCPEndToEnd(t *testing.T) {
	e := newE2EEnv(t, 2)
	r1, r2 := e.replicas[0], e.replicas[1]

	alice, teamA := e.signupWithE2B(r1.url, "alice@example.com")
	bob, teamB := e.signupWithE2B(r1.url, "bob@example.com")
	wsA, wsB := alice.personal, bob.personal
	keyA := alice.createKey(wsA, "alice laptop", "full", nil)
	keyB := bob.createKey(wsB, "bob laptop", "full", nil)
	// carol is a member (not an admin) of alice's workspace.
	carol := e.signup(r1.url, "carol@example.com", alice.invite(wsA, "carol@example.com", "member"))
	keyC := carol.createKey(wsA, "carol", "full", nil)

	// Subtests that make many calls get keys of their own: each key has its
	// own rate limit (20/s, burst 40), and a connect costs requests too.
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

	t.Run("Unauthorized", func(t *testing.T) {
		alice := alice.with(t)
		// From source addresses of its own, one per case: the failures here
		// must neither count against the other tests' address nor reach the
		// per-address limit (tested in AuthFailureBruteForce).
		const source = "127.0.0.3"
		nextSource := 10
		soon := time.Now().Add(2 * time.Second)
		expiring := alice.createKey(wsA, "expiring", "full", &soon)
		revoked := alice.createKey(wsA, "revoked", "full", nil)
		expiredInDB := alice.createKey(wsA, "expired in db", "full", nil)
		// Used once while valid, so that the replicas have them cached: a
		// cached key must stop working too.
		for _, k := range []e2eKey{expiring, revoked} {
			for _, r := range e.replicas {
				if resp, body := e.rawMCP(t, r.url+"/mcp", e2eBearer(k.Key), source); resp.StatusCode != http.StatusOK {
					t.Fatalf("valid key = %d %s, want 200", resp.StatusCode, body)
				}
			}
		}
		alice.revokeKey(wsA, revoked.ID)
		db := e.dbConn(t)
		if _, err := db.Exec(context.Background(), `UPDATE api_keys SET expires_at = now() - interval '1 minute' WHERE id = $1`, expiredInDB.ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(soon) + 100*time.Millisecond)

		_, id, _ := mcpgate.NewMCPKey()
		unknown, _, _ := mcpgate.NewMCPKey()
		otherSecret, _, _ := mcpgate.NewMCPKey()
		wrongSecret := "mcpg_" + keyA.ID + otherSecret[len("mcpg_")+len(id):]
		if wrongSecret == keyA.Key || len(wrongSecret) != len(keyA.Key) {
			t.Fatalf("bad test key %q", wrongSecret)
		}
		cases := []struct{ name, key string }{
			{"malformed", "mcpg_not-a-key"},
			{"unknown id", unknown},
			{"right id, wrong secret", wrongSecret},
			{"revoked", revoked.Key},
			{"expired", expiring.Key},
			{"expired (set in the database)", expiredInDB.Key},
		}
		type answer struct{ body, challenge string }
		// Every refusal looks the same; a request with no credential at all
		// differs only in its challenge, which then has no error (RFC 6750
		// §3.1), and both point OAuth clients to the resource metadata. A
		// connector URL is no OAuth resource: its refusals get a
		// plain challenge, the same for every one of them.
		type kind struct{ presented, connector bool }
		first := map[kind]*answer{}
		check := func(t *testing.T, endpoint string, header http.Header, presented bool) {
			t.Helper()
			nextSource++
			k := kind{presented, strings.HasPrefix(endpoint, "/c/")}
			for _, r := range e.replicas {
				resp, body := e.rawMCP(t, r.url+endpoint, header, fmt.Sprintf("127.0.0.%d", nextSource))
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("status = %d %s, want 401", resp.StatusCode, body)
				}
				got := answer{string(body), resp.Header.Get("WWW-Authenticate")}
				switch {
				case k.connector:
					if got.challenge != `Bearer realm="mcpgate", error="invalid_token"` {
						t.Errorf("connector URL: WWW-Authenticate = %q, want a plain Bearer challenge without OAuth hints", got.challenge)
					}
				case !strings.HasPrefix(got.challenge, "Bearer ") || !strings.Contains(got.challenge, `resource_metadata="`+e2ePublicURL+"/.well-known/oauth-protected-resource/mcp\"") ||
					strings.Contains(got.challenge, `error="invalid_token"`) != presented:
					t.Errorf("WWW-Authenticate = %q, want a Bearer challenge naming the resource metadata (error only when a credential was sent: %v)", got.challenge, presented)
				}
				if first[k] == nil {
					first[k] = &got
				} else if got != *first[k] {
					t.Errorf("answer = %+v, want the same as every other 401: %+v", got, *first[k])
				}
			}
		}
		t.Run("missing", func(t *testing.T) { check(t, "/mcp", nil, false) })
		t.Run("empty bearer", func(t *testing.T) { check(t, "/mcp", http.Header{"Authorization": {"Bearer "}}, false) })
		t.Run("basic auth", func(t *testing.T) { check(t, "/mcp", http.Header{"Authorization": {"Basic " + keyA.Key}}, false) })
		for _, c := range cases {
			t.Run(c.name+"/bearer", func(t *testing.T) { check(t, "/mcp", e2eBearer(c.key), true) })
			t.Run(c.name+"/X-API-Key", func(t *testing.T) { check(t, "/mcp", http.Header{"X-Api-Key": {c.key}}, true) })
			t.Run(c.name+"/connector URL", func(t *testing.T) { check(t, "/c/"+c.key+"/mcp", nil, true) })
		}
		if f := first[kind{presented: true}]; f != nil && (strings.Contains(f.body, "revoked") || strings.Contains(f.body, "expired")) {
			t.Errorf("401 body %q hints at the reason", f.body)
		}
		t.Run("go-sdk client", func(t *testing.T) {
			for _, version := range []string{"", "2025-11-25"} {
				cs, err := e.connect(t, r1.url+"/mcp", e2eBearer(revoked.Key), version, nil)
				if err == nil {
					_, err = cs.ListTools(context.Background(), nil)
				}
				if err == nil {
					t.Errorf("revoked key with protocol %q: connect and tools/list succeeded, want an error", version)
				}
			}
		})
	})

	t.Run("AuthFailureBruteForce", func(t *testing.T) {
		const source = "127.0.0.2"
		refused, limited := 0, false
		for !limited && refused < 60 {
			k, _, _ := mcpgate.NewMCPKey()
			resp, body := e.rawMCP(t, r1.url+"/mcp", e2eBearer(k), source)
			switch resp.StatusCode {
			case http.StatusUnauthorized:
				refused++
			case http.StatusTooManyRequests:
				limited = true
				if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
					t.Errorf("429 with Retry-After %q, want a positive number of seconds", ra)
				}
			default:
				t.Fatalf("bad key = %d %s", resp.StatusCode, body)
			}
		}
		// The burst of 20 is the deployment's: each of the replicas allows
		// its share.
		if share := 20 / len(e.replicas); !limited || refused < share {
			t.Fatalf("bad keys from one address: %d answered 401, then limited: %v; want 429 after this replica's share (%d) of the burst of 20",
				refused, limited, share)
		}
		// Another address is not affected.
		if resp, body := e.rawMCP(t, r1.url+"/mcp", e2eBearer("mcpg_bad"), "127.0.0.4"); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("bad key from another address = %d %s, want 401", resp.StatusCode, body)
		}
		// A valid key from the same address (behind a proxy, every client
		// shares it) is not locked out by someone else's failures.
		if resp, body := e.rawMCP(t, r1.url+"/mcp", e2eBearer(keyA.Key), source); resp.StatusCode != http.StatusOK {
			t.Errorf("valid key from the limited address = %d %s, want 200", resp.StatusCode, body)
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

	t.Run("NoE2BKey", func(t *testing.T) {
		alice := alice.with(t)
		ws := alice.workspace("No E2B yet")
		k := alice.createKey(ws, "empty", "full", nil)
		cs := e.session(t, r1.url+"/mcp", e2eBearer(k.Key), "", nil)
		mark := e.simLog.mark()
		msg := e2eCallErr(t, cs, toolList, nil)
		wantURL := e2ePublicURL + "/app/w/" + ws + "/connections"
		if !strings.Contains(msg, "E2B") || !strings.Contains(msg, "dashboard") || !strings.Contains(msg, wantURL) {
			t.Errorf("call without an E2B key = %q, want it to say to connect E2B on the dashboard at %s", msg, wantURL)
		}
		if reqs := e.simLog.since(mark); len(reqs) != 0 {
			t.Errorf("call without an E2B key reached E2B: %v", reqs)
		}
	})

	t.Run("KillConfirmation", func(t *testing.T) {
		alice := alice.with(t)
		ws := alice.workspace("Kill")
		alice.connectE2B(ws, teamA)
		k := alice.createKey(ws, "kill", "full", nil)
		k2 := alice.createKey(ws, "kill 2", "full", nil)
		cs := e.session(t, r1.url+"/mcp", e2eBearer(k.Key), "2025-11-25", nil)
		sb1, sb2 := e.simSandbox(teamA, nil), e.simSandbox(teamA, nil)

		// A new workspace: kill is off, absent and refused by name.
		if names := e2eToolNames(t, cs); slices.Contains(names, toolKill) {
			t.Fatalf("tools/list in a new workspace = %v, want no %s", names, toolKill)
		}
		msg := e2eCallErr(t, cs, toolKill, map[string]any{"sandbox_id": sb1})
		if !strings.Contains(msg, "turned off") || !strings.Contains(msg, "owner or admin") {
			t.Errorf("kill while disabled = %q, want it refused, naming who can enable it", msg)
		}
		if state, _ := e.simSandboxState(teamA, sb1); state != "running" {
			t.Fatalf("sandbox after refused kill = %q, want running", state)
		}

		// A member cannot enable it; an admin can, and that is audited.
		carol.with(t).api(http.MethodPut, "/api/v1/workspaces/"+wsA+"/tools/"+toolKill, map[string]any{"enabled": true}, http.StatusForbidden)
		info := alice.setTool(ws, toolKill, map[string]any{"enabled": true})
		if info["enabled"] != true || info["approval"] != "human" {
			t.Fatalf("enable kill = %v, want enabled and needing a person's approval", info)
		}
		// This test is about the model mode (the two-step confirmation);
		// TestApprovalEndToEnd covers human.
		if info := alice.setTool(ws, toolKill, map[string]any{"approval": "model"}); info["approval"] != "model" {
			t.Fatalf("set approval model = %v", info)
		}
		alice.auditUntil(ws, "kind=admin", func(items []e2eAuditItem) bool {
			return slices.ContainsFunc(items, func(it e2eAuditItem) bool {
				return it.Action == "tool.enabled" && it.ActorID == alice.id && it.Arguments["tool"] == toolKill
			})
		})
		lt, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var kill *mcp.Tool
		for _, tl := range lt.Tools {
			if tl.Name == toolKill {
				kill = tl
			}
		}
		if kill == nil {
			t.Fatalf("tools/list after enabling kill lacks it")
		}
		if b, _ := json.Marshal(kill.InputSchema); !strings.Contains(string(b), "confirmation_token") {
			t.Errorf("kill schema = %s, want a confirmation_token argument", b)
		}

		// First step: nothing happens, a token comes back.
		confirmFor := func(t *testing.T, cs *mcp.ClientSession, sb string) string {
			t.Helper()
			out := e2eCallOK(t, cs, toolKill, map[string]any{"sandbox_id": sb})
			tok, _ := out["confirmation_token"].(string)
			if out["status"] != "confirmation_required" || !strings.HasPrefix(tok, "mcpct_") || out["done"] != false {
				t.Fatalf("first kill call = %v, want confirmation_required with a token", out)
			}
			if state, _ := e.simSandboxState(teamA, sb); state != "running" {
				t.Fatalf("sandbox after the first (confirmation) call = %q, want running", state)
			}
			return tok
		}
		tok1 := confirmFor(t, cs, sb1)

		t.Run("token for other arguments", func(t *testing.T) {
			msg := e2eCallErr(t, cs, toolKill, map[string]any{"sandbox_id": sb2, "confirmation_token": tok1})
			if !strings.Contains(msg, "not valid") {
				t.Errorf("kill of another sandbox with the token = %q, want it refused", msg)
			}
			for _, sb := range []string{sb1, sb2} {
				if state, _ := e.simSandboxState(teamA, sb); state != "running" {
					t.Errorf("sandbox %s = %q, want running", sb, state)
				}
			}
		})
		t.Run("token of another key", func(t *testing.T) {
			cs2 := e.session(t, r1.url+"/mcp", e2eBearer(k2.Key), "2025-11-25", nil)
			if msg := e2eCallErr(t, cs2, toolKill, map[string]any{"sandbox_id": sb1, "confirmation_token": tok1}); !strings.Contains(msg, "not valid") {
				t.Errorf("token used by another key = %q, want it refused", msg)
			}
			if state, _ := e.simSandboxState(teamA, sb1); state != "running" {
				t.Errorf("sandbox = %q, want running", state)
			}
		})
		t.Run("forged token", func(t *testing.T) {
			forged := tok1[:len(tok1)-4] + "AAAA"
			if forged == tok1 {
				forged = tok1[:len(tok1)-4] + "BBBB"
			}
			if msg := e2eCallErr(t, cs, toolKill, map[string]any{"sandbox_id": sb1, "confirmation_token": forged}); !strings.Contains(msg, "not valid") {
				t.Errorf("forged token = %q, want it refused", msg)
			}
		})
		t.Run("confirmed", func(t *testing.T) {
			out := e2eCallOK(t, cs, toolKill, map[string]any{"sandbox_id": sb1, "confirmation_token": tok1})
			if out["killed"] != true {
				t.Errorf("confirmed kill = %v, want killed", out)
			}
			if state, _ := e.simSandboxState(teamA, sb1); state != "" {
				t.Errorf("sandbox after confirmed kill = %q, want gone", state)
			}
		})
		t.Run("replayed", func(t *testing.T) {
			mark := e.simLog.mark()
			if msg := e2eCallErr(t, cs, toolKill, map[string]any{"sandbox_id": sb1, "confirmation_token": tok1}); !strings.Contains(msg, "not valid") {
				t.Errorf("replayed token = %q, want it refused", msg)
			}
			if reqs := e.simLog.since(mark); len(reqs) != 0 {
				t.Errorf("replayed token reached E2B: %v", reqs)
			}
		})
		t.Run("replayed on another replica", func(t *testing.T) {
			tok := confirmFor(t, cs, sb2)
			csR2 := e.session(t, r2.url+"/mcp", e2eBearer(k.Key), "", nil)
			e2eCallOK(t, csR2, toolKill, map[string]any{"sandbox_id": sb2, "confirmation_token": tok})
			if msg := e2eCallErr(t, cs, toolKill, map[string]any{"sandbox_id": sb2, "confirmation_token": tok}); !strings.Contains(msg, "not valid") {
				t.Errorf("token replayed on replica 1 after use on replica 2 = %q, want it refused", msg)
			}
		})
		t.Run("2026-07-28 client without forms", func(t *testing.T) {
			sb := e.simSandbox(teamA, nil)
			cs := e.session(t, r1.url+"/mcp", e2eBearer(k.Key), "", nil)
			tok := confirmFor(t, cs, sb)
			e2eCallOK(t, cs, toolKill, map[string]any{"sandbox_id": sb, "confirmation_token": tok})
			if state, _ := e.simSandboxState(teamA, sb); state != "" {
				t.Errorf("sandbox after confirmed kill = %q, want gone", state)
			}
		})

		t.Run("input request accepted", func(t *testing.T) {
			sb := e.simSandbox(teamA, nil)
			var asked []string
			var mu sync.Mutex
			cs := e.session(t, r1.url+"/mcp", e2eBearer(k.Key), "", &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params.Message)
					mu.Unlock()
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
				}})
			out := e2eCallOK(t, cs, toolKill, map[string]any{"sandbox_id": sb})
			if out["killed"] != true {
				t.Errorf("kill with an accepted input request = %v, want killed", out)
			}
			if len(asked) != 1 || !strings.Contains(asked[0], sb) {
				t.Errorf("the user was asked %q, want one question naming %s", asked, sb)
			}
			if state, _ := e.simSandboxState(teamA, sb); state != "" {
				t.Errorf("sandbox = %q, want gone", state)
			}
		})
		for _, tt := range []struct {
			name   string
			answer *mcp.ElicitResult
		}{
			{"declined", &mcp.ElicitResult{Action: "decline"}},
			{"cancelled", &mcp.ElicitResult{Action: "cancel"}},
			{"accepted without confirm", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": false}}},
		} {
			answer := tt.answer
			t.Run("input request "+tt.name, func(t *testing.T) {
				sb := e.simSandbox(teamA, nil)
				cs := e.session(t, r1.url+"/mcp", e2eBearer(k.Key), "", &mcp.ClientOptions{
					ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return answer, nil }})
				res := e2eCall(t, cs, toolKill, map[string]any{"sandbox_id": sb})
				if !strings.Contains(testutil.ToolText(res), "Not done") {
					t.Errorf("kill answered %v = %q, want not done", answer, testutil.ToolText(res))
				}
				if state, _ := e.simSandboxState(teamA, sb); state != "running" {
					t.Errorf("sandbox = %q, want running", state)
				}
			})
		}
		t.Run("request state replayed or for other arguments", func(t *testing.T) {
			sbX, sbY := e.simSandbox(teamA, nil), e.simSandbox(teamA, nil)
			cs := e.session(t, r1.url+"/mcp", e2eBearer(k.Key), "", &mcp.ClientOptions{
				MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return nil, fmt.Errorf("not called: MRTR is handled by hand")
				}})
			ctx := context.Background()
			first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolKill, Arguments: map[string]any{"sandbox_id": sbX}})
			if err != nil || first.RequestState == "" || first.InputRequests["confirm"] == nil {
				t.Fatalf("first call = %+v, %v; want an input request with request state", first, err)
			}
			yes := mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}}
			retry := func(sb string) *mcp.CallToolResult {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolKill, Arguments: map[string]any{"sandbox_id": sb},
					InputResponses: yes, RequestState: first.RequestState})
				if err != nil {
					t.Fatalf("retry err = %v", err)
				}
				return res
			}
			if res := retry(sbY); !res.IsError || !strings.Contains(testutil.ToolText(res), "not valid") {
				t.Errorf("request state for %s used for %s = %q, want refused", sbX, sbY, testutil.ToolText(res))
			}
			if res := retry(sbX); res.IsError {
				t.Errorf("retry with the request state = %q, want the kill done", testutil.ToolText(res))
			}
			if res := retry(sbX); !res.IsError || !strings.Contains(testutil.ToolText(res), "not valid") {
				t.Errorf("replayed request state = %q, want refused", testutil.ToolText(res))
			}
			if state, _ := e.simSandboxState(teamA, sbY); state != "running" {
				t.Errorf("sandbox %s = %q, want running", sbY, state)
			}
			if state, _ := e.simSandboxState(teamA, sbX); state != "" {
				t.Errorf("sandbox %s = %q, want gone", sbX, state)
			}
		})
		t.Run("audited", func(t *testing.T) {
			want := []string{"cancelled", "confirmation_required", "denied", "ok"}
			alice.with(t).auditUntil(ws, "tool="+toolKill, func(items []e2eAuditItem) bool {
				seen := map[string]bool{}
				for _, it := range items {
					seen[it.Outcome] = true
				}
				return !slices.ContainsFunc(want, func(o string) bool { return !seen[o] })
			})
		})
	})

	t.Run("ConfirmCostlyCall", func(t *testing.T) {
		alice := alice.with(t)
		ws := alice.workspace("Confirm create")
		alice.connectE2B(ws, teamA)
		k := alice.createKey(ws, "confirm create", "full", nil)
		info := alice.setTool(ws, toolCreate, map[string]any{"needs_confirmation": true})
		if info["enabled"] != true || info["approval"] != "model" {
			t.Fatalf("PUT needs_confirmation = %v", info)
		}
		cs := e.session(t, r1.url+"/mcp", e2eBearer(k.Key), "2025-11-25", nil)
		secret := "confirm-" + testutil.RandomHex(12)
		e.rec.secret(secret, "env_vars value in a confirmed call")
		args := map[string]any{"timeout": 60, "metadata": map[string]any{"step": "two"}, "env_vars": map[string]any{"TOKEN": secret}}
		mark := e.simLog.mark()
		res := e2eCall(t, cs, toolCreate, args)
		out := e2eStructured(t, res)
		tok, _ := out["confirmation_token"].(string)
		if res.IsError || tok == "" {
			t.Fatalf("first create = %s, want a confirmation token", testutil.ToolText(res))
		}
		if strings.Contains(testutil.ToolText(res), secret) {
			t.Errorf("the confirmation shows an env_vars value: %s", testutil.ToolText(res))
		}
		if reqs := e.simLog.since(mark); len(reqs) != 0 {
			t.Fatalf("the first (confirmation) call reached E2B: %v", reqs)
		}
		// The token is bound to the exact arguments, secrets included.
		other := map[string]any{"timeout": 60, "metadata": map[string]any{"step": "two"}, "env_vars": map[string]any{"TOKEN": "other"}, "confirmation_token": tok}
		if msg := e2eCallErr(t, cs, toolCreate, other); !strings.Contains(msg, "not valid") {
			t.Errorf("token with another env_vars value = %q, want refused", msg)
		}
		args["confirmation_token"] = tok
		done := e2eCallOK(t, cs, toolCreate, args)
		if id, _ := done["sandbox_id"].(string); id == "" {
			t.Fatalf("confirmed create = %v", done)
		} else if state, _ := e.simSandboxState(teamA, id); state != "running" {
			t.Errorf("confirmed create: sandbox %s = %q, want running", id, state)
		}
	})

	t.Run("AuditRedaction", func(t *testing.T) {
		alice := alice.with(t)
		carol := carol.with(t)
		csA := e.session(t, r1.url+"/mcp", e2eBearer(keyA.Key), "", nil)
		csC := e.session(t, r2.url+"/mcp", e2eBearer(keyC.Key), "2025-11-25", nil)
		envSecret := "s3cr3t-" + testutil.RandomHex(12)
		e.rec.secret(envSecret, "env_vars value")
		out := e2eCallOK(t, csA, toolCreate, map[string]any{"timeout": 60,
			"metadata": map[string]any{"purpose": "audit"}, "env_vars": map[string]any{"DB_PASSWORD": envSecret, "PLAIN": envSecret}})
		created, _ := out["sandbox_id"].(string)
		e2eCallOK(t, csC, toolList, map[string]any{"state": "running"})
		missing := "i" + strings.Repeat("x", 20)
		e2eCallErr(t, csC, "e2b_get_sandbox", map[string]any{"sandbox_id": missing})

		items := alice.auditUntil(wsA, "", func(items []e2eAuditItem) bool {
			var a, c int
			for _, it := range items {
				if it.Kind == "tool_call" && it.KeyID == keyA.ID && it.Action == toolCreate && it.Arguments["env_vars"] != nil {
					a++
				}
				if it.Kind == "tool_call" && it.KeyID == keyC.ID {
					c++
				}
			}
			return a == 1 && c == 2
		})
		for _, it := range items {
			switch {
			case it.KeyID == keyA.ID && it.Action == toolCreate && it.Arguments["env_vars"] != nil:
				if it.Outcome != "ok" || it.UpstreamStatus != 200 || it.ActorID != alice.id || it.Source != "mcp" {
					t.Errorf("audit of create = %+v, want ok, 200, by alice over mcp", it)
				}
				env, _ := it.Arguments["env_vars"].(map[string]any)
				if env["DB_PASSWORD"] != "[redacted]" || env["PLAIN"] != "[redacted]" {
					t.Errorf("audit env_vars = %v, want every value [redacted]", it.Arguments["env_vars"])
				}
				if md, _ := it.Arguments["metadata"].(map[string]any); md["purpose"] != "audit" {
					t.Errorf("audit metadata = %v, want it kept", it.Arguments["metadata"])
				}
			case it.KeyID == keyC.ID && it.Action == toolList:
				if it.Outcome != "ok" || it.UpstreamStatus != 200 || it.ActorID != carol.id || it.Arguments["state"] != "running" {
					t.Errorf("audit of carol's list = %+v", it)
				}
			case it.KeyID == keyC.ID && it.Action == "e2b_get_sandbox":
				if it.Outcome != "error" || it.UpstreamStatus != 404 || it.Message == "" {
					t.Errorf("audit of a failed get = %+v, want error, 404 and a message", it)
				}
			}
		}
		if !slices.ContainsFunc(items, func(it e2eAuditItem) bool { return it.Kind == "admin" && it.Action == "key.created" }) {
			t.Errorf("admin's audit lacks the key.created admin events")
		}

		// The member sees only their own calls; the filters work.
		mine := carol.audit(wsA, "")
		if len(mine) == 0 {
			t.Fatal("member's audit is empty, want their own calls")
		}
		for _, it := range mine {
			if it.ActorID != carol.id {
				t.Errorf("member sees %+v, which is not theirs", it)
			}
		}
		if got := carol.audit(wsA, "tool="+toolList+"&outcome=ok"); len(got) != 1 || got[0].KeyID != keyC.ID {
			t.Errorf("member's audit filtered by tool and outcome = %+v, want their one list call", got)
		}
		// Carol may not read other users' rows by asking for them.
		for _, it := range carol.audit(wsA, "actor="+alice.id) {
			if it.ActorID != carol.id {
				t.Errorf("member asking for actor=alice sees %+v", it)
			}
		}
		if state, _ := e.simSandboxState(teamA, created); state != "running" {
			t.Errorf("created sandbox = %q, want running", state)
		}
	})

	t.Run("WorkspaceIsolation", func(t *testing.T) {
		alice, bob := alice.with(t), bob.with(t)
		keyA := alice.createKey(wsA, "isolation", "full", nil)
		csB := e.session(t, r1.url+"/mcp", e2eBearer(keyB.Key), "", nil)
		out := e2eCallOK(t, csB, toolCreate, map[string]any{"timeout": 3600, "metadata": map[string]any{"owner": "bob"}})
		sbB, _ := out["sandbox_id"].(string)
		_, endB := e.simSandboxState(teamB, sbB)
		status, snap := e.simDo(teamB, http.MethodPost, "/sandboxes/"+sbB+"/snapshots", map[string]any{"name": "bob-snap"})
		if status != http.StatusCreated {
			t.Fatalf("simulator snapshot = %d %v", status, snap)
		}
		snapB, _ := snap["snapshotID"].(string)
		status, raw := e.simDoRaw(teamB, http.MethodGet, "/v2/templates", nil)
		var tpls []struct {
			TemplateID string `json:"templateID"`
			Public     bool   `json:"public"`
		}
		if err := json.Unmarshal(raw, &tpls); status != http.StatusOK || err != nil {
			t.Fatalf("simulator templates = %d %s", status, raw)
		}
		var tplB string
		for _, tp := range tpls {
			if !tp.Public {
				tplB = tp.TemplateID
				break
			}
		}
		if tplB == "" {
			t.Fatalf("no private template in team B: %v", tpls)
		}
		alice.setTool(wsA, toolKill, map[string]any{"enabled": true})
		csA := e.session(t, r1.url+"/mcp", e2eBearer(keyA.Key), "2025-11-25", nil)

		notFound := func(t *testing.T, res *mcp.CallToolResult) {
			if !res.IsError || !strings.Contains(testutil.ToolText(res), "not found") {
				t.Errorf("result = %q, want a not-found tool error", testutil.ToolText(res))
			}
		}
		// Another team's template is refused (E2B answers 403, not 404).
		refused := func(t *testing.T, res *mcp.CallToolResult) {
			if !res.IsError || !strings.Contains(testutil.ToolText(res), "another team") {
				t.Errorf("result = %q, want a refusal", testutil.ToolText(res))
			}
		}
		// Logs and metrics of an unknown sandbox are empty on E2B (and the
		// simulator), not 404: what matters is that nothing of B's comes.
		empty := func(t *testing.T, res *mcp.CallToolResult) {
			if res.IsError {
				notFound(t, res)
				return
			}
			out := e2eStructured(t, res)
			for k, v := range out {
				if l, ok := v.([]any); !ok || len(l) != 0 {
					t.Errorf("result %s = %v, want nothing of team B's sandbox", k, v)
				}
			}
		}
		hidesB := func(t *testing.T, res *mcp.CallToolResult) {
			if res.IsError {
				t.Errorf("result = tool error %q", testutil.ToolText(res))
			}
			if text := testutil.ToolText(res); strings.Contains(text, sbB) || strings.Contains(text, tplB) || strings.Contains(text, snapB) || strings.Contains(text, "bob") {
				t.Errorf("result shows team B's resources: %s", text)
			}
		}
		type isolationCase struct {
			tool, variant string
			args          map[string]any
			check         func(t *testing.T, res *mcp.CallToolResult)
		}
		tests := []isolationCase{
			{"e2b_list_default_templates", "", nil, hidesB},
			{"e2b_list_templates", "", nil, hidesB},
			{"e2b_list_template_builds", "", map[string]any{"template_id": tplB}, refused},
			{toolCreate, "", map[string]any{"timeout": 60, "metadata": map[string]any{"owner": "alice"}}, func(t *testing.T, res *mcp.CallToolResult) {
				out := e2eStructured(t, res)
				id, _ := out["sandbox_id"].(string)
				if state, _ := e.simSandboxState(teamA, id); state != "running" {
					t.Errorf("created sandbox in team A = %q, want running", state)
				}
				if state, _ := e.simSandboxState(teamB, id); state != "" {
					t.Errorf("created sandbox is visible to team B")
				}
			}},
			{toolList, "", nil, hidesB},
			{toolList, "filtered", map[string]any{"metadata": "owner=bob"}, hidesB},
			{"e2b_get_sandbox", "", map[string]any{"sandbox_id": sbB}, notFound},
			{"e2b_get_sandbox_logs", "", map[string]any{"sandbox_id": sbB}, empty},
			{"e2b_get_sandbox_metrics", "", map[string]any{"sandbox_id": sbB}, empty},
			{"e2b_set_sandbox_timeout", "", map[string]any{"sandbox_id": sbB, "timeout": 120}, notFound},
			{"e2b_pause_sandbox", "", map[string]any{"sandbox_id": sbB}, notFound},
			{"e2b_resume_sandbox", "", map[string]any{"sandbox_id": sbB}, notFound},
			{"e2b_list_snapshots", "", nil, hidesB},
			{"e2b_list_snapshots", "filtered", map[string]any{"sandbox_id": sbB}, hidesB},
			{"e2b_find_idle_sandboxes", "", nil, hidesB},
			{toolKill, "", map[string]any{"sandbox_id": sbB}, notFound},
		}
		var all struct {
			Tools []mcpgate.ToolInfo `json:"tools"`
		}
		alice.decode(alice.api(http.MethodGet, "/api/v1/workspaces/"+wsA+"/tools", nil, http.StatusOK), &all)
		for _, tl := range all.Tools {
			if !slices.ContainsFunc(tests, func(tt isolationCase) bool { return tt.tool == tl.Name }) {
				t.Errorf("tool %s is not in the isolation table", tl.Name)
			}
		}
		for _, tt := range tests {
			t.Run(strings.TrimSpace(tt.tool+" "+tt.variant), func(t *testing.T) {
				mark := e.simLog.mark()
				// Kill needs a person's approval (its default), and the
				// approval's summary reads the sandbox first: another
				// team's is not found before any request is stored.
				res := e2eCall(t, csA, tt.tool, tt.args)
				tt.check(t, res)
				for _, r := range e.simLog.since(mark) {
					if r.key != teamA {
						t.Errorf("workspace A's call sent %s %s with another team's key", r.method, r.path)
					}
				}
			})
		}
		if state, end := e.simSandboxState(teamB, sbB); state != "running" || end != endB {
			t.Errorf("team B's sandbox after workspace A's calls = %s until %s, want running until %s", state, end, endB)
		}

		// A's audit never lists B's calls, even to its admin.
		for _, it := range alice.audit(wsA, "") {
			if it.WorkspaceID != wsA || it.KeyID == keyB.ID || it.ActorID == bob.id {
				t.Errorf("workspace A's audit shows %+v", it)
			}
		}
		if !slices.ContainsFunc(bob.audit(wsB, "tool="+toolCreate), func(it e2eAuditItem) bool { return it.KeyID == keyB.ID }) {
			// Written asynchronously; wait for it so the negative check above
			// is not vacuous.
			bob.auditUntil(wsB, "tool="+toolCreate, func(items []e2eAuditItem) bool { return len(items) > 0 })
			for _, it := range alice.audit(wsA, "") {
				if it.KeyID == keyB.ID {
					t.Errorf("workspace A's audit shows %+v", it)
				}
			}
		}

		// Every workspace route of B answers 404 to A's user.
		base := "/api/v1/workspaces/" + wsB
		for _, rt := range []struct {
			method, path string
			body         any
		}{
			{http.MethodGet, base + "/", nil},
			{http.MethodGet, base + "/keys", nil},
			{http.MethodPost, base + "/keys", map[string]any{"name": "x"}},
			{http.MethodDelete, base + "/keys/" + keyB.ID, nil},
			{http.MethodGet, base + "/tools", nil},
			{http.MethodPut, base + "/tools/" + toolKill, map[string]any{"enabled": true}},
			{http.MethodPost, base + "/tools/" + toolList + "/call", map[string]any{"arguments": map[string]any{}}},
			{http.MethodGet, base + "/audit", nil},
			{http.MethodGet, base + "/connections/e2b", nil},
			{http.MethodPut, base + "/connections/e2b", map[string]any{"api_key": teamA}},
			{http.MethodDelete, base + "/connections/e2b", nil},
			{http.MethodGet, base + "/members", nil},
		} {
			if status, body := alice.with(t).do(context.Background(), rt.method, rt.path, rt.body); status != http.StatusNotFound {
				t.Errorf("%s %s as workspace A's owner = %d %s, want 404", rt.method, rt.path, status, body)
			}
		}
		// B is intact: its key, its E2B connection and its kill setting.
		e2eCallOK(t, csB, toolList, nil)
		var toolsB struct {
			Tools []mcpgate.ToolInfo `json:"tools"`
		}
		bob.decode(bob.api(http.MethodGet, base+"/tools", nil, http.StatusOK), &toolsB)
		for _, tl := range toolsB.Tools {
			if tl.Name == toolKill && tl.Enabled {
				t.Errorf("kill got enabled in workspace B")
			}
		}
		// A's MCP key cannot be pointed at B: there is no way to name
		// another workspace, and B's key never reaches A's sandboxes.
		sbA := e.simSandbox(teamA, nil)
		if res := e2eCall(t, csB, "e2b_get_sandbox", map[string]any{"sandbox_id": sbA}); !res.IsError {
			t.Errorf("B's key reads A's sandbox: %s", testutil.ToolText(res))
		}
	})

	t.Run("Replicas", func(t *testing.T) {
		alice := alice.with(t)
		k := alice.createKey(wsA, "replicated", "full", nil) // on replica 1
		cs2 := e.session(t, r2.url+"/mcp", e2eBearer(k.Key), "", nil)
		names := e2eToolNames(t, cs2) // replica 2 now caches the key and the policy
		if !slices.Contains(names, "e2b_list_templates") {
			t.Fatalf("tools/list on replica 2 = %v", names)
		}
		e2eCallOK(t, cs2, toolList, nil)

		poll := func(what string, ok func() bool) {
			t.Helper()
			start := time.Now()
			for !ok() {
				if time.Since(start) > time.Second {
					t.Fatalf("%s: not seen on replica 2 within 1 s", what)
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("%s: seen on replica 2 after %v", what, time.Since(start).Round(time.Millisecond))
		}
		alice.setTool(wsA, "e2b_list_templates", map[string]any{"enabled": false})
		poll("tool disabled", func() bool { return !slices.Contains(e2eToolNames(t, cs2), "e2b_list_templates") })
		if msg := e2eCallErr(t, cs2, "e2b_list_templates", nil); !strings.Contains(msg, "turned off") {
			t.Errorf("disabled tool on replica 2 = %q", msg)
		}
		alice.setTool(wsA, "e2b_list_templates", map[string]any{"enabled": true})
		poll("tool enabled", func() bool { return slices.Contains(e2eToolNames(t, cs2), "e2b_list_templates") })

		alice.revokeKey(wsA, k.ID)
		poll("key revoked", func() bool {
			resp, _ := e.rawMCP(t, r2.url+"/mcp", e2eBearer(k.Key), "127.0.0.5")
			return resp.StatusCode == http.StatusUnauthorized
		})
		if _, err := cs2.ListTools(context.Background(), nil); err == nil {
			t.Errorf("revoked key's session on replica 2 still lists tools")
		}

		// A member's keys die with their membership, on every replica.
		csC := e.session(t, r2.url+"/mcp", e2eBearer(keyC.Key), "", nil)
		e2eCallOK(t, csC, toolList, nil)
		alice.api(http.MethodDelete, "/api/v1/workspaces/"+wsA+"/members/"+carol.id, nil, http.StatusNoContent)
		poll("member removed", func() bool {
			resp, _ := e.rawMCP(t, r2.url+"/mcp", e2eBearer(keyC.Key), "127.0.0.5")
			return resp.StatusCode == http.StatusUnauthorized
		})
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
		deadline := time.Now().Add(5 * time.Second) // last use is written in batches
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

	t.Run("NoSecretAnywhere", func(t *testing.T) {
		// A sandbox with every kind of secret E2B returns, read through
		// the gateway: get, list, resume (connect mints tokens).
		sb := e.simSandbox(teamA, map[string]any{"secure": true, "network": map[string]any{
			"allowPublicTraffic": false,
			"egressProxy":        map[string]any{"address": "proxy.example:3128", "username": "proxyuser-" + testutil.RandomHex(6), "password": "proxypass-" + testutil.RandomHex(6)},
			"rules":              map[string]any{"api.example.com": []any{map[string]any{"transform": map[string]any{"headers": map[string]any{"Authorization": "Bearer hdr-" + testutil.RandomHex(8)}}}}},
		}})
		cs := e.session(t, r2.url+"/mcp", e2eBearer(keyA.Key), "2025-06-18", nil)
		e2eCallOK(t, cs, "e2b_get_sandbox", map[string]any{"sandbox_id": sb})
		e2eCallOK(t, cs, toolList, nil)
		e2eCallOK(t, cs, "e2b_resume_sandbox", map[string]any{"sandbox_id": sb, "timeout": 600})
		e2eCallOK(t, cs, "e2b_pause_sandbox", map[string]any{"sandbox_id": sb})
		e2eCallOK(t, cs, "e2b_get_sandbox", map[string]any{"sandbox_id": sb})
		e2eCallOK(t, cs, "e2b_resume_sandbox", map[string]any{"sandbox_id": sb})
		// Something for the connector URL's path to be logged.
		e2eCallOK(t, e.session(t, e2eConnectorURL(r2.url, keyA), nil, "", nil), toolList, nil)

		if !e.rec.saw(`\"sandbox_id\":\"` + sb + `\"`) {
			t.Fatalf("the tool outputs were not recorded; the test setup is broken")
		}
		for _, s := range e.sim.Secrets() {
			e.rec.secret(s, "a secret the simulator issued or was given")
		}
		if len(e.rec.secrets) < 10 {
			t.Fatalf("only %d secrets to look for; the test setup is broken", len(e.rec.secrets))
		}
		// Stop the replicas: a clean shutdown writes every queued audit row
		// and the last log lines.
		for _, r := range e.replicas {
			r.stop()
		}
		extra := map[string]string{}
		for i, r := range e.replicas {
			extra[fmt.Sprintf("log of replica %d", i+1)] = r.log.String()
		}
		db := e.dbConn(t)
		for _, table := range []string{"audit_log", "api_keys", "connections", "tool_policies", "spent_tokens"} {
			var text string
			if err := db.QueryRow(context.Background(),
				`SELECT coalesce(string_agg(t::text, E'\n'), '') FROM `+table+` t`).Scan(&text); err != nil {
				t.Fatalf("read %s: %v", table, err)
			}
			extra["table "+table] = text
		}
		// The calls just before the shutdown were written by it.
		var rows int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM audit_log
			WHERE key_id = $1 AND action = 'e2b_resume_sandbox' AND outcome = 'ok'`, keyA.ID).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 2 {
			t.Errorf("audit_log has %d of the 2 resume calls made just before shutdown", rows)
		}
		for _, leak := range e.rec.leaks(extra) {
			t.Error(leak)
		}
		if log := extra["log of replica 2"]; !strings.Contains(log, "/c/[redacted]/mcp") {
			t.Errorf("replica 2's log has no redacted connector URL path; was the request logged?")
		}
	})
}
