package reliability

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/vault"
)

// keyWorks reports whether the gateway accepts key (an MCP initialize).
func keyWorks(base, key string) (int, error) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(mcpRequest(base, key, []byte(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestCrashDuringKeyCreation kills the gateway with SIGKILL while clients
// create keys, and restarts it: every key the API answered 201 for works, and
// every stored key row is whole (a key is one INSERT: it commits or not).
func TestCrashDuringKeyCreation(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDatabase(t)
	cfg := newGWConfig(t, dsn, startSim(t))
	var logs testutil.LockedBuffer
	gw := startGateway(t, cfg, &logs)
	tn := newTenant(t, gw.URL, nil)

	var mu sync.Mutex
	var answered []keyCreated
	stop := make(chan struct{})
	const workers = 4
	wait := closedLoop(workers, stop, func(w, _ int) bool {
		st, body := tn.try("POST", "/api/v1/workspaces/"+tn.ws+"/keys", map[string]string{"name": "k" + string(rune('a'+w))})
		if st == 0 {
			return false // the gateway is gone
		}
		if st == http.StatusCreated {
			var k keyCreated
			if err := json.Unmarshal(body, &k); err == nil {
				mu.Lock()
				answered = append(answered, k)
				mu.Unlock()
			}
		}
		return true
	})
	time.Sleep(600 * time.Millisecond)
	gw.kill()
	close(stop)
	wait()

	gw = startGateway(t, cfg, &logs)
	if len(answered) < 5 {
		t.Fatalf("only %d keys were created before the kill; the test proves little", len(answered))
	}
	for _, k := range append(answered, tn.key) {
		if st, err := keyWorks(gw.URL, k.Key); err != nil || st != http.StatusOK {
			t.Errorf("key %s answered 201 before the crash but now gets %d %v", k.ID, st, err)
		}
	}
	db := testutil.MustConnect(t, dsn)
	if n := count(t, db, `SELECT count(*) FROM api_keys WHERE octet_length(secret_hash) <> 32 OR name = ''`); n != 0 {
		t.Errorf("%d half-written key rows", n)
	}
	rows := count(t, db, `SELECT count(*) FROM api_keys`)
	// A key whose INSERT committed just before the kill, but whose answer
	// never left, exists without its owner ever seeing it: at most one per
	// request in flight. It is inert (its secret is known to nobody).
	if rows < len(answered)+1 || rows > len(answered)+1+workers {
		t.Errorf("api_keys rows = %d, want between %d and %d", rows, len(answered)+1, len(answered)+1+workers)
	}
	t.Logf("%d keys answered 201 before the kill, %d rows after restart", len(answered), rows-1)
}

// killWindow bounds how long before a SIGKILL a call may have been answered
// and still lose its audit row: the writer batches every 200 ms
// (audit.Options.FlushEvery), and then the batch takes its time to commit,
// which on a loaded machine was seen at over 100 ms. README and SECURITY.md
// state it.
const killWindow = 500 * time.Millisecond

// TestKillReplica_AuditWindow kills one of two replicas with SIGKILL under
// an open loop of 100 calls/s split between them. The audit writer is
// asynchronous: events still queued at a SIGKILL are lost by design. What
// must hold: the only calls without an audit row are the killed replica's
// answered within killWindow of the kill; the other replica loses nothing;
// no row is half-written; the restarted replica audits again.
func TestKillReplica_AuditWindow(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDatabase(t)
	f := newFixture(t, dsn, startSim(t))
	g2 := f.replica(t)
	clients := []*rpcClient{f.rc, newRPCClient(t, g2.URL, f.tn.key.Key)}
	db := testutil.MustConnect(t, dsn)

	var calls callLog
	stop := make(chan struct{})
	wait := openLoop(100, stop, func(i int) {
		calls.add(clients[i%2].call(e2b.ToolListSandboxes, fmt.Sprintf("r%d-%d", i%2+1, i)))
	})
	time.Sleep(2 * time.Second)
	killed := time.Now()
	f.gw.kill()
	time.Sleep(time.Second)
	close(stop)
	wait()

	g1 := startGateway(t, f.cfg, f.logs)
	if r := newRPCClient(t, g1.URL, f.tn.key.Key).call(e2b.ToolListSandboxes, "after-restart"); !r.ok() {
		t.Fatalf("call on the restarted replica = %v", r)
	}
	all := calls.all()
	answered := 0
	for _, r := range all {
		if r.status == http.StatusOK {
			answered++
		}
	}
	var missing []rpcResult
	eventually(10*time.Second, func() bool {
		missing = unaudited(t, db, append(all, rpcResult{tag: "after-restart", status: http.StatusOK}))
		return len(missing) == 0 || !slices.ContainsFunc(missing, func(r rpcResult) bool { return !strings.HasPrefix(r.tag, "r1-") })
	})
	var oldest time.Duration
	for _, r := range missing {
		age := killed.Sub(r.answered)
		oldest = max(oldest, age)
		if !strings.HasPrefix(r.tag, "r1-") || age > killWindow {
			t.Errorf("call %s answered %s before the kill has no audit row; only the killed replica's last %s may be lost",
				r.tag, age.Round(time.Millisecond), killWindow)
		}
	}
	if n := count(t, db, `SELECT count(*) FROM audit_log WHERE kind = 'tool_call' AND (action = '' OR outcome = '' OR workspace_id IS NULL)`); n != 0 {
		t.Errorf("%d half-written audit rows", n)
	}
	t.Logf("%d calls at 100 calls/s on two replicas, %d answered; replica 1 killed: %d audit rows lost, all answered within %s of the kill",
		len(all), answered, len(missing), oldest.Round(time.Millisecond))
}

// TestStop_AllAudited stops the gateway with SIGTERM under an open loop of
// 100 calls/s while the database is up: every call it answered has its
// audit row (a clean stop writes the whole queue).
func TestStop_AllAudited(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDatabase(t)
	f := newFixture(t, dsn, startSim(t))
	var calls callLog
	stop := make(chan struct{})
	wait := openLoop(100, stop, func(i int) { calls.add(f.rc.call(e2b.ToolListSandboxes, fmt.Sprintf("c%d", i))) })
	time.Sleep(2 * time.Second)
	f.gw.stop()
	close(stop)
	wait()

	all := calls.all()
	answered := 0
	for _, r := range all {
		if r.status == http.StatusOK && !r.rpcError {
			answered++
		}
	}
	// Nothing is waited for: the rows are there when the process has exited.
	missing := unaudited(t, testutil.MustConnect(t, dsn), all)
	if len(missing) > 0 {
		t.Errorf("%d of %d answered calls have no audit row after SIGTERM, the first: %v", len(missing), answered, missing[0])
	}
	t.Logf("SIGTERM at 100 calls/s: %d of %d answered calls audited", answered-len(missing), answered)
}

// TestCrashDuringVaultRotation kills `mcpgate vault rotate` with SIGKILL
// while it re-seals credentials: every credential still opens with the
// same plaintext (each re-seal is one row's transaction, and every term
// stays installed), and running rotate --reseal-only afterwards finishes the
// job.
func TestCrashDuringVaultRotation(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDatabase(t)
	cfg := newGWConfig(t, dsn, "http://127.0.0.1:1")
	ctx := context.Background()
	sdb, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	root, _ := base64.StdEncoding.DecodeString(cfg.encKey)
	keyring, err := vault.Open(ctx, root, sdb.VaultKeys(), vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	creds := map[string]mcpgate.Secret{}
	for i := range n {
		u, err := sdb.CreateUser(ctx, "v"+testutil.RandomHex(6)+"@example.com", "x", nil)
		if err != nil {
			t.Fatal(err)
		}
		ws, err := sdb.CreateWorkspace(ctx, u.ID, "w")
		if err != nil {
			t.Fatal(err)
		}
		secret := mcpgate.Secret("e2b_" + testutil.RandomHex(20))
		if err := sdb.PutConnection(ctx, keyring, &mcpgate.Connection{WorkspaceID: ws.ID, Connector: "e2b", KeyHint: "e2b_…",
			VerifiedAt: time.Now()}, secret); err != nil {
			t.Fatalf("PutConnection %d: %v", i, err)
		}
		creds[ws.ID] = secret
	}
	db := testutil.MustConnect(t, dsn)
	startTerm := count(t, db, `SELECT max(term) FROM vault_keys`)

	rotate := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin.mcpgate, append([]string{"vault", "rotate"}, args...)...)
		cmd.Env = cfg.env(t.TempDir())
		return cmd
	}
	cmd := rotate("--batch", "1", "--pause", "5ms", "--settle", "0s")
	var out testutil.LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	moved := eventually(30*time.Second, func() bool {
		return count(t, db, `SELECT count(*) FROM connections WHERE key_term > $1`, startTerm) >= n/4
	})
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if !moved {
		t.Fatalf("rotate did not re-seal a quarter of the credentials in 30 s:\n%s", out.String())
	}
	newer := count(t, db, `SELECT count(*) FROM connections WHERE key_term > $1`, startTerm)
	t.Logf("killed rotate with %d of %d credentials re-sealed", newer, n)
	if newer == n {
		t.Logf("rotate finished before the kill; the crash case was not exercised this run")
	}

	check := func(when string) {
		t.Helper()
		k, err := vault.Open(ctx, root, sdb.VaultKeys(), vault.Options{})
		if err != nil {
			t.Fatalf("%s: vault.Open() err = %v", when, err)
		}
		bad := 0
		for ws, want := range creds {
			got, err := sdb.OpenCredential(ctx, k, ws, "e2b")
			if err != nil || got.Reveal() != want.Reveal() {
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d credentials do not open to their plaintext", when, bad, n)
		}
		if n := count(t, db, `SELECT count(*) FROM connections c WHERE NOT EXISTS (SELECT 1 FROM vault_keys v WHERE v.term = c.key_term)`); n != 0 {
			t.Errorf("%s: %d credentials sealed under a term that is not installed", when, n)
		}
	}
	check("after the kill")

	cmd = rotate("--reseal-only", "--batch", "50", "--settle", "0s")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("vault rotate --reseal-only: %v\n%s", err, b)
	}
	check("after finishing")
	if n := count(t, db, `SELECT count(*) FROM connections WHERE key_term <> (SELECT max(term) FROM vault_keys)`); n != 0 {
		t.Errorf("%d credentials not under the newest term after rotate --reseal-only", n)
	}
}
