package main

// End-to-end test of the approval wait: the real program on two replicas
// over one database, the E2B simulator, dashboard users on the JSON API and
// go-sdk MCP clients. A call waits on replica 1; a person approves on
// replica 2; replica 1 hears it through the database's notification and the
// same call returns the kill's real result.

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// e2eWaitingCall is a tool call with a progress token, running in the
// background, and the progress notifications its client received.
type e2eWaitingCall struct {
	progress chan *mcp.ProgressNotificationParams
	done     chan e2eCallResult
}

type e2eCallResult struct {
	res *mcp.CallToolResult
	err error
}

// e2eProgressSession is a session whose progress notifications go to the
// call that asked for them (calls, by token).
func (e *e2eEnv) e2eProgressSession(t *testing.T, url, key, version string, calls *sync.Map) *mcp.ClientSession {
	return e.session(t, url+"/mcp", e2eBearer(key), version, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if c, ok := calls.Load(req.Params.ProgressToken); ok {
				c.(*e2eWaitingCall).progress <- req.Params
			}
		}})
}

func e2eStartWaiting(ctx context.Context, cs *mcp.ClientSession, calls *sync.Map, token, tool string, args map[string]any) *e2eWaitingCall {
	c := &e2eWaitingCall{progress: make(chan *mcp.ProgressNotificationParams, 64), done: make(chan e2eCallResult, 1)}
	calls.Store(token, c)
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	p.SetProgressToken(token)
	go func() {
		res, err := cs.CallTool(ctx, p)
		c.done <- e2eCallResult{res, err}
	}()
	return c
}

