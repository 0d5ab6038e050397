package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// Races between calls that change one sandbox, driven
// deterministically. A proxy in front of e2bsim holds the first call's
// request to E2B, as a slow network would, until the second call has either
// reached E2B (nothing orders the two) or is waiting for the first (the
// gateway's lock); then it lets the first through. Every race is run with
// both calls on one gateway and on two gateways (replicas) sharing the
// database.

// holdingProxy forwards to E2B, holding the first request of the route
// hold names until release is called.
type holdingProxy struct {
	next    http.Handler
	mu      sync.Mutex
	hold    string
	held    bool
	arrived chan struct{}
	release chan struct{}
	// released closes release once.
	released func()
	seen     map[string]int
}

func newHoldingProxy(next http.Handler) *holdingProxy {
	return &holdingProxy{next: next, seen: map[string]int{}}
}

// holdFirst arms the proxy: the next request of route waits for release.
func (p *holdingProxy) holdFirst(route string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold, p.held = route, false
	p.arrived, p.release = make(chan struct{}), make(chan struct{})
	p.released = sync.OnceFunc(func() { close(p.release) })
}

// Release lets the held request through (now, or as soon as it comes).
func (p *holdingProxy) Release() {
	p.mu.Lock()
	release := p.released
	p.mu.Unlock()
	if release != nil {
		release()
	}
}

// route names an E2B call that changes sandboxes.
func route(r *http.Request) string {
	switch {
	case r.Method == http.MethodPost && (r.URL.Path == "/sandboxes" || r.URL.Path == "/v2/sandboxes"):
		return "create"
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/connect"):
		return "connect"
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/timeout"):
		return "timeout"
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pause"):
		return "pause"
	}
	return ""
}

func (p *holdingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := route(r)
	p.mu.Lock()
	p.seen[rt]++
	hold := rt != "" && rt == p.hold && !p.held
	var release chan struct{}
	if hold {
		p.held = true
		close(p.arrived)
		release = p.release
	}
	p.mu.Unlock()
	if hold {
		<-release
	}
	p.next.ServeHTTP(w, r)
}

func (p *holdingProxy) count(rt string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[rt]
}

// raceEnv is two gateways on one database and one E2B team, with a person
// who owns the workspace.
type raceEnv struct {
	env   *servicetest.Env
	gws   [2]*service.Set
	proxy *holdingProxy
	owner *mcpgate.Actor
	// opts are the options of another gateway on the same database.
	opts func() service.Options
}

const raceKey = "e2b_0123456789abcdef0123456789abcdef0a1b"

func newRaceEnv(t *testing.T) *raceEnv {
	t.Helper()
	proxy := newHoldingProxy(e2bsim.New(e2bsim.Options{TeamKeys: []string{raceKey}}))
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	t.Cleanup(proxy.Release) // a failed test must not leave a request held: srv.Close waits for it
	opts := func() service.Options {
		// One ApprovalKey, as every replica has (derived from JWT_SECRET).
		return service.Options{PublicURL: "http://gw.test", LockWait: 20 * time.Second, ApprovalKey: []byte("race-test-approval-key-32-bytes!"),
			Registry: connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: srv.URL, DashboardURL: srv.URL, Timeout: 20 * time.Second}))}
	}
	// Each gateway has its own pool, as replicas do, of 16 connections: one
	// person may then hold two lock slots (a quarter of half the pool), so
	// that two of their calls on one gateway meet at the database's lock,
	// where the tests watch for them.
	dsn := withPoolSize(t, storetest.NewDatabase(t), 16)
	pool := func() *store.DB {
		db, err := store.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		return db
	}
	first := opts()
	first.DB = pool()
	env := servicetest.New(t, first)
	second := opts()
	second.DB, second.Keyring = pool(), env.Keyring
	e := &raceEnv{env: env, gws: [2]*service.Set{env.Service, service.New(second)}, proxy: proxy, opts: func() service.Options {
		o := opts()
		o.DB, o.Keyring = env.DB, env.Keyring
		return o
	}}
	_, e.owner = env.NewUser(t, "owner@example.com")
	if _, err := env.Service.Connections.PutConnection(context.Background(), e.owner, "e2b", raceKey); err != nil {
		t.Fatal(err)
	}
	return e
}

