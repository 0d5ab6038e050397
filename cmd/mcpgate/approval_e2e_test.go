package main

// End-to-end tests of human approvals, the kill back door and workspace
// guardrails: the real program on two replicas over one database, the E2B
// simulator, dashboard users on the JSON API and go-sdk MCP clients.

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// e2eApproval is what an approval_required result carries.
type e2eApproval struct {
	ID, URL, Text string
}

// e2eRequestApproval calls a tool that needs a person's approval and checks
// that nothing ran and that the model was told where to send the person.
func e2eRequestApproval(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) e2eApproval {
	t.Helper()
	res := e2eCall(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s = tool error %q, want approval_required", tool, testutil.ToolText(res))
	}
	out := e2eStructured(t, res)
	ap := e2eApproval{Text: testutil.ToolText(res)}
	ap.ID, _ = out["approval_id"].(string)
	ap.URL, _ = out["approval_url"].(string)
	if out["status"] != "approval_required" || out["done"] != false || ap.ID == "" ||
		!strings.HasPrefix(ap.URL, e2ePublicURL+"/app/w/") || !strings.HasSuffix(ap.URL, "/approvals/"+ap.ID) {
		t.Fatalf("%s = %v, want approval_required with an approval URL", tool, out)
	}
	if !strings.Contains(ap.Text, ap.URL) || !strings.Contains(ap.Text, ap.ID) || !strings.Contains(ap.Text, "approval_id") {
		t.Errorf("the words for the model = %q, want the URL and how to call again", ap.Text)
	}
	return ap
}

func withArg(args map[string]any, k string, v any) map[string]any {
	out := map[string]any{k: v}
	for ak, av := range args {
		out[ak] = av
	}
	return out
}

