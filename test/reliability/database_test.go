package reliability

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/pgembed"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// clusterDir returns a DATA_DIR the embedded PostgreSQL can use; as root it
// runs as an unprivileged user, who must be able to reach it.
func clusterDir(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	if os.Geteuid() == 0 {
		for _, d := range []string{filepath.Dir(base), base} {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatal(err)
			}
		}
	}
	return filepath.Join(base, "data")
}

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

// TestDatabaseOutage stops PostgreSQL under a running gateway while calls
// are in flight, then starts it again. During the outage calls and API
// writes fail clearly and /readyz answers 503; afterwards everything
// recovers by itself: readiness, calls, the LISTEN connection (a revoke
// propagates faster than the cache TTL), and every call a client saw
// succeed has its audit row.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	cluster := mustCluster(t, dir)
	dsn := cluster.DSN()
	simURL := startSim(t)
	var logs testutil.LockedBuffer
	gw := startGateway(t, newGWConfig(t, dsn, simURL), &logs)
	tn := newTenant(t, gw.URL, nil)
	second := tn.createKey("revoked after the outage")
	cs := mustSession(t, gw.URL, tn.key.Key, false)
	var seen tally
	seen.add(call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil))
	if seen.ok != 1 {
		t.Fatalf("baseline call failed: %v", seen.failed)
	}

	// Calls in flight while the database goes away and comes back.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				seen.add(call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil))
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
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
	seen.add(r)
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
	time.Sleep(500 * time.Millisecond)

	// Back again: nothing is restarted but PostgreSQL.
	cluster = mustCluster(t, dir)
	if !eventually(30*time.Second, func() bool { st, _ := httpGet(gw.URL + "/readyz"); return st == http.StatusOK }) {
		t.Fatalf("/readyz did not recover after PostgreSQL came back\n%s", tail(logs.String(), 3000))
	}
	if !eventually(15*time.Second, func() bool {
		r := call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil)
		seen.add(r)
		return r.ok()
	}) {
		t.Fatalf("calls did not recover\n%s", tail(logs.String(), 3000))
	}
	close(stop)
	wg.Wait()

	for _, f := range seen.failed {
		if f.err == nil && !strings.Contains(f.text, "try again") {
			t.Errorf("a call during the outage failed unclearly: %v", f)
		}
	}
	t.Logf("calls: %d ok, %d failed during the outage", seen.ok, len(seen.failed))

	// The listener reconnected: a revoke reaches the cache at once, not
	// after the 30 s TTL.
	cs2 := mustSession(t, gw.URL, second.Key, false)
	r = call(cs2, 20*time.Second, e2b.ToolListSandboxes, nil, nil)
	seen.add(r)
	if !r.ok() {
		t.Fatalf("call with the second key = %v", r)
	}
	tn.must("DELETE", "/api/v1/workspaces/"+tn.ws+"/keys/"+second.ID, nil, http.StatusNoContent, nil)
	start := time.Now()
	if !eventually(5*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := mcpSession(t, ctx, gw.URL, second.Key, false)
		if err != nil {
			return true
		}
		defer s.Close()
		r := call(s, 10*time.Second, e2b.ToolListSandboxes, nil, nil)
		seen.add(r) // calls before the revoke arrived succeed, and are audited
		return r.err != nil
	}) {
		t.Errorf("a revoked key still works 5 s after the revoke: the invalidation listener did not reconnect")
	}
	t.Logf("revoke took effect after %s", time.Since(start).Round(time.Millisecond))

	// No audit entry lost for a call that succeeded: the writer retried
	// through the outage.
	db := mustDB(t, cluster.DSN())
	var got int
	ok := eventually(20*time.Second, func() bool {
		got = count(t, db, `SELECT count(*) FROM audit_log WHERE kind = 'tool_call' AND outcome = 'ok'`)
		return got >= seen.ok
	})
	if !ok || got != seen.ok {
		t.Errorf("audit rows with outcome ok = %d, want %d (one per call a client saw succeed)", got, seen.ok)
	}
	// Nothing half-written.
	if n := count(t, db, `SELECT count(*) FROM api_keys WHERE octet_length(secret_hash) <> 32`); n != 0 {
		t.Errorf("%d api_keys rows without a full secret hash", n)
	}
	if n := count(t, db, `SELECT count(*) FROM api_keys`); n != 2 {
		t.Errorf("api_keys rows = %d, want 2 (none from the refused create)", n)
	}
	if n := count(t, db, `SELECT count(*) FROM connections WHERE octet_length(ciphertext) < 17+16 OR key_term < 1`); n != 0 {
		t.Errorf("%d connections rows with a truncated ciphertext", n)
	}
	if r := call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil); !r.ok() {
		t.Errorf("the stored credential does not open after the outage: %v", r)
	}
}

// TestStopDuringOutage_NothingLost: a clean stop (SIGTERM) while PostgreSQL
// is away loses no audit event of a call that was answered: what the
// database cannot take goes to the spool under DATA_DIR, and the next start
// writes it before serving.
func TestStopDuringOutage_NothingLost(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	cluster := mustCluster(t, dir)
	simURL := startSim(t)
	var logs testutil.LockedBuffer
	cfg := newGWConfig(t, cluster.DSN(), simURL)
	dataDir := t.TempDir()
	gw := startGatewayIn(t, cfg, &logs, dataDir)
	tn := newTenant(t, gw.URL, nil)
	cs := mustSession(t, gw.URL, tn.key.Key, false)
	var seen tally
	seen.add(call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil))
	if seen.ok != 1 {
		t.Fatalf("baseline call failed: %v", seen.failed)
	}
	stopCluster(t, cluster)
	// The cached key, policy and credential keep calls working; their
	// audit events wait in the writer's queue.
	for range 40 {
		seen.add(call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil))
	}
	if seen.ok < 20 {
		t.Fatalf("only %d calls succeeded during the outage: %v\n%s", seen.ok, seen.failed, tail(logs.String(), 3000))
	}
	gw.stop()
	if !strings.Contains(logs.String(), "audit events spooled at shutdown") {
		t.Fatalf("the stop did not spool the queued events\n%s", tail(logs.String(), 3000))
	}

	cluster = mustCluster(t, dir)
	startGatewayIn(t, cfg, &logs, dataDir)
	if !strings.Contains(logs.String(), "audit spool replayed") {
		t.Errorf("the next start did not replay the spool\n%s", tail(logs.String(), 3000))
	}
	db := mustDB(t, cluster.DSN())
	if got := count(t, db, `SELECT count(*) FROM audit_log WHERE kind = 'tool_call' AND outcome = 'ok'`); got != seen.ok {
		t.Errorf("audit rows with outcome ok = %d, want %d (one per call a client saw succeed)", got, seen.ok)
	}
	t.Logf("%d calls answered, the last %d during the outage, all audited", seen.ok, seen.ok-1)
}
