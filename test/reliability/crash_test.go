package reliability

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os/exec"
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
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
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
	var wg sync.WaitGroup
	const workers = 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				st, body := tn.try("POST", "/api/v1/workspaces/"+tn.ws+"/keys", map[string]string{"name": "k" + string(rune('a'+w))})
				if st == 0 {
					return // the gateway is gone
				}
				if st == http.StatusCreated {
					var k keyCreated
					if err := json.Unmarshal(body, &k); err == nil {
						mu.Lock()
						answered = append(answered, k)
						mu.Unlock()
					}
				}
			}
		}()
	}
	time.Sleep(600 * time.Millisecond)
	gw.kill()
	close(stop)
	wg.Wait()

	gw = startGateway(t, cfg, &logs)
	if len(answered) < 5 {
		t.Fatalf("only %d keys were created before the kill; the test proves little", len(answered))
	}
	for _, k := range append(answered, tn.key) {
		if st, err := keyWorks(gw.URL, k.Key); err != nil || st != http.StatusOK {
			t.Errorf("key %s answered 201 before the crash but now gets %d %v", k.ID, st, err)
		}
	}
	db := mustDB(t, dsn)
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

// TestCrashDuringAuditFlush kills the gateway right after answering calls,
// while their audit events are still queued in memory. The audit writer is
// asynchronous (batches every 200 ms): events not yet written at a SIGKILL
// are lost by design, and SECURITY.md says so. What must hold: every audit
// row committed before the kill is still there after the restart, no row is
// half-written, and the restarted gateway audits again.
func TestCrashDuringAuditFlush(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDatabase(t)
	cfg := newGWConfig(t, dsn, startSim(t))
	var logs testutil.LockedBuffer
	gw := startGateway(t, cfg, &logs)
	tn := newTenant(t, gw.URL, nil)
	cs := mustSession(t, gw.URL, tn.key.Key, false)
	db := mustDB(t, dsn)

	okCalls := 0
	for range 20 {
		if call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil).ok() {
			okCalls++
		}
	}
	if !eventually(10*time.Second, func() bool {
		return count(t, db, `SELECT count(*) FROM audit_log WHERE kind = 'tool_call'`) == okCalls
	}) {
		t.Fatalf("the first %d calls were not all audited", okCalls)
	}
	committed := count(t, db, `SELECT count(*) FROM audit_log`)

	// Calls answered just before the kill: their events are in the queue.
	var wg sync.WaitGroup
	var mu sync.Mutex
	late := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil).ok() {
					mu.Lock()
					late++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	gw.kill()

	gw = startGateway(t, cfg, &logs)
	after := count(t, db, `SELECT count(*) FROM audit_log`)
	if after < committed {
		t.Fatalf("audit rows = %d after the restart, %d were committed before the kill", after, committed)
	}
	if n := count(t, db, `SELECT count(*) FROM audit_log WHERE kind = 'tool_call' AND (action = '' OR outcome = '' OR workspace_id IS NULL)`); n != 0 {
		t.Errorf("%d half-written audit rows", n)
	}
	lost := committed + late - after
	t.Logf("calls answered in the last moments: %d; their audit rows lost to SIGKILL: %d (by design: the queue is in memory)", late, lost)
	if lost < 0 {
		t.Errorf("more audit rows (%d) than calls (%d)", after, committed+late)
	}
	cs = mustSession(t, gw.URL, tn.key.Key, false)
	if !call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil).ok() {
		t.Fatalf("call after the restart failed")
	}
	if !eventually(10*time.Second, func() bool { return count(t, db, `SELECT count(*) FROM audit_log`) >= after+1 }) {
		t.Errorf("the restarted gateway does not audit")
	}
	// A clean stop (SIGTERM) drains the queue: nothing is lost.
	before := count(t, db, `SELECT count(*) FROM audit_log`)
	for range 10 {
		if !call(cs, 20*time.Second, e2b.ToolListSandboxes, nil, nil).ok() {
			t.Fatalf("call failed")
		}
	}
	gw.stop()
	if got := count(t, db, `SELECT count(*) FROM audit_log`); got != before+10 {
		t.Errorf("audit rows after SIGTERM = %d, want %d: a clean shutdown must write the whole queue", got, before+10)
	}
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
	db := mustDB(t, dsn)
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