// withPoolSize sets pgxpool's pool_max_conns in a connection string (a URL
// or key=value pairs).
func withPoolSize(t *testing.T, dsn string, n int) string {
	t.Helper()
	if !strings.Contains(dsn, "://") {
		return dsn + " pool_max_conns=" + strconv.Itoa(n)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(n))
	u.RawQuery = q.Encode()
	return u.String()
}

func (e *raceEnv) call(gw int, tool string, args map[string]any) (map[string]any, error) {
	b, _ := json.Marshal(args)
	out, err := e.gws[gw].Tools.CallTool(context.Background(), e.owner, mcpgate.ToolCall{Tool: tool, Arguments: b})
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(out, &m)
}

func (e *raceEnv) mustCall(t *testing.T, tool string, args map[string]any) map[string]any {
	t.Helper()
	out, err := e.call(0, tool, args)
	if err != nil {
		t.Fatalf("%s(%v) err = %v", tool, args, err)
	}
	return out
}

func (e *raceEnv) create(t *testing.T, timeout int) string {
	t.Helper()
	return e.mustCall(t, e2b.ToolCreateSandbox, map[string]any{"timeout": timeout})["sandbox_id"].(string)
}

// sandbox reads a sandbox's state and how long it has left to run.
func (e *raceEnv) sandbox(t *testing.T, id string) (state string, left time.Duration) {
	t.Helper()
	out := e.mustCall(t, e2b.ToolGetSandbox, map[string]any{"sandbox_id": id})
	state, _ = out["state"].(string)
	if end, err := time.Parse(time.RFC3339, asString(out["end_at"])); err == nil {
		left = time.Until(end)
	}
	return state, left
}

func asString(v any) string { s, _ := v.(string); return s }

type callResult struct {
	out map[string]any
	err error
}

// goCall runs a call on gateway gw in the background.
func (e *raceEnv) goCall(gw int, tool string, args map[string]any) <-chan callResult {
	done := make(chan callResult, 1)
	go func() {
		out, err := e.call(gw, tool, args)
		done <- callResult{out, err}
	}()
	return done
}

// arrivedOrDone waits until the held request reached E2B or the call that
// would send it has finished (refused before E2B). It reports the result
// in the second case.
func arrivedOrDone(t *testing.T, p *holdingProxy, done <-chan callResult) (callResult, bool) {
	t.Helper()
	select {
	case <-p.arrived:
		return callResult{}, false
	case r := <-done:
		return r, true
	case <-time.After(20 * time.Second):
		t.Fatal("the first call neither reached E2B nor finished")
	}
	return callResult{}, false
}

var replicas = []struct {
	name   string
	second int
}{{"one gateway", 0}, {"two gateways", 1}}

