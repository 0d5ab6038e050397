package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/pgembed"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

func mustCluster(t *testing.T, dir string) *pgembed.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := pgembed.Start(ctx, pgembed.Options{Dir: dir, Settings: map[string]string{"fsync": "off"}})
	if err != nil {
		t.Fatalf("pgembed.Start() err = %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	return c
}

func stopCluster(t *testing.T, c *pgembed.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("Stop() err = %v", err)
	}
}

// tally counts what MCP clients saw.
type tally struct {
	mu     sync.Mutex
	ok     int
	failed []callResult
}

func (c *tally) add(r callResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.ok() {
		c.ok++
	} else {
		c.failed = append(c.failed, r)
	}
}

// TestDatabaseOutage stops PostgreSQL under two running replicas while calls
// are in flight, then starts it again. During the outage calls and API
// writes fail clearly and /readyz answers 503; afterwards everything
// recovers by itself: readiness, calls, and every call a client saw succeed
// has its audit row. A key revoked on replica 1 right after the database
// is back (replica 2's invalidation listener may still be reconnecting) is
// refused by replica 2 within revokeBound of the revoke.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	dir := testutil.ClusterDir(t)
	cluster := mustCluster(t, dir)
	f := newFixture(t, cluster.DSN(), startSim(t))
	gw, gw2, tn, logs := f.gw, f.replica(t), f.tn, f.logs
	second := tn.createKey("revoked after the outage")
	cs := mustSession(t, gw.URL, tn.key.Key, false)
	var seen tally
	var mu sync.Mutex
	var okTags []string
	tagged := func(tag string) {
		r := call(cs, 20*time.Second, e2b.ToolListSandboxes, probeArgs(tag), nil)
		seen.add(r)
		if r.ok() {
			mu.Lock()
			okTags = append(okTags, tag)
			mu.Unlock()
		}
	}
	tagged("baseline")
	if seen.ok != 1 {
		t.Fatalf("baseline call failed: %v", seen.failed)
	}
	// Replica 2 knows the second key, its workspace's policy and credential.
	settle(t, gw2.URL, testutil.MustConnect(t, cluster.DSN()))
	c2 := newRPCClient(t, gw2.URL, second.Key)
	if r := c2.call(e2b.ToolListSandboxes, "replica-2-baseline"); !r.ok() {
		t.Fatalf("baseline call on replica 2 = %v", r)
	}

	// Calls in flight while the database goes away and comes back.
	stop := make(chan struct{})
	wait := closedLoop(3, stop, func(w, i int) bool {
		tagged(fmt.Sprintf("w%d-%d", w, i))
		time.Sleep(20 * time.Millisecond)
		return true
	})
	time.Sleep(300 * time.Millisecond)
	stopCluster(t, cluster)

	// During the outage.
	if !eventually(10*time.Second, func() bool { st, _ := httpGet(gw.URL + "/readyz"); return st == http.StatusServiceUnavailable }) {
		st, body := httpGet(gw.URL + "/readyz")
		t.Errorf("/readyz during the outage = %d %s, want 503", st, body)
	}
	if st, _ := httpGet(gw.URL + "/healthz"); st != http.StatusOK {
		t.Errorf("/healthz during the outage = %d, want 200 (the process is up)", st)
	}
	// A key, policy and sealed credential this replica has cached keep
	// serving calls without the database (their audit rows are written once
	// it is back: checked below); anything else must fail clearly.
	r := call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil)
	if !r.ok() && (r.err != nil || !strings.Contains(r.text, "try again")) {
		t.Errorf("call during the outage = %v, want success from the caches or a tool error asking to try again", r)
	}
	st, body := tn.try("POST", "/api/v1/workspaces/"+tn.ws+"/keys", map[string]string{"name": "during the outage"})
	if st != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"unavailable"`) {
		t.Errorf("POST keys during the outage = %d %s, want 503 unavailable", st, body)
	}
	st, body = tn.try("PUT", "/api/v1/workspaces/"+tn.ws+"/connections/e2b", map[string]string{"api_key": "e2b_" + testutil.RandomHex(20)})
	if st != http.StatusServiceUnavailable {
		t.Errorf("PUT connection during the outage = %d %s, want 503", st, body)
	}
	// Replica 2 keeps serving the second key on what it knew.
	if !eventually(5*time.Second, func() bool { return metric(gw2.URL, "mcpgate_invalidation_listener_connected") == 0 }) {
		t.Errorf("replica 2's /metrics does not show its listener disconnected during the outage")
	}
	if r := c2.call(e2b.ToolListSandboxes, "replica-2-outage"); !r.ok() {
		t.Errorf("call on replica 2 during the outage = %v, want success from its caches", r)
	}
	time.Sleep(500 * time.Millisecond)

	// Back again: nothing is restarted but PostgreSQL. At once, before any
	// replica has said it recovered, the second key is revoked on replica
	// 1; replica 2 must refuse it within revokeBound.
	cluster = mustCluster(t, dir)
	back := time.Now()
	var connectedAt atomic.Int64 // when replica 2 showed its listener back
	go func() {
		for time.Since(back) < 20*time.Second {
			if metric(gw2.URL, "mcpgate_invalidation_listener_connected") == 1 {
				connectedAt.Store(int64(time.Since(back)))
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	sent, lag := revokeLag(t, tn, second, c2, revokeBound)
	if lag > revokeBound {
		t.Errorf("replica 2 refused the key revoked right after the outage %s after the revoke, want under %s", lag, revokeBound)
	}

	if !eventually(30*time.Second, func() bool { st, _ := httpGet(gw.URL + "/readyz"); return st == http.StatusOK }) {
		t.Fatalf("/readyz did not recover after PostgreSQL came back\n%s", tail(logs.String(), 3000))
	}
	if !eventually(15*time.Second, func() bool {
		r := call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil)
		return r.ok()
	}) {
		t.Fatalf("calls did not recover\n%s", tail(logs.String(), 3000))
	}
	close(stop)
	wait()
	t.Logf("database back; %s later the revoke was sent on replica 1, and replica 2 refused the key %s after that "+
		"(its invalidation listener was back %s after the database)", sent.Sub(back).Round(time.Millisecond),
		lag.Round(time.Millisecond), time.Duration(connectedAt.Load()).Round(time.Millisecond))

	for _, f := range seen.failed {
		if f.err == nil && !strings.Contains(f.text, "try again") {
			t.Errorf("a call during the outage failed unclearly: %v", f)
		}
	}
	t.Logf("calls: %d ok, %d failed during the outage", seen.ok, len(seen.failed))

	// No audit entry lost for a call that succeeded: the writer retried
	// through the outage.
	db := testutil.MustConnect(t, cluster.DSN())
	var missing []string
	eventually(20*time.Second, func() bool {
		tags := auditedTags(t, db)
		missing = missing[:0]
		for _, tag := range okTags {
			if tags[tag] != 1 {
				missing = append(missing, tag)
			}
		}
		return len(missing) == 0
	})
	if len(missing) > 0 {
		t.Errorf("%d of %d calls a client saw succeed have no audit row (or several): %v", len(missing), len(okTags), missing)
	}
	// Nothing half-written.
	if n := count(t, db, `SELECT count(*) FROM api_keys WHERE octet_length(secret_hash) <> 32`); n != 0 {
		t.Errorf("%d api_keys rows without a full secret hash", n)
	}
	if n := count(t, db, `SELECT count(*) FROM api_keys WHERE workspace_id = $1`, tn.ws); n != 2 {
		t.Errorf("api_keys rows of the workspace = %d, want 2 (none from the refused create)", n)
	}
	if n := count(t, db, `SELECT count(*) FROM connections WHERE octet_length(ciphertext) < 17+16 OR key_term < 1`); n != 0 {
		t.Errorf("%d connections rows with a truncated ciphertext", n)
	}
	if r := call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil); !r.ok() {
		t.Errorf("the stored credential does not open after the outage: %v", r)
	}
}

// outageAnswer reports whether r is an answer the gateway may give while its
// database is away: success on cached state, a tool error asking to try
// again, or (before the key is known) HTTP 503 with Retry-After and a
// JSON-RPC error saying the same. Never a 400, never go-sdk's "no server
// available", never a 401 for a key that could not be checked.
func outageAnswer(r rpcResult) bool {
	switch {
	case r.ok():
		return true
	case r.err != nil || strings.Contains(r.text, "no server available"):
		return false
	case r.status == http.StatusOK && r.isError:
		return strings.Contains(r.text, "try again")
	case r.status == http.StatusServiceUnavailable && r.rpcError:
		n, err := strconv.Atoi(r.retryAfter)
		return err == nil && n >= 1 && strings.Contains(r.text, "try again")
	}
	return false
}

// TestDatabaseOutage_OpenLoop keeps PostgreSQL away for outageLength under
// an open loop of 50 calls/s, from three kinds of caller: a key whose
// policy and credential the replica knew (it must keep working the whole
// time), a key the replica never saw (JSON-RPC 503 with Retry-After), and
// a key whose workspace's credential the replica never opened (a tool
// error asking to try again). Afterwards every call that was answered with
// a tool result has its audit row.
func TestDatabaseOutage_OpenLoop(t *testing.T) {
	t.Parallel()
	const rate, outageLength = 50, 30 * time.Second
	dir := testutil.ClusterDir(t)
	cluster := mustCluster(t, dir)
	f := newFixture(t, cluster.DSN(), startSim(t))
	gw := f.gw
	unseen := f.tn.createKey("never used on this replica before the outage")
	noCred := newTenant(t, gw.URL, nil)
	clients := map[string]*rpcClient{"known": f.rc,
		"unseen": newRPCClient(t, gw.URL, unseen.Key), "nocred": newRPCClient(t, gw.URL, noCred.key.Key)}
	if r := clients["known"].call(e2b.ToolListSandboxes, "warm"); !r.ok() {
		t.Fatalf("baseline call = %v", r)
	}
	// tools/list loads the key and the policy, not the credential.
	settle(t, gw.URL, testutil.MustConnect(t, cluster.DSN()))
	cs := mustSession(t, gw.URL, noCred.key.Key, false)
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("tools/list = %v", err)
	}

	var calls callLog
	var outage atomic.Bool // the other two keys call only once the database is away
	stop := make(chan struct{})
	wait := openLoop(rate, stop, func(i int) {
		kind := "known"
		switch {
		case i%10 == 0 && outage.Load():
			kind = "unseen"
		case i%10 == 1 && outage.Load():
			kind = "nocred"
		}
		calls.add(clients[kind].call(e2b.ToolListSandboxes, fmt.Sprintf("%s-%d", kind, i)))
	})
	time.Sleep(time.Second)
	down := time.Now()
	stopCluster(t, cluster)
	outage.Store(true)
	time.Sleep(outageLength - time.Since(down))
	// /metrics shows what waits: the audit events of the outage's calls,
	// and the listener down.
	queued, listening := metric(gw.URL, "mcpgate_audit_queue_depth"), metric(gw.URL, "mcpgate_invalidation_listener_connected")
	cluster = mustCluster(t, dir)
	up := time.Now()
	time.Sleep(2 * time.Second)
	close(stop)
	wait()
	if queued < float64(rate) || listening != 0 {
		t.Errorf("/metrics at the end of the outage: audit queue depth %v, listener connected %v; want the outage's events queued, 0",
			queued, listening)
	}
	if !eventually(10*time.Second, func() bool {
		return metric(gw.URL, "mcpgate_audit_queue_depth") == 0 && metric(gw.URL, "mcpgate_invalidation_listener_connected") == 1
	}) {
		t.Errorf("/metrics after the outage: audit queue depth %v, listener connected %v; want 0, 1",
			metric(gw.URL, "mcpgate_audit_queue_depth"), metric(gw.URL, "mcpgate_invalidation_listener_connected"))
	}

	all := calls.all()
	statuses := map[int]int{}
	var ok, toolErrors, unavailable int
	for _, r := range all {
		statuses[r.status]++
		switch {
		case r.ok():
			ok++
		case r.isError:
			toolErrors++
		case r.status == http.StatusServiceUnavailable:
			unavailable++
		}
		if !outageAnswer(r) {
			t.Errorf("call %v, want success, a tool error asking to try again or a JSON-RPC 503 with Retry-After", r)
		}
		during := r.sent.After(down) && r.answered.Before(up)
		if strings.HasPrefix(r.tag, "known-") && !r.ok() {
			t.Errorf("call with the key the replica knew failed (during the outage: %v): %v", during, r)
		}
	}
	t.Logf("database down %s at %d calls/s: %d calls, %d ok, %d tool errors, %d JSON-RPC 503; HTTP statuses %v; "+
		"%v audit events queued at the end of the outage", up.Sub(down).Round(100*time.Millisecond), rate, len(all), ok,
		toolErrors, unavailable, statuses, queued)
	if toolErrors == 0 || unavailable == 0 {
		t.Errorf("no tool error or no 503 during the outage: the keys the replica did not know were not exercised")
	}
	if statuses[http.StatusBadRequest] > 0 {
		t.Errorf("%d HTTP 400 answers", statuses[http.StatusBadRequest])
	}

	db := testutil.MustConnect(t, cluster.DSN())
	var missing []rpcResult
	eventually(30*time.Second, func() bool { missing = unaudited(t, db, all); return len(missing) == 0 })
	if len(missing) > 0 {
		t.Errorf("%d answered calls have no audit row, the first: %v", len(missing), missing[0])
	}
}

// outageStop is what stopOutage leaves: the calls answered during the
// outage, the logs, and how to start the database and the gateway again.
type outageStop struct {
	calls   []rpcResult // answered with a tool result during the outage
	logs    *testutil.LockedBuffer
	base    string           // the gateway's URL, the same after restart
	restart func() *pgx.Conn // starts PostgreSQL and the gateway again; the database
}

// stopOutage runs a gateway with DATA_DIR at dataDir, stops PostgreSQL
// under it once every audit row so far is written, offers 50 calls/s for 2 s
// (the cached key, policy and credential keep them working; their audit
// events wait in the writer's queue), and stops the gateway with SIGTERM
// while calls are still coming.
func stopOutage(t *testing.T, dataDir string) outageStop {
	t.Helper()
	dir := testutil.ClusterDir(t)
	cluster := mustCluster(t, dir)
	f := newFixtureIn(t, cluster.DSN(), startSim(t), dataDir)
	c, logs := f.rc, f.logs
	db := testutil.MustConnect(t, cluster.DSN())
	settle(t, f.gw.URL, db)
	if r := c.call(e2b.ToolListSandboxes, "before"); !r.ok() {
		t.Fatalf("baseline call = %v", r)
	}
	// Everything so far written, so that the stop spools exactly the
	// outage's events: the writer's queue empty, and no row added over
	// more than a flush interval.
	last := -1
	if !eventually(10*time.Second, func() bool {
		n := count(t, db, `SELECT count(*) FROM audit_log`)
		quiet := n == last && auditedTags(t, db)["before"] == 1 && metric(f.gw.URL, "mcpgate_audit_queue_depth") == 0
		last = n
		time.Sleep(250 * time.Millisecond)
		return quiet
	}) {
		t.Fatal("the audit log did not catch up before the outage")
	}
	stopCluster(t, cluster)

	var calls callLog
	stop := make(chan struct{})
	wait := openLoop(50, stop, func(i int) { calls.add(c.call(e2b.ToolListSandboxes, fmt.Sprintf("outage-%d", i))) })
	time.Sleep(2 * time.Second)
	stopped := make(chan struct{})
	sigterm := time.Now()
	go func() { f.gw.stop(); close(stopped) }()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wait()
	<-stopped

	// Every call sent before the SIGTERM is answered, on cached state;
	// those sent after it (or just before: the connection not yet
	// accepted) may find the listener closed.
	out := outageStop{logs: logs, base: f.gw.URL}
	for _, r := range calls.all() {
		if r.status == http.StatusOK && !r.rpcError {
			out.calls = append(out.calls, r)
		}
		if r.sent.Before(sigterm.Add(-100*time.Millisecond)) && !r.ok() {
			t.Errorf("call sent %s before the SIGTERM = %v, want success on cached state", sigterm.Sub(r.sent).Round(time.Millisecond), r)
		}
	}
	if len(out.calls) == 0 {
		t.Fatalf("no call was answered during the outage\n%s", tail(logs.String(), 3000))
	}
	out.restart = func() *pgx.Conn {
		cluster := mustCluster(t, dir)
		startGatewayIn(t, f.cfg, logs, dataDir)
		return testutil.MustConnect(t, cluster.DSN())
	}
	return out
}

// loggedCount returns the "count" of the last log line whose message
// starts with msg, or -1 when there is none.
func loggedCount(logs *testutil.LockedBuffer, msg string) int {
	n := -1
	for line := range strings.Lines(logs.String()) {
		var rec struct {
			Msg   string `json:"msg"`
			Count int    `json:"count"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, msg) {
			n = rec.Count
		}
	}
	return n
}

