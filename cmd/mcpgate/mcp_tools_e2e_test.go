package main

// End-to-end tests of tool policy: a workspace without an E2B key, a tool
// turned off, and the two-step confirmation of kill and of a costly create
// (tokens, input requests and request state).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestMCPEndToEnd_ToolPolicy(t *testing.T) {
	f := newMCPFixture(t)
	e, r1, r2, alice, carol, teamA, wsA := f.e, f.r1, f.r2, f.alice, f.carol, f.teamA, f.wsA

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
	e.noSecretLeaks(t)
}
