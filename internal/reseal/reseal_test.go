package reseal_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/reseal"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/credtest"
	"github.com/mcpgate/mcpgate/vault"
)

var testRoot = []byte("reseal-test-root-key-0123456789a") // 32 bytes; tests only

func openKeyring(t *testing.T, db *store.DB) *vault.Keyring {
	t.Helper()
	k, err := vault.Open(context.Background(), testRoot, db.VaultKeys(), vault.Options{})
	if err != nil {
		t.Fatalf("vault.Open() err = %v", err)
	}
	return k
}

// fixture is a database holding n credentials sealed under term 1, and a
// keyring on it.
type fixture struct {
	db    *store.DB
	k     *vault.Keyring
	owner string
	want  map[string]string // credential by workspace id
}

func newFixture(t *testing.T, n int) *fixture {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t)
	f := &fixture{db: db, k: openKeyring(t, db), want: map[string]string{}}
	u, err := db.CreateUser(ctx, "owner@example.com", "hash", nil)
	if err != nil {
		t.Fatalf("CreateUser() err = %v", err)
	}
	f.owner = u.ID
	for range n {
		f.put(t, f.k)
	}
	return f
}

// put stores one more credential, in a new workspace, sealed by k.
func (f *fixture) put(t *testing.T, k store.Sealer) string {
	t.Helper()
	ws, key := credtest.Put(t, f.db, k, f.owner, len(f.want))
	f.want[ws] = key
	return ws
}

func (f *fixture) rotate(t *testing.T) uint32 {
	t.Helper()
	term, err := f.k.Rotate(context.Background())
	if err != nil {
		t.Fatalf("Rotate() err = %v", err)
	}
	return term
}

// usage is the credentials per term, "term:rows" in ascending term order.
func (f *fixture) usage(t *testing.T) string { return credtest.TermUsage(t, f.db) }

// checkOpen checks, with a freshly opened keyring (a restarted gateway),
// that every credential but those of skip opens to its value.
func (f *fixture) checkOpen(t *testing.T, skip ...string) {
	t.Helper()
	credtest.CheckOpen(t, f.db, openKeyring(t, f.db), f.want, skip...)
}

func TestRun_NothingToDo(t *testing.T) {
	f := newFixture(t, 3)
	rep, err := reseal.Run(context.Background(), f.db, f.k, reseal.Options{})
	if err != nil || rep.Moved != 0 || rep.Left != 0 || rep.Term != 1 {
		t.Fatalf("Run() = %+v, %v; want nothing moved, term 1", rep, err)
	}
	if got := f.usage(t); got != "1:3" {
		t.Fatalf("usage = %q, want 1:3", got)
	}
}

// TOTP secrets are sealed like credentials, so a rotation moves them too:
// a run after a rotation leaves nothing of either under the old term, and
// every secret still opens to its value with a freshly opened keyring.
func TestRun_MovesTOTPSecrets(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 2)
	secrets := map[string]mcpgate.Secret{}
	for i, s := range []mcpgate.Secret{"JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP", "KRSXG5DTMVRXEZLUKRSXG5DTMVRXEZLU"} {
		u, err := f.db.CreateUser(ctx, fmt.Sprintf("totp%d@example.com", i), "hash", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.db.BeginTOTP(ctx, f.k, u.ID, s); err != nil {
			t.Fatalf("BeginTOTP() err = %v", err)
		}
		secrets[u.ID] = s
	}
	if got := f.usage(t); got != "1:4" {
		t.Fatalf("usage = %q, want 1:4 (two credentials, two TOTP secrets)", got)
	}
	f.rotate(t)
	rep, err := reseal.Run(ctx, f.db, f.k, reseal.Options{Batch: 1})
	if err != nil || rep.Moved != 4 || rep.Left != 0 || len(rep.Failed) != 0 {
		t.Fatalf("Run() = %+v, %v; want 4 moved, none left", rep, err)
	}
	if got := f.usage(t); got != "2:4" {
		t.Fatalf("usage = %q, want 2:4", got)
	}
	f.checkOpen(t)
	k := openKeyring(t, f.db)
	for user, want := range secrets {
		if got, err := f.db.FindTOTP(ctx, k, user); err != nil || got.Secret != want {
			t.Fatalf("FindTOTP(%s) = %+v, %v; want %q", user, got, err, want.Reveal())
		}
	}
}