// TestStopDuringOutage_NothingLost: a clean stop (SIGTERM) while PostgreSQL
// is away loses no audit event of a call that was answered: what the
// database cannot take goes to the spool under DATA_DIR, and the next start
// writes it before serving. The log says exactly how many were spooled and
// replayed.
func TestStopDuringOutage_NothingLost(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	o := stopOutage(t, dataDir)
	if fi, err := os.Stat(filepath.Join(dataDir, audit.SpoolFile)); err != nil || fi.Size() == 0 {
		t.Errorf("spool file after the stop: %v, %v; want it holding the events", fi, err)
	}
	if n := loggedCount(o.logs, "audit events spooled at shutdown"); n != len(o.calls) {
		t.Errorf("log says %d audit events spooled at shutdown, want %d (one per call answered during the outage)\n%s",
			n, len(o.calls), tail(o.logs.String(), 3000))
	}
	db := o.restart()
	if n := loggedCount(o.logs, "audit spool replayed"); n != len(o.calls) {
		t.Errorf("log says %d audit events replayed at the next start, want %d", n, len(o.calls))
	}
	if missing := unaudited(t, db, o.calls); len(missing) > 0 {
		t.Errorf("%d of %d calls answered during the outage have no audit row, the first: %v", len(missing), len(o.calls), missing[0])
	}
	t.Logf("SIGTERM during an outage: %d calls answered during it, %d spooled, %d replayed, all audited", len(o.calls),
		loggedCount(o.logs, "audit events spooled at shutdown"), loggedCount(o.logs, "audit spool replayed"))
}

