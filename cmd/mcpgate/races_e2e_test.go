package main

// End-to-end tests of the races between calls on two real replicas over one
// database: a hold in front of the E2B simulator keeps the first call's
// request, as a slow network would, until the second call has reached E2B
// (nothing orders them) or waits for the first's lock.

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// e2eHold holds the first gateway request to the simulator that match
// accepts until Release.
type e2eHold struct {
	arrived, release chan struct{}
	once             sync.Once
	taken            atomic.Bool
}

func (e *e2eEnv) holdFirst(t *testing.T, match func(*http.Request) bool) *e2eHold {
	h := &e2eHold{arrived: make(chan struct{}), release: make(chan struct{})}
	e.simLog.mu.Lock()
	e.simLog.hold = func(r *http.Request) {
		if match(r) && h.taken.CompareAndSwap(false, true) {
			close(h.arrived)
			<-h.release
		}
	}
	e.simLog.mu.Unlock()
	t.Cleanup(h.Release) // never leave a request held: the servers' Close waits for it
	return h
}

// Release lets the held request through.
func (h *e2eHold) Release() { h.once.Do(func() { close(h.release) }) }

// e2eGoCall calls a tool in the background.
func e2eGoCall(cs *mcp.ClientSession, name string, args map[string]any) <-chan *mcp.CallToolResult {
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "protocol error: " + err.Error()}}}
		}
		done <- res
	}()
	return done
}

func (e *e2eEnv) simRequests(mark int, match func(e2eSimRequest) bool) int {
	n := 0
	for _, r := range e.simLog.since(mark) {
		if match(r) {
			n++
		}
	}
	return n
}

func TestRacesEndToEnd(t *testing.T) {
	e := newE2EEnv(t, 2)
	r1, r2 := e.replicas[0], e.replicas[1]
	alice, team := e.signupWithE2B(r1.url, "alice@example.com")
	ws := alice.personal
	key := alice.createKey(ws, "ai", "full", nil)
	cs1 := e.session(t, r1.url+"/mcp", e2eBearer(key.Key), "2025-11-25", nil)
	cs2 := e.session(t, r2.url+"/mcp", e2eBearer(key.Key), "2025-11-25", nil)
	db, err := store.Open(context.Background(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	waiting := func() bool { return storetest.WaitingLocks(t, db) > 0 }

	t.Run("ten creates against max_running 3", func(t *testing.T) {
		alice.with(t).api(http.MethodPut, "/api/v1/workspaces/"+ws+"/guardrails",
			map[string]any{"max_timeout_seconds": 0, "max_running": 3, "allowed_templates": []string{}}, http.StatusOK)
		// Both replicas hold the limit before the creates: the one that
		// did not take the PUT serves its cached guardrails (none) until
		// the change's notification arrives, which a loaded machine can
		// delay past the first calls.
		e.waitApplied(t)
		isCreate := func(method, path string) bool {
			return method == http.MethodPost && (path == "/sandboxes" || path == "/v2/sandboxes")
		}
		mark := e.simLog.mark()
		hold := e.holdFirst(t, func(r *http.Request) bool { return isCreate(r.Method, r.URL.Path) })
		var calls []<-chan *mcp.CallToolResult
		for i := range 10 {
			calls = append(calls, e2eGoCall([]*mcp.ClientSession{cs1, cs2}[i%2], toolCreate, map[string]any{"timeout": 3600}))
		}
		<-hold.arrived
		storetest.Until(t, "another create to wait for the lock or reach E2B", func() bool {
			return waiting() || e.simRequests(mark, func(r e2eSimRequest) bool { return isCreate(r.method, r.path) }) > 1
		})
		hold.Release()
		started := 0
		for _, c := range calls {
			res := <-c
			switch text := testutil.ToolText(res); {
			case !res.IsError:
				started++
			case !strings.Contains(text, "3 are running"):
				t.Errorf("create = %q, want started or refused at the limit", text)
			}
		}
		if n := e.simRequests(mark, func(r e2eSimRequest) bool { return isCreate(r.method, r.path) }); started != 3 || n != 3 {
			t.Errorf("%d started, %d creates sent to E2B; want 3 and 3", started, n)
		}
		alice.with(t).api(http.MethodPut, "/api/v1/workspaces/"+ws+"/guardrails",
			map[string]any{"max_timeout_seconds": 0, "max_running": 0, "allowed_templates": []string{}}, http.StatusOK)
	})

	t.Run("an extension overtaken", func(t *testing.T) {
		sb := e.simSandbox(team, map[string]any{"timeout": 100})
		mark := e.simLog.mark()
		hold := e.holdFirst(t, func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/timeout") })
		timeout := e2eGoCall(cs1, e2b.ToolSetSandboxTimeout, map[string]any{"sandbox_id": sb, "timeout": 300})
		<-hold.arrived
		resume := e2eGoCall(cs2, e2b.ToolResumeSandbox, map[string]any{"sandbox_id": sb, "timeout": 3600})
		storetest.Until(t, "the resume to wait for the lock or reach E2B", func() bool {
			return waiting() || e.simRequests(mark, func(r e2eSimRequest) bool { return strings.HasSuffix(r.path, "/connect") }) > 0
		})
		hold.Release()
		for _, c := range []<-chan *mcp.CallToolResult{timeout, resume} {
			if res := <-c; res.IsError {
				t.Fatalf("call = %q", testutil.ToolText(res))
			}
		}
		state, endAt := e.simSandboxState(team, sb)
		end, err := time.Parse(time.RFC3339Nano, endAt)
		if err != nil || state != "running" || time.Until(end) < 50*time.Minute {
			t.Errorf("sandbox %s ends at %s (%v), want running for the hour the later resume asked", state, endAt, err)
		}
	})
}