// Two replicas re-sealing at once share the rows: every row moves exactly
// once, and none is left under the old term.
func TestRun_ConcurrentRunsMoveEachRowOnce(t *testing.T) {
	const n = 60
	f := newFixture(t, n)
	f.rotate(t)
	other := openKeyring(t, f.db) // another replica, already on term 2
	var wg sync.WaitGroup
	reps := make([]reseal.Report, 2)
	errs := make([]error, 2)
	for i, k := range []*vault.Keyring{f.k, other} {
		wg.Go(func() {
			reps[i], errs[i] = reseal.Run(context.Background(), f.db, k, reseal.Options{Batch: 3})
		})
	}
	wg.Wait()
	for i := range reps {
		if errs[i] != nil || reps[i].Term != 2 || reps[i].Left != 0 || len(reps[i].Failed) != 0 {
			t.Fatalf("Run() #%d = %+v, %v; want term 2, none left or failed", i, reps[i], errs[i])
		}
	}
	if total := reps[0].Moved + reps[1].Moved; total != n {
		t.Fatalf("the runs moved %d + %d rows, want %d in all (each row once)", reps[0].Moved, reps[1].Moved, n)
	}
	t.Logf("moved %d and %d", reps[0].Moved, reps[1].Moved)
	if got := f.usage(t); got != fmt.Sprintf("2:%d", n) {
		t.Fatalf("usage = %q, want 2:%d", got, n)
	}
	f.checkOpen(t)
}