func TestApprovalEndToEnd(t *testing.T) {
	e := newE2EEnv(t, 2)
	r1, r2 := e.replicas[0], e.replicas[1]
	alice := e.signup(r1.url, "alice@example.com", "") // owner
	team := e.teamKey()
	ws := alice.workspace("Approvals")
	alice.connectE2B(ws, team)
	invite := func(email, role string) *e2eUser {
		return e.signup(r1.url, email, alice.invite(ws, email, role))
	}
	bob, carol := invite("bob@example.com", "admin"), invite("carol@example.com", "member")
	dave, _ := e.signupWithE2B(r2.url, "dave@example.com") // another workspace
	base := "/api/v1/workspaces/" + ws

	info := alice.setTool(ws, toolKill, map[string]any{"enabled": true})
	if info["approval"] != "human" {
		t.Fatalf("enabled kill = %v, want approval human by default", info)
	}
	keyC := carol.createKey(ws, "carol ai", "full", nil)
	keyA := alice.createKey(ws, "alice ai", "full", nil)
	csC := e.session(t, r1.url+"/mcp", e2eBearer(keyC.Key), "2025-11-25", nil)
	csA := e.session(t, r1.url+"/mcp", e2eBearer(keyA.Key), "2025-11-25", nil)
	running := func(t *testing.T, sb string) {
		t.Helper()
		if state, _ := e.simSandboxState(team, sb); state != "running" {
			t.Fatalf("sandbox %s = %q, want running", sb, state)
		}
	}
	gone := func(t *testing.T, sb string) {
		t.Helper()
		if state, _ := e.simSandboxState(team, sb); state != "" {
			t.Fatalf("sandbox %s = %q, want killed", sb, state)
		}
	}
	killArgs := func(sb string) map[string]any { return map[string]any{"sandbox_id": sb} }

	t.Run("schema offers approval_id", func(t *testing.T) {
		lt, err := csC.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range lt.Tools {
			if tl.Name == toolKill {
				if s, _ := tl.InputSchema.(map[string]any); s == nil || s["properties"].(map[string]any)["approval_id"] == nil {
					t.Errorf("kill schema = %v, want an approval_id argument", tl.InputSchema)
				}
				return
			}
		}
		t.Fatal("kill is not listed")
	})

	t.Run("approved by the key's owner", func(t *testing.T) {
		carol := carol.with(t)
		sb := e.simSandbox(team, map[string]any{"metadata": map[string]any{"purpose": "approval-test"}})
		mark := e.simLog.mark()
		ap := e2eRequestApproval(t, csC, toolKill, killArgs(sb))
		running(t, sb)
		for _, r := range e.simLog.since(mark) {
			if r.method != http.MethodGet {
				t.Errorf("the approval request sent %s %s to E2B, want only reads", r.method, r.path)
			}
		}
		var got struct {
			Summary, State, Tool, RequestedBy string
			RequesterEmail                    string `json:"requested_by_email"`
		}
		carol.decode(carol.api(http.MethodGet, base+"/approvals/"+ap.ID, nil, http.StatusOK), &got)
		if got.State != "pending" || got.Tool != toolKill || got.RequesterEmail != "carol@example.com" ||
			!strings.Contains(got.Summary, "template base") || !strings.Contains(got.Summary, "purpose=approval-test") ||
			!strings.Contains(got.Summary, "running") || !strings.Contains(got.Summary, "started") {
			t.Fatalf("approval as carol sees it = %+v, want pending with template, metadata, age and state", got)
		}
		// Not yet approved: refused, and says what to do.
		if msg := e2eCallErr(t, csC, toolKill, withArg(killArgs(sb), "approval_id", ap.ID)); !strings.Contains(msg, "nobody has approved") {
			t.Errorf("use before approval = %q", msg)
		}
		// The MCP key never decides: the API wants a session.
		req, _ := http.NewRequest(http.MethodPost, r1.url+base+"/approvals/"+ap.ID+"/approve", nil)
		req.Header.Set("Authorization", "Bearer "+keyC.Key)
		if resp, err := e.httpClient(nil, "").Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("approve with the MCP key = %v, %v; want 401", resp, err)
		}
		// Without the CSRF header: refused.
		noCSRF, _ := http.NewRequest(http.MethodPost, r1.url+base+"/approvals/"+ap.ID+"/approve", nil)
		if resp, err := carol.client.Do(noCSRF); err != nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("approve without CSRF = %v, %v; want 403", resp, err)
		}
		// Approved on replica 2, used on replica 1.
		carol2 := *carol
		carol2.base = r2.url
		carol2.api(http.MethodPost, base+"/approvals/"+ap.ID+"/approve", nil, http.StatusOK)
		out := e2eCallOK(t, csC, toolKill, withArg(killArgs(sb), "approval_id", ap.ID))
		if out["killed"] != true {
			t.Fatalf("approved kill = %v", out)
		}
		gone(t, sb)

		t.Run("replay", func(t *testing.T) {
			mark := e.simLog.mark()
			csR2 := e.session(t, r2.url+"/mcp", e2eBearer(keyC.Key), "", nil)
			if msg := e2eCallErr(t, csR2, toolKill, withArg(killArgs(sb), "approval_id", ap.ID)); !strings.Contains(msg, "already used") {
				t.Errorf("replay = %q, want already used", msg)
			}
			if reqs := e.simLog.since(mark); len(reqs) != 0 {
				t.Errorf("the replay reached E2B: %v", reqs)
			}
		})
	})

	t.Run("approved by an admin", func(t *testing.T) {
		sb := e.simSandbox(team, nil)
		ap := e2eRequestApproval(t, csC, toolKill, killArgs(sb))
		var decided struct {
			State          string `json:"state"`
			DecidedByEmail string `json:"decided_by_email"`
		}
		bob.with(t).decode(bob.with(t).api(http.MethodPost, base+"/approvals/"+ap.ID+"/approve", nil, http.StatusOK), &decided)
		if decided.State != "approved" || decided.DecidedByEmail != "bob@example.com" {
			t.Fatalf("approve by admin = %+v", decided)
		}
		e2eCallOK(t, csC, toolKill, withArg(killArgs(sb), "approval_id", ap.ID))
		gone(t, sb)
		alice.auditUntil(ws, "action=approval.approved", func(items []e2eAuditItem) bool {
			return slices.ContainsFunc(items, func(it e2eAuditItem) bool {
				return it.ActorID == bob.id && it.Arguments["approval"] == ap.ID
			})
		})
	})

	t.Run("a member who did not ask cannot", func(t *testing.T) {
		carol := carol.with(t)
		sb := e.simSandbox(team, nil)
		ap := e2eRequestApproval(t, csA, toolKill, killArgs(sb))
		carol.api(http.MethodPost, base+"/approvals/"+ap.ID+"/approve", nil, http.StatusForbidden)
		carol.api(http.MethodPost, base+"/approvals/"+ap.ID+"/deny", nil, http.StatusForbidden)
		carol.api(http.MethodGet, base+"/approvals/"+ap.ID, nil, http.StatusForbidden)
		var list struct {
			Approvals []struct {
				ID string `json:"id"`
			} `json:"approvals"`
		}
		carol.decode(carol.api(http.MethodGet, base+"/approvals", nil, http.StatusOK), &list)
		if slices.ContainsFunc(list.Approvals, func(a struct {
			ID string `json:"id"`
		}) bool {
			return a.ID == ap.ID
		}) {
			t.Errorf("carol's list shows alice's request")
		}
		if msg := e2eCallErr(t, csA, toolKill, withArg(killArgs(sb), "approval_id", ap.ID)); !strings.Contains(msg, "nobody has approved") {
			t.Errorf("use after refused approvals = %q", msg)
		}
		running(t, sb)
	})

	t.Run("another workspace gets 404", func(t *testing.T) {
		dave := dave.with(t)
		sb := e.simSandbox(team, nil)
		ap := e2eRequestApproval(t, csA, toolKill, killArgs(sb))
		for _, tt := range []struct{ method, path string }{
			{http.MethodGet, base + "/approvals/" + ap.ID},
			{http.MethodPost, base + "/approvals/" + ap.ID + "/approve"},
			{http.MethodPost, base + "/approvals/" + ap.ID + "/deny"},
			{http.MethodGet, base + "/approvals"},
			{http.MethodGet, base + "/guardrails"},
			{http.MethodPut, base + "/guardrails"},
			{http.MethodGet, "/api/v1/workspaces/" + dave.personal + "/approvals/" + ap.ID},
			{http.MethodPost, "/api/v1/workspaces/" + dave.personal + "/approvals/" + ap.ID + "/approve"},
			{http.MethodPost, "/api/v1/workspaces/" + dave.personal + "/approvals/" + ap.ID + "/deny"},
		} {
			var body any
			if tt.method == http.MethodPut {
				body = map[string]any{"max_running": 1}
			}
			if status, raw := dave.do(context.Background(), tt.method, tt.path, body); status != http.StatusNotFound {
				t.Errorf("dave %s %s = %d %s, want 404", tt.method, tt.path, status, raw)
			}
		}
		var list struct {
			Approvals []any `json:"approvals"`
		}
		dave.decode(dave.api(http.MethodGet, "/api/v1/workspaces/"+dave.personal+"/approvals", nil, http.StatusOK), &list)
		if len(list.Approvals) != 0 {
			t.Errorf("dave's workspace lists %d approvals, want 0", len(list.Approvals))
		}
		// dave's own key cannot use it either.
		keyD := dave.createKey(dave.personal, "dave ai", "full", nil)
		dave.setTool(dave.personal, toolKill, map[string]any{"enabled": true})
		alice.with(t).api(http.MethodPost, base+"/approvals/"+ap.ID+"/approve", nil, http.StatusOK)
		csD := e.session(t, r2.url+"/mcp", e2eBearer(keyD.Key), "", nil)
		if msg := e2eCallErr(t, csD, toolKill, withArg(killArgs(sb), "approval_id", ap.ID)); !strings.Contains(msg, "no approval") {
			t.Errorf("another workspace's key using it = %q", msg)
		}
		running(t, sb)
	})

	t.Run("mismatched arguments and key", func(t *testing.T) {
		sb, other := e.simSandbox(team, nil), e.simSandbox(team, nil)
		ap := e2eRequestApproval(t, csA, toolKill, killArgs(sb))
		alice.with(t).api(http.MethodPost, base+"/approvals/"+ap.ID+"/approve", nil, http.StatusOK)
		if msg := e2eCallErr(t, csA, toolKill, withArg(killArgs(other), "approval_id", ap.ID)); !strings.Contains(msg, "different call") {
			t.Errorf("other arguments = %q", msg)
		}
		keyA2 := alice.with(t).createKey(ws, "alice second", "full", nil)
		csA2 := e.session(t, r1.url+"/mcp", e2eBearer(keyA2.Key), "", nil)
		if msg := e2eCallErr(t, csA2, toolKill, withArg(killArgs(sb), "approval_id", ap.ID)); !strings.Contains(msg, "different call") {
			t.Errorf("another key of the same person = %q", msg)
		}
		running(t, sb)
		running(t, other)
		// Still good for the exact call.
		e2eCallOK(t, csA, toolKill, withArg(killArgs(sb), "approval_id", ap.ID))
		gone(t, sb)
	})

	t.Run("denied", func(t *testing.T) {
		sb := e.simSandbox(team, nil)
		ap := e2eRequestApproval(t, csC, toolKill, killArgs(sb))
		carol.with(t).api(http.MethodPost, base+"/approvals/"+ap.ID+"/deny", nil, http.StatusOK)
		carol.with(t).api(http.MethodPost, base+"/approvals/"+ap.ID+"/approve", nil, http.StatusConflict)
		if msg := e2eCallErr(t, csC, toolKill, withArg(killArgs(sb), "approval_id", ap.ID)); !strings.Contains(msg, "carol@example.com denied") {
			t.Errorf("denied = %q", msg)
		}
		running(t, sb)
	})

	t.Run("expired", func(t *testing.T) {
		sb := e.simSandbox(team, nil)
		ap := e2eRequestApproval(t, csC, toolKill, killArgs(sb))
		carol.with(t).api(http.MethodPost, base+"/approvals/"+ap.ID+"/approve", nil, http.StatusOK)
		db := e.dbConn(t)
		if _, err := db.Exec(context.Background(), `UPDATE approvals SET expires_at = now() - interval '1 second' WHERE id = $1`, ap.ID); err != nil {
			t.Fatal(err)
		}
		if msg := e2eCallErr(t, csC, toolKill, withArg(killArgs(sb), "approval_id", ap.ID)); !strings.Contains(msg, "expired") {
			t.Errorf("expired = %q", msg)
		}
		running(t, sb)
		var list struct {
			Approvals []struct {
				ID string `json:"id"`
			} `json:"approvals"`
		}
		carol.with(t).decode(carol.with(t).api(http.MethodGet, base+"/approvals?state=expired", nil, http.StatusOK), &list)
		if len(list.Approvals) == 0 || list.Approvals[0].ID != ap.ID {
			t.Errorf("expired list = %v, want %s", list, ap.ID)
		}
		carol.with(t).api(http.MethodGet, base+"/approvals?state=bogus", nil, http.StatusBadRequest)
	})

	t.Run("2026-07-28 URL input request", func(t *testing.T) {
		sb := e.simSandbox(team, nil)
		var mu sync.Mutex
		var asked []*mcp.ElicitParams
		carol := carol.with(t)
		cs := e.session(t, r1.url+"/mcp", e2eBearer(keyC.Key), "", &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				mu.Lock()
				asked = append(asked, req.Params)
				mu.Unlock()
				// The person opens the page and approves it there.
				id := req.Params.URL[strings.LastIndex(req.Params.URL, "/")+1:]
				carol.api(http.MethodPost, base+"/approvals/"+id+"/approve", nil, http.StatusOK)
				return &mcp.ElicitResult{Action: "accept"}, nil
			}})
		out := e2eCallOK(t, cs, toolKill, killArgs(sb))
		if out["killed"] != true {
			t.Fatalf("kill after the URL input request = %v", out)
		}
		gone(t, sb)
		if len(asked) != 1 || asked[0].Mode != "url" || !strings.HasPrefix(asked[0].URL, e2ePublicURL+"/app/w/"+ws+"/approvals/") ||
			asked[0].ElicitationID == "" || !strings.Contains(asked[0].Message, sb) {
			t.Fatalf("input requests = %+v, want one URL-mode request for the approval page", asked)
		}

		// A client that declares only forms gets the text.
		csForm := e.session(t, r1.url+"/mcp", e2eBearer(keyC.Key), "", &mcp.ClientOptions{
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				t.Error("a form-only client got an input request for a human approval")
				return &mcp.ElicitResult{Action: "decline"}, nil
			}})
		e2eRequestApproval(t, csForm, toolKill, killArgs(e.simSandbox(team, nil)))

		// Declining the URL leaves nothing done.
		sb2 := e.simSandbox(team, nil)
		csDecline := e.session(t, r1.url+"/mcp", e2eBearer(keyC.Key), "", &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}})
		res := e2eCall(t, csDecline, toolKill, killArgs(sb2))
		if res.IsError || !strings.Contains(testutil.ToolText(res), "Not done") {
			t.Errorf("declined URL request = %q", testutil.ToolText(res))
		}
		running(t, sb2)
	})

	t.Run("secret arguments", func(t *testing.T) {
		alice := alice.with(t)
		alice.setTool(ws, toolCreate, map[string]any{"approval": "human"})
		cs := e.session(t, r1.url+"/mcp", e2eBearer(keyA.Key), "2025-11-25", nil)
		secret := "approval-env-" + testutil.RandomHex(12)
		e.rec.secret(secret, "env_vars value of a call waiting for approval")
		args := map[string]any{"timeout": 60, "env_vars": map[string]any{"TOKEN": secret}}
		ap := e2eRequestApproval(t, cs, toolCreate, args)
		var got struct {
			Arguments map[string]any `json:"arguments"`
		}
		alice.decode(alice.api(http.MethodGet, base+"/approvals/"+ap.ID, nil, http.StatusOK), &got)
		if env, _ := got.Arguments["env_vars"].(map[string]any); env["TOKEN"] != "[redacted]" {
			t.Errorf("approval arguments = %v, want env_vars redacted", got.Arguments)
		}
		alice.api(http.MethodPost, base+"/approvals/"+ap.ID+"/approve", nil, http.StatusOK)
		// Another secret is another call.
		other := map[string]any{"timeout": 60, "env_vars": map[string]any{"TOKEN": secret + "x"}}
		if msg := e2eCallErr(t, cs, toolCreate, withArg(other, "approval_id", ap.ID)); !strings.Contains(msg, "different call") {
			t.Errorf("other secret value = %q", msg)
		}
		out := e2eCallOK(t, cs, toolCreate, withArg(args, "approval_id", ap.ID))
		if id, _ := out["sandbox_id"].(string); id == "" {
			t.Fatalf("approved create = %v", out)
		}
		alice.setTool(ws, toolCreate, map[string]any{"approval": "none"})
		var text string
		if err := e.dbConn(t).QueryRow(context.Background(),
			`SELECT coalesce(string_agg(a::text, E'\n'), '') FROM approvals a`).Scan(&text); err != nil {
			t.Fatal(err)
		}
		leaks := e.rec.leaks(map[string]string{"table approvals": text, "log of replica 1": r1.log.String(),
			"log of replica 2": r2.log.String()})
		for _, leak := range leaks {
			if strings.Contains(leak, "waiting for approval") {
				t.Error(leak)
			}
		}
	})

	t.Run("audit", func(t *testing.T) {
		alice.with(t).auditUntil(ws, "kind=admin", func(items []e2eAuditItem) bool {
			seen := map[string]bool{}
			for _, it := range items {
				seen[it.Action] = true
			}
			for _, a := range []string{"approval.requested", "approval.approved", "approval.denied", "approval.expired", "approval.used"} {
				if !seen[a] {
					return false
				}
			}
			return true
		})
	})
}