// TestRace_decidedFromTheCall: a call whose guard read a sandbox is held on
// its way to E2B while a second call changes the sandbox. Before the fix:
//   - a resume of a running sandbox for 1 s read "running" (a resume cannot
//     shorten a running sandbox), a pause landed, and the resume restarted
//     the paused sandbox with 1 s to live, with kill off;
//   - a timeout of 60 s on a paused sandbox read "paused" (E2B refuses
//     timeouts on paused sandboxes), a resume of an hour landed, and the
//     timeout then cut the hour to a minute.
//
// Now both follow kill from what they ask, whatever the state, and are
// refused before E2B; the second call lands as asked.
func TestRace_decidedFromTheCall(t *testing.T) {
	tests := []struct {
		name          string
		paused        bool
		hold, first   string
		firstArgs     map[string]any
		second        string
		secondArgs    map[string]any
		want          string
		wantState     string
		wantLeftAbove time.Duration
	}{
		{"short resume, then a pause", false, "connect", e2b.ToolResumeSandbox, map[string]any{"timeout": 1},
			e2b.ToolPauseSandbox, map[string]any{}, "whatever the sandbox's state", "paused", 0},
		{"timeout on a paused sandbox, then a resume", true, "timeout", e2b.ToolSetSandboxTimeout, map[string]any{"timeout": 60},
			e2b.ToolResumeSandbox, map[string]any{"timeout": 3600}, "is paused", "running", 50 * time.Minute},
	}
	for _, tt := range tests {
		for _, r := range replicas {
			t.Run(tt.name+", "+r.name, func(t *testing.T) {
				e := newRaceEnv(t)
				id := e.create(t, 3600)
				if tt.paused {
					e.mustCall(t, e2b.ToolPauseSandbox, map[string]any{"sandbox_id": id})
				}
				firstArgs, secondArgs := maps.Clone(tt.firstArgs), maps.Clone(tt.secondArgs)
				firstArgs["sandbox_id"], secondArgs["sandbox_id"] = id, id
				e.proxy.holdFirst(tt.hold)
				first := e.goCall(0, tt.first, firstArgs)
				res, refused := arrivedOrDone(t, e.proxy, first)
				if _, err := e.call(r.second, tt.second, secondArgs); err != nil {
					t.Fatalf("%s err = %v", tt.second, err)
				}
				e.proxy.Release()
				if !refused {
					res = <-first
				}
				if msg := mcpgate.ErrorMessage(res.err); mcpgate.ErrorCode(res.err) != mcpgate.EForbidden ||
					!strings.Contains(msg, e2b.ToolKillSandbox+", which is turned off") || !strings.Contains(msg, tt.want) {
					t.Errorf("%s with kill off: err = %v, want refused as a kill (%q)", tt.first, res.err, tt.want)
				}
				if state, left := e.sandbox(t, id); state != tt.wantState || left < tt.wantLeftAbove {
					t.Errorf("sandbox is %s with %v left, want %s (not ended)", state, left, tt.wantState)
				}
			})
		}
	}
}

// TestRace_extensionOvertaken: a timeout of 300 s on a sandbox with 100 s
// left (an extension) is held on its way to E2B while a resume extends the
// sandbox to an hour. Only the lock can order these: each call alone ends
// nothing. Unordered, the timeout landed last and cut the hour to 5 min.
// Ordered, the resume waits for the timeout, and the sandbox keeps its hour.
func TestRace_extensionOvertaken(t *testing.T) {
	for _, r := range replicas {
		t.Run(r.name, func(t *testing.T) {
			e := newRaceEnv(t)
			id := e.create(t, 100)
			e.proxy.holdFirst("timeout")
			timeout := e.goCall(0, e2b.ToolSetSandboxTimeout, map[string]any{"sandbox_id": id, "timeout": 300})
			if res, refused := arrivedOrDone(t, e.proxy, timeout); refused {
				t.Fatalf("an extension was refused: %v", res.err)
			}
			resume := e.goCall(r.second, e2b.ToolResumeSandbox, map[string]any{"sandbox_id": id, "timeout": 3600})
			storetest.Until(t, "the resume to reach E2B or wait for the lock", func() bool {
				return e.proxy.count("connect") > 0 || storetest.WaitingLocks(t, e.env.DB) > 0
			})
			e.proxy.Release()
			for _, c := range []<-chan callResult{timeout, resume} {
				if res := <-c; res.err != nil {
					t.Fatalf("err = %v", res.err)
				}
			}
			if state, left := e.sandbox(t, id); state != "running" || left < 50*time.Minute {
				t.Errorf("sandbox is %s with %v left, want running for the hour the later resume asked", state, left)
			}
		})
	}
}

