package main

// End-to-end tests of what each tenant and each member sees: the audit log
// of tool calls (secrets redacted, a member sees their own calls, filters)
// and workspace isolation (every tool and every workspace route, used from
// workspace A, reaches nothing of workspace B).

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestMCPEndToEnd_Tenancy(t *testing.T) {
	f := newMCPFixture(t)
	e, r1, r2, alice, bob, carol, teamA, teamB, wsA, wsB, keyA, keyB, keyC := f.e, f.r1, f.r2, f.alice, f.bob, f.carol, f.teamA, f.teamB, f.wsA, f.wsB, f.keyA, f.keyB, f.keyC

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
	e.noSecretLeaks(t)
}