// TestStopDuringOutage_NoWritableDataDir: without a writable DATA_DIR (a
// read-only container) the gateway says at start, as an error, that it runs
// without a spool; a stop during an outage then loses the queued events, and
// the log says exactly how many.
func TestStopDuringOutage_NoWritableDataDir(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o := stopOutage(t, filepath.Join(file, "data")) // not a directory, even for root
	var startErr bool
	for line := range strings.Lines(o.logs.String()) {
		startErr = startErr || strings.Contains(line, `"level":"ERROR"`) && strings.Contains(line, "audit spool disabled")
	}
	if !startErr {
		t.Errorf("no error at start saying the audit spool is disabled\n%s", tail(o.logs.String(), 3000))
	}
	if n := loggedCount(o.logs, "audit events lost at shutdown"); n != len(o.calls) {
		t.Errorf("log says %d audit events lost at shutdown, want %d (one per call answered during the outage)\n%s",
			n, len(o.calls), tail(o.logs.String(), 3000))
	}
	db := o.restart()
	if missing := unaudited(t, db, o.calls); len(missing) != len(o.calls) {
		t.Errorf("%d of the %d calls answered during the outage have no audit row, want all (lost, as the log says)", len(missing), len(o.calls))
	}
	t.Logf("no writable DATA_DIR: %d calls answered during the outage, %d audit events lost, as logged", len(o.calls),
		loggedCount(o.logs, "audit events lost at shutdown"))
}