// TestRace_mostRunning: with max_running 3 and 2
// running, two creates. The first is held on its way to E2B; the second
// must not count the same 2 and start a fourth.
func TestRace_mostRunning(t *testing.T) {
	for _, r := range replicas {
		t.Run(r.name, func(t *testing.T) {
			e := newRaceEnv(t)
			if _, err := e.gws[0].Tools.SetGuardrails(context.Background(), e.owner, mcpgate.Guardrails{MaxRunning: 3}); err != nil {
				t.Fatal(err)
			}
			e.create(t, 3600)
			e.create(t, 3600)
			e.proxy.holdFirst("create")
			first := e.goCall(0, e2b.ToolCreateSandbox, map[string]any{"timeout": 3600})
			if res, refused := arrivedOrDone(t, e.proxy, first); refused {
				t.Fatalf("the third create was refused: %v", res.err)
			}
			second := e.goCall(r.second, e2b.ToolCreateSandbox, map[string]any{"timeout": 3600})
			storetest.Until(t, "the second create to reach E2B or wait for the lock", func() bool {
				return e.proxy.count("create") > 3 || storetest.WaitingLocks(t, e.env.DB) > 0
			})
			e.proxy.Release()
			if res := <-first; res.err != nil {
				t.Fatalf("first create err = %v", res.err)
			}
			res := <-second
			if mcpgate.ErrorCode(res.err) != mcpgate.EForbidden || !strings.Contains(mcpgate.ErrorMessage(res.err), "3 are running") {
				t.Errorf("second create: err = %v, want refused at the limit", res.err)
			}
			list := e.mustCall(t, e2b.ToolListSandboxes, map[string]any{"state": "running"})
			if n := list["total_running"].(float64); n != 3 {
				t.Errorf("%v running, want 3", n)
			}
		})
	}
}

// TestRace_lockWaitBounded: a call that waits for another change of the
// same sandbox longer than LockWait gives up with a clear, retryable error
// and changes nothing; read-only calls take no lock and go on.
func TestRace_lockWaitBounded(t *testing.T) {
	e := newRaceEnv(t)
	id := e.create(t, 3600)
	impatient := e.opts()
	impatient.LockWait = 50 * time.Millisecond
	gw := service.New(impatient)
	e.proxy.holdFirst("pause")
	pause := e.goCall(0, e2b.ToolPauseSandbox, map[string]any{"sandbox_id": id})
	if res, refused := arrivedOrDone(t, e.proxy, pause); refused {
		t.Fatalf("pause refused: %v", res.err)
	}
	_, err := gw.Tools.CallTool(context.Background(), e.owner, mcpgate.ToolCall{Tool: e2b.ToolResumeSandbox,
		Arguments: []byte(`{"sandbox_id":"` + id + `","timeout":600}`)})
	var me *mcpgate.Error
	if !errors.As(err, &me) || me.Code != mcpgate.EConflict || me.RetryAfter == 0 ||
		!strings.Contains(me.Message, "another change to this sandbox is in progress") {
		t.Errorf("resume while a pause holds the sandbox: err = %v, want a retryable conflict", err)
	}
	if _, err := gw.Tools.CallTool(context.Background(), e.owner, mcpgate.ToolCall{Tool: e2b.ToolGetSandbox,
		Arguments: []byte(`{"sandbox_id":"` + id + `"}`)}); err != nil {
		t.Errorf("a read while a change is held: err = %v", err)
	}
	e.proxy.Release()
	if res := <-pause; res.err != nil {
		t.Fatal(res.err)
	}
	if e.proxy.count("connect") != 0 {
		t.Error("the refused resume reached E2B")
	}
}