func TestApprovalBackDoorAndGuardrails(t *testing.T) {
	e := newE2EEnv(t, 1)
	r1 := e.replicas[0]
	alice, team := e.signupWithE2B(r1.url, "alice@example.com")
	ws := alice.personal
	carol := e.signup(r1.url, "carol@example.com", alice.invite(ws, "carol@example.com", "member"))
	key := carol.createKey(ws, "carol ai", "full", nil)
	cs := e.session(t, r1.url+"/mcp", e2eBearer(key.Key), "", nil)
	end := func(sb string) string { _, endAt := e.simSandboxState(team, sb); return endAt }

	t.Run("timeout back door while kill is off", func(t *testing.T) {
		sb := e.simSandbox(team, map[string]any{"timeout": 3600})
		before := end(sb)
		mark := e.simLog.mark()
		msg := e2eCallErr(t, cs, "e2b_set_sandbox_timeout", map[string]any{"sandbox_id": sb, "timeout": 60})
		if !strings.Contains(msg, "not auto-paused") || !strings.Contains(msg, "e2b_kill_sandbox, which is turned off") ||
			!strings.Contains(msg, "owner or admin") {
			t.Errorf("shortening = %q, want it refused, saying why and who can enable kill", msg)
		}
		if after := end(sb); after != before {
			t.Errorf("end time %s -> %s, want unchanged", before, after)
		}
		for _, r := range e.simLog.since(mark) {
			if r.method != http.MethodGet {
				t.Errorf("the refused call sent %s %s", r.method, r.path)
			}
		}
		// Extending is fine; shortening an auto-paused sandbox is too.
		e2eCallOK(t, cs, "e2b_set_sandbox_timeout", map[string]any{"sandbox_id": sb, "timeout": 7200})
		ap := e.simSandbox(team, map[string]any{"timeout": 3600, "autoPause": true})
		e2eCallOK(t, cs, "e2b_set_sandbox_timeout", map[string]any{"sandbox_id": ap, "timeout": 60})
		// Resuming a paused, kill-at-timeout sandbox for seconds is a kill too.
		if status, _ := e.simDo(team, http.MethodPost, "/sandboxes/"+sb+"/pause", map[string]any{}); status >= 300 {
			t.Fatalf("pause = %d", status)
		}
		if msg := e2eCallErr(t, cs, "e2b_resume_sandbox", map[string]any{"sandbox_id": sb, "timeout": 5}); !strings.Contains(msg, "turned off") {
			t.Errorf("resume for 5 s = %q, want refused", msg)
		}
		e2eCallOK(t, cs, "e2b_resume_sandbox", map[string]any{"sandbox_id": sb, "timeout": 600})
	})

	t.Run("timeout back door while kill is on follows kill's approval", func(t *testing.T) {
		alice.with(t).setTool(ws, toolKill, map[string]any{"enabled": true})
		cs := e.session(t, r1.url+"/mcp", e2eBearer(key.Key), "", nil)
		sb := e.simSandbox(team, map[string]any{"timeout": 3600})
		before := end(sb)
		args := map[string]any{"sandbox_id": sb, "timeout": 60}
		ap := e2eRequestApproval(t, cs, "e2b_set_sandbox_timeout", args)
		if end(sb) != before {
			t.Fatal("the approval request changed the end time")
		}
		carol.with(t).api(http.MethodPost, "/api/v1/workspaces/"+ws+"/approvals/"+ap.ID+"/approve", nil, http.StatusOK)
		e2eCallOK(t, cs, "e2b_set_sandbox_timeout", withArg(args, "approval_id", ap.ID))
		if end(sb) == before {
			t.Error("the approved call did not change the end time")
		}
		// With kill on model, the confirmation token is asked for instead.
		alice.with(t).setTool(ws, toolKill, map[string]any{"approval": "model"})
		cs = e.session(t, r1.url+"/mcp", e2eBearer(key.Key), "2025-11-25", nil)
		sb2 := e.simSandbox(team, nil)
		out := e2eCallOK(t, cs, "e2b_set_sandbox_timeout", map[string]any{"sandbox_id": sb2, "timeout": 60})
		tok, _ := out["confirmation_token"].(string)
		if out["status"] != "confirmation_required" || tok == "" || !strings.Contains(out["would_do"].(string), "not auto-paused") {
			t.Fatalf("shortening with kill on model = %v, want a confirmation that says why", out)
		}
		before = end(sb2)
		e2eCallOK(t, cs, "e2b_set_sandbox_timeout", map[string]any{"sandbox_id": sb2, "timeout": 60, "confirmation_token": tok})
		if end(sb2) == before {
			t.Error("the confirmed call did not change the end time")
		}
		alice.with(t).setTool(ws, toolKill, map[string]any{"enabled": false})
	})

	t.Run("guardrails", func(t *testing.T) {
		alice, carol := alice.with(t), carol.with(t)
		gpath := "/api/v1/workspaces/" + ws + "/guardrails"
		var g map[string]any
		alice.decode(alice.api(http.MethodGet, gpath, nil, http.StatusOK), &g)
		if g["max_timeout_seconds"] != 0.0 || g["max_running"] != 0.0 || len(g["allowed_templates"].([]any)) != 0 {
			t.Fatalf("default guardrails = %v, want none", g)
		}
		carol.api(http.MethodPut, gpath, map[string]any{"max_running": 1}, http.StatusForbidden)
		alice.api(http.MethodPut, gpath, map[string]any{"max_running": -1}, http.StatusBadRequest)
		// Count what runs now, so the limit is two more.
		list := e2eCallOK(t, cs, toolList, map[string]any{"state": "running"})
		now := int(list["total_running"].(float64))
		alice.api(http.MethodPut, gpath, map[string]any{"max_timeout_seconds": 600, "max_running": now + 2,
			"allowed_templates": []string{"base"}}, http.StatusOK)
		cs := e.session(t, r1.url+"/mcp", e2eBearer(key.Key), "", nil)

		mark := e.simLog.mark()
		if msg := e2eCallErr(t, cs, toolCreate, map[string]any{"timeout": 601}); !strings.Contains(msg, "at most 600 seconds") {
			t.Errorf("create over the timeout = %q", msg)
		}
		if msg := e2eCallErr(t, cs, toolCreate, map[string]any{"template_id": "code-interpreter-v1", "timeout": 60}); !strings.Contains(msg, "allows only these templates: base") {
			t.Errorf("create from another template = %q", msg)
		}
		sb := e.simSandbox(team, map[string]any{"timeout": 300})
		if msg := e2eCallErr(t, cs, "e2b_set_sandbox_timeout", map[string]any{"sandbox_id": sb, "timeout": 3600}); !strings.Contains(msg, "at most 600 seconds") {
			t.Errorf("set timeout over the limit = %q", msg)
		}
		if msg := e2eCallErr(t, cs, "e2b_resume_sandbox", map[string]any{"sandbox_id": sb, "timeout": 3600}); !strings.Contains(msg, "at most 600 seconds") {
			t.Errorf("resume over the limit = %q", msg)
		}
		for _, r := range e.simLog.since(mark) {
			if r.method != http.MethodGet {
				t.Errorf("a refused call sent %s %s to E2B", r.method, r.path)
			}
		}
		// sb made one more; one create is still within the limit.
		e2eCallOK(t, cs, toolCreate, map[string]any{"timeout": 60})
		if msg := e2eCallErr(t, cs, toolCreate, map[string]any{"timeout": 60}); !strings.Contains(msg, "running and this workspace lets AI clients run at most") {
			t.Errorf("create beyond the running limit = %q", msg)
		}
		// Pausing frees a slot for a create, but not resume of the paused
		// one when that would exceed it again.
		if status, _ := e.simDo(team, http.MethodPost, "/sandboxes/"+sb+"/pause", map[string]any{}); status >= 300 {
			t.Fatalf("pause = %d", status)
		}
		e2eCallOK(t, cs, toolCreate, map[string]any{"timeout": 60})
		if msg := e2eCallErr(t, cs, "e2b_resume_sandbox", map[string]any{"sandbox_id": sb, "timeout": 60}); !strings.Contains(msg, "run at most") {
			t.Errorf("resume beyond the running limit = %q", msg)
		}
		alice.auditUntil(ws, "action=guardrail.refused", func(items []e2eAuditItem) bool { return len(items) >= 6 })
		// Back to no limits: the same calls run.
		alice.api(http.MethodPut, gpath, map[string]any{}, http.StatusOK)
		cs = e.session(t, r1.url+"/mcp", e2eBearer(key.Key), "", nil)
		e2eCallOK(t, cs, "e2b_resume_sandbox", map[string]any{"sandbox_id": sb, "timeout": 3600})
	})
}