// A run stopped half-way (shutdown, crash) leaves every row readable, and
// the next run finishes the job.
func TestRun_ResumesAfterCancel(t *testing.T) {
	const n = 50
	f := newFixture(t, n)
	f.rotate(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := reseal.Run(ctx, f.db, f.k, reseal.Options{Batch: 5, Pause: 5 * time.Millisecond,
		Progress: func(r reseal.Report) {
			if r.Moved >= 20 {
				cancel()
			}
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() err = %v, want context.Canceled", err)
	}
	if first.Moved < 20 || first.Moved >= n {
		t.Fatalf("Run() moved %d before it stopped, want 20 to %d", first.Moved, n-1)
	}
	if got, want := f.usage(t), fmt.Sprintf("1:%d 2:%d", n-first.Moved, first.Moved); got != want {
		t.Fatalf("usage after the stop = %q, want %q", got, want)
	}
	f.checkOpen(t)

	second, err := reseal.Run(context.Background(), f.db, openKeyring(t, f.db), reseal.Options{Batch: 5})
	if err != nil || second.Moved != n-first.Moved || second.Left != 0 {
		t.Fatalf("resumed Run() = %+v, %v; want the other %d moved, none left", second, err, n-first.Moved)
	}
	if got := f.usage(t); got != fmt.Sprintf("2:%d", n) {
		t.Fatalf("usage = %q, want 2:%d", got, n)
	}
	f.checkOpen(t)
}

// damageOne flips a byte of the tag of one stored credential, so it no
// longer opens, and returns its workspace and the connection's id.
func (f *fixture) damageOne(t *testing.T) (ws, id string) {
	t.Helper()
	for ws = range f.want {
		break
	}
	err := f.db.Pool.QueryRow(context.Background(), `UPDATE connections
		SET ciphertext = set_byte(ciphertext, length(ciphertext) - 1, get_byte(ciphertext, length(ciphertext) - 1) # 255)
		WHERE workspace_id = $1 RETURNING id::text`, ws).Scan(&id)
	if err != nil {
		t.Fatalf("damage credential: %v", err)
	}
	return ws, id
}

// A damaged row is skipped and reported; it does not stop the others.
func TestRun_SkipsAndReportsDamagedRow(t *testing.T) {
	f := newFixture(t, 6)
	badWS, badID := f.damageOne(t)
	f.rotate(t)
	var progress []reseal.Report
	rep, err := reseal.Run(context.Background(), f.db, f.k, reseal.Options{Batch: 2,
		Progress: func(r reseal.Report) { progress = append(progress, r) }})
	if err != nil {
		t.Fatalf("Run() err = %v", err)
	}
	if rep.Moved != 5 || rep.Left != 1 || !cmp.Equal(rep.Failed, []string{badID}) {
		t.Fatalf("Run() = %+v; want 5 moved, 1 left, failed [%s]", rep, badID)
	}
	if len(progress) == 0 || !cmp.Equal(progress[len(progress)-1].Failed, []string{badID}) {
		t.Fatalf("progress reports = %+v; want the last to list %s", progress, badID)
	}
	if got := f.usage(t); got != "1:1 2:5" {
		t.Fatalf("usage = %q, want 1:1 2:5 (the damaged row stays)", got)
	}
	f.checkOpen(t, badWS)
}

// Until the new term is Settle old, Run keeps sweeping, and moves a
// credential that a replica still on the old term saved after the others
// moved.
func TestRun_SettleCatchesLateWrites(t *testing.T) {
	f := newFixture(t, 4)
	stale := openKeyring(t, f.db) // loaded before the rotation; never refreshed
	f.rotate(t)
	var late string
	start := time.Now()
	rep, err := reseal.Run(context.Background(), f.db, f.k, reseal.Options{Settle: 2 * time.Second,
		Progress: func(r reseal.Report) {
			if r.Settling > 0 && late == "" {
				late = f.put(t, stale)
			}
		}})
	if err != nil || rep.Moved != 5 || rep.Left != 0 {
		t.Fatalf("Run() = %+v, %v; want 5 moved (the late one too), none left", rep, err)
	}
	if late == "" {
		t.Fatal("Run() never reported settling")
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("Run() returned after %s, before the term was 2s old", d)
	}
	if got := f.usage(t); got != "2:5" {
		t.Fatalf("usage = %q, want 2:5", got)
	}
	f.checkOpen(t)
}

// Watch moves the rows by itself at start-up and after each change of the
// active term, logs what it did without key material, and stops on cancel.
func TestWatch(t *testing.T) {
	f := newFixture(t, 8)
	badWS, badID := f.damageOne(t)
	f.rotate(t) // before Watch starts: the start-up pass moves these
	logs := &testutil.LockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- reseal.Watch(ctx, f.db, f.k, log, reseal.Options{Poll: 10 * time.Millisecond, Settle: time.Hour})
	}()
	const resealed = `"msg":"credentials re-sealed"`
	credtest.WaitTermUsage(t, f.db, "1:1 2:7")
	waitLog(t, logs, resealed, 1)
	f.rotate(t) // Maintain's rotation, seen through ActiveTerm
	credtest.WaitTermUsage(t, f.db, "1:1 3:7")
	waitLog(t, logs, resealed, 2)
	// Another replica rotates; this one loads the term on its next refresh.
	if _, err := openKeyring(t, f.db).Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.k.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	credtest.WaitTermUsage(t, f.db, "1:1 4:7")
	waitLog(t, logs, resealed, 3)
	f.checkOpen(t, badWS)

	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Watch() err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch() still running 5s after cancel")
	}
	out := logs.String()
	if n := strings.Count(out, `"moved":7,`); n != 3 {
		t.Fatalf("log has %d lines saying 7 rows moved, want 3 (one per term):\n%s", n, out)
	}
	if n := strings.Count(out, badID); n != 1 {
		t.Fatalf("log names the damaged connection %s %d times, want once:\n%s", badID, n, out)
	}
	for _, key := range f.want {
		if strings.Contains(out, key) || strings.Contains(out, key[4:20]) {
			t.Fatalf("log shows a credential:\n%s", out)
		}
	}
	if strings.Contains(out, `"level":"WARN"`) {
		t.Fatalf("log has a warning:\n%s", out)
	}
}

// waitLog waits until logs hold n lines containing s.
func waitLog(t *testing.T, logs *testutil.LockedBuffer, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(logs.String(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("log has fewer than %d lines with %s after 10s:\n%s", n, s, logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