// TestApproval_rechecked: an approval is spent only on the call the person
// approved, weighed as it is when it runs. A timeout of 300 s on a sandbox
// with 100 s left is an extension and is approved as one; then the sandbox
// is extended to an hour, and the same call would now cut it to 5 min, a
// kill by another route. Before the fix the approval was spent and the
// sandbox shortened; now the call is refused and a new approval must be
// asked for, which says why.
func TestApproval_rechecked(t *testing.T) {
	e := newRaceEnv(t)
	ctx := context.Background()
	human, on := mcpgate.ApprovalHuman, true
	for _, tool := range []string{e2b.ToolSetSandboxTimeout, e2b.ToolKillSandbox} {
		if _, err := e.gws[0].Tools.UpdateTool(ctx, e.owner, tool, mcpgate.ToolUpdate{Enabled: &on, Approval: &human}); err != nil {
			t.Fatal(err)
		}
	}
	k, _, err := e.gws[0].Keys.CreateKey(ctx, e.owner, mcpgate.NewKey{Name: "ai"})
	if err != nil {
		t.Fatal(err)
	}
	key := &mcpgate.Actor{UserID: e.owner.UserID, Email: e.owner.Email, WorkspaceID: e.owner.WorkspaceID, Scope: mcpgate.ScopeFull,
		KeyID: k.ID, Source: mcpgate.SourceMCP}
	id := e.create(t, 100)
	args := []byte(`{"sandbox_id":"` + id + `","timeout":300}`)
	_, err = e.gws[0].Tools.CallTool(ctx, key, mcpgate.ToolCall{Tool: e2b.ToolSetSandboxTimeout, Arguments: args})
	var need *mcpgate.ApprovalRequiredError
	if !errors.As(err, &need) || strings.Contains(need.Approval.Summary, "kill") {
		t.Fatalf("extension: err = %v, want an approval request for an extension", err)
	}
	if _, err := e.gws[0].Approvals.Approve(ctx, e.owner, need.Approval.ID); err != nil {
		t.Fatal(err)
	}
	e.mustCall(t, e2b.ToolResumeSandbox, map[string]any{"sandbox_id": id, "timeout": 3600})
	_, err = e.gws[1].Tools.CallTool(ctx, key, mcpgate.ToolCall{Tool: e2b.ToolSetSandboxTimeout, Arguments: args, ApprovalID: need.Approval.ID})
	if msg := mcpgate.ErrorMessage(err); mcpgate.ErrorCode(err) != mcpgate.EForbidden || !strings.Contains(msg, "changed meaning") ||
		!strings.Contains(msg, "kill it 5 min from now") {
		t.Errorf("the approved call after the extension: err = %v, want refused as changed", err)
	}
	if _, left := e.sandbox(t, id); left < 50*time.Minute {
		t.Errorf("sandbox has %v left, want the hour", left)
	}
	_, err = e.gws[1].Tools.CallTool(ctx, key, mcpgate.ToolCall{Tool: e2b.ToolSetSandboxTimeout, Arguments: args})
	if !errors.As(err, &need) || !strings.Contains(need.Approval.Summary, "kill it 5 min from now") {
		t.Errorf("asking again: err = %v, want an approval request that says it ends the sandbox early", err)
	}
}

// barrierConnector has one tool a person must approve; its Describe, which
// an approval request reads for its summary, waits until two requests are
// in it, so that two requests are counted against the cap together.
type barrierConnector struct {
	tools []*connectors.Tool
	mu    sync.Mutex
	in    int
	both  chan struct{}
}

func newBarrierConnector() *barrierConnector {
	c := &barrierConnector{both: make(chan struct{})}
	c.tools = []*connectors.Tool{connectors.NewTool(connectors.Spec{Name: "holds_act", Title: "Act", Description: "Acts.",
		DefaultEnabled: true, DefaultApproval: mcpgate.ApprovalHuman},
		func(context.Context, mcpgate.Secret, struct{}) (map[string]any, error) { return map[string]any{}, nil })}
	return c
}

func (c *barrierConnector) Name() string                                          { return "holds" }
func (c *barrierConnector) CheckCredential(context.Context, mcpgate.Secret) error { return nil }
func (c *barrierConnector) CredentialHint(mcpgate.Secret) string                  { return "holds…" }
func (c *barrierConnector) Tools() []*connectors.Tool                             { return c.tools }
func (c *barrierConnector) Describe(context.Context, mcpgate.Secret, string, map[string]any) (string, error) {
	c.mu.Lock()
	c.in++
	if c.in == 2 {
		close(c.both)
	}
	c.mu.Unlock()
	<-c.both
	return "Act.", nil
}