// waiting returns the approval the call waits for, from its first progress
// notification (the page where a person decides).
func (c *e2eWaitingCall) waiting(t *testing.T) string {
	t.Helper()
	select {
	case p := <-c.progress:
		i := strings.Index(p.Message, e2ePublicURL+"/app/w/")
		if i < 0 || !strings.Contains(p.Message, "Waiting for a person") || p.Total != 55 {
			t.Fatalf("progress = %+v, want the approval page and a 55 s wait", p)
		}
		url := p.Message[i:]
		return url[strings.LastIndex(url, "/")+1:]
	case r := <-c.done:
		t.Fatalf("the call ended before it waited: %v %v", testutil.ToolText(r.res), r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("no progress notification")
	}
	return ""
}

func (c *e2eWaitingCall) result(t *testing.T) e2eCallResult {
	t.Helper()
	select {
	case r := <-c.done:
		return r
	case <-time.After(50 * time.Second):
		t.Fatal("the waiting call did not return")
	}
	return e2eCallResult{}
}

func TestApprovalWaitEndToEnd(t *testing.T) {
	e := newE2EEnv(t, 2)
	r1, r2 := e.replicas[0], e.replicas[1]
	alice := e.signup(r1.url, "alice@example.com", "") // owner
	team := e.teamKey()
	ws := alice.workspace("Waits")
	alice.connectE2B(ws, team)
	carol := e.signup(r1.url, "carol@example.com", alice.invite(ws, "carol@example.com", "member"))
	base := "/api/v1/workspaces/" + ws
	alice.setTool(ws, toolKill, map[string]any{"enabled": true})
	var set struct {
		Wait int `json:"approval_wait_seconds"`
	}
	alice.decode(alice.api(http.MethodPatch, base, map[string]any{"approval_wait_seconds": 55}, http.StatusOK), &set)
	if set.Wait != 55 {
		t.Fatalf("PATCH approval_wait_seconds = %d, want 55", set.Wait)
	}
	// Set on replica 1, seen on replica 2.
	alice2 := *alice
	alice2.base = r2.url
	alice2.decode(alice2.api(http.MethodGet, base, nil, http.StatusOK), &set)
	if set.Wait != 55 {
		t.Fatalf("GET on replica 2 approval_wait_seconds = %d, want 55", set.Wait)
	}
	key := carol.createKey(ws, "carol agent", "full", nil)
	carol2 := *carol
	carol2.base = r2.url
	calls := &sync.Map{} // progress token -> *e2eWaitingCall
	gone := func(t *testing.T, sb string) {
		t.Helper()
		if state, _ := e.simSandboxState(team, sb); state != "" {
			t.Fatalf("sandbox %s = %q, want killed", sb, state)
		}
	}

	t.Run("approved on the other replica", func(t *testing.T) {
		cs := e.e2eProgressSession(t, r1.url, key.Key, "", calls)
		sb := e.simSandbox(team, nil)
		call := e2eStartWaiting(context.Background(), cs, calls, "kill-1", toolKill, map[string]any{"sandbox_id": sb})
		id := call.waiting(t)
		if state, _ := e.simSandboxState(team, sb); state != "running" {
			t.Fatalf("sandbox %s = %q while the call waits, want running", sb, state)
		}
		carol2.with(t).api(http.MethodPost, base+"/approvals/"+id+"/approve", nil, http.StatusOK)
		r := call.result(t)
		if r.err != nil || r.res.IsError {
			t.Fatalf("waiting call = %v %q, want the kill's result", r.err, testutil.ToolText(r.res))
		}
		if out := e2eStructured(t, r.res); out["killed"] != true {
			t.Fatalf("waiting call = %v, want killed", out)
		}
		gone(t, sb)
		alice.auditUntil(ws, "action=approval.used", func(items []e2eAuditItem) bool {
			return slices.ContainsFunc(items, func(it e2eAuditItem) bool { return it.Arguments["approval"] == id })
		})
	})

	t.Run("denied on the other replica", func(t *testing.T) {
		cs := e.e2eProgressSession(t, r1.url, key.Key, "2025-11-25", calls)
		sb := e.simSandbox(team, nil)
		call := e2eStartWaiting(context.Background(), cs, calls, "kill-2", toolKill, map[string]any{"sandbox_id": sb})
		id := call.waiting(t)
		alice2.with(t).api(http.MethodPost, base+"/approvals/"+id+"/deny", nil, http.StatusOK)
		r := call.result(t)
		if r.err != nil || !r.res.IsError || !strings.Contains(testutil.ToolText(r.res), "denied this call") {
			t.Fatalf("waiting call = %v %q, want a tool error saying a person denied it", r.err, testutil.ToolText(r.res))
		}
		if state, _ := e.simSandboxState(team, sb); state != "running" {
			t.Fatalf("sandbox %s = %q after a denial, want running", sb, state)
		}
	})

	t.Run("the client goes away", func(t *testing.T) {
		cs := e.e2eProgressSession(t, r1.url, key.Key, "2025-11-25", calls)
		sb := e.simSandbox(team, nil)
		ctx, cancel := context.WithCancel(context.Background())
		call := e2eStartWaiting(ctx, cs, calls, "kill-3", toolKill, map[string]any{"sandbox_id": sb})
		id := call.waiting(t)
		cancel()
		if r := call.result(t); r.err == nil {
			t.Fatalf("cancelled call = %q, want an error", testutil.ToolText(r.res))
		}
		// Still pending: approved later on replica 2, the retry with
		// approval_id on replica 1 runs.
		var ap struct {
			State string `json:"state"`
		}
		carol2.with(t).decode(carol2.with(t).api(http.MethodGet, base+"/approvals/"+id, nil, http.StatusOK), &ap)
		if ap.State != "pending" {
			t.Fatalf("approval after the client left = %q, want pending", ap.State)
		}
		carol2.with(t).api(http.MethodPost, base+"/approvals/"+id+"/approve", nil, http.StatusOK)
		cs2 := e.session(t, r1.url+"/mcp", e2eBearer(key.Key), "2025-11-25", nil)
		if out := e2eCallOK(t, cs2, toolKill, map[string]any{"sandbox_id": sb, "approval_id": id}); out["killed"] != true {
			t.Fatalf("retry with approval_id = %v, want killed", out)
		}
		gone(t, sb)
	})

	for _, leak := range e.rec.leaks(map[string]string{"log of replica 1": r1.log.String(), "log of replica 2": r2.log.String()}) {
		t.Error(leak)
	}
}