// TestRace_pendingApprovalsCap: with one place left under
// the cap of pending approvals, two requests on two gateways are both
// counted before either is stored (the barrier). Before, both were stored;
// now the count that decides is taken again with the insert, under a lock.
func TestRace_pendingApprovalsCap(t *testing.T) {
	ctx := context.Background()
	reg := connectors.NewRegistry(newBarrierConnector())
	env := servicetest.New(t, service.Options{Registry: reg, PublicURL: "http://gw.test"})
	other := service.New(service.Options{Registry: reg, PublicURL: "http://gw.test", DB: env.DB, Keyring: env.Keyring})
	_, owner := env.NewUser(t, "owner@example.com")
	if _, err := env.Service.Connections.PutConnection(ctx, owner, "holds", "holds-credential"); err != nil {
		t.Fatal(err)
	}
	k, _, err := env.Service.Keys.CreateKey(ctx, owner, mcpgate.NewKey{Name: "ai"})
	if err != nil {
		t.Fatal(err)
	}
	key := &mcpgate.Actor{UserID: owner.UserID, Email: owner.Email, WorkspaceID: owner.WorkspaceID, Scope: mcpgate.ScopeFull,
		KeyID: k.ID, Source: mcpgate.SourceMCP}
	const limit = 50 // maxPendingApprovals
	for range limit - 1 {
		ap := &mcpgate.ApprovalRequest{WorkspaceID: key.WorkspaceID, KeyID: key.KeyID, RequestedBy: key.UserID, Tool: "holds_act",
			Arguments: map[string]any{}, ExpiresAt: time.Now().Add(10 * time.Minute)}
		if err := env.DB.CreateApproval(ctx, ap, "h"); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 2)
	for _, gw := range []*service.Set{env.Service, other} {
		go func() {
			_, err := gw.Tools.CallTool(ctx, key, mcpgate.ToolCall{Tool: "holds_act", Arguments: []byte(`{}`)})
			errs <- err
		}()
	}
	var asked, refused int
	for range 2 {
		err := <-errs
		var need *mcpgate.ApprovalRequiredError
		switch {
		case errors.As(err, &need):
			asked++
		case mcpgate.ErrorCode(err) == mcpgate.ETooMany:
			refused++
		default:
			t.Fatalf("err = %v", err)
		}
	}
	n, err := env.DB.CountPendingApprovals(ctx, key.WorkspaceID, key.UserID, time.Now())
	if err != nil || n != limit || asked != 1 || refused != 1 {
		t.Errorf("%d pending (%v), %d asked, %d refused; want %d, 1, 1", n, err, asked, refused, limit)
	}
}

// TestRace_mostRunningParallel: the reproduction, ten creates at
// once on two gateways against max_running 3, with E2B answering slowly:
// exactly three start.
func TestRace_mostRunningParallel(t *testing.T) {
	e := newRaceEnv(t)
	if _, err := e.gws[0].Tools.SetGuardrails(context.Background(), e.owner, mcpgate.Guardrails{MaxRunning: 3}); err != nil {
		t.Fatal(err)
	}
	e.proxy.holdFirst("create") // the first create waits until others are under way
	var calls []<-chan callResult
	for i := range 10 {
		calls = append(calls, e.goCall(i%2, e2b.ToolCreateSandbox, map[string]any{"timeout": 3600}))
	}
	<-e.proxy.arrived
	storetest.Until(t, "another create to wait for the lock or reach E2B", func() bool {
		return storetest.WaitingLocks(t, e.env.DB) > 0 || e.proxy.count("create") > 1
	})
	e.proxy.Release()
	started, refused := 0, 0
	for _, c := range calls {
		switch res := <-c; {
		case res.err == nil:
			started++
		case strings.Contains(mcpgate.ErrorMessage(res.err), "3 are running"):
			refused++
		default:
			t.Errorf("err = %v", res.err)
		}
	}
	list := e.mustCall(t, e2b.ToolListSandboxes, map[string]any{"state": "running"})
	if n := list["total_running"].(float64); n != 3 || started != 3 || refused != 7 {
		t.Errorf("%v running, %d started, %d refused; want 3, 3, 7", n, started, refused)
	}
}
