package vault_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/vault"
)

func TestKeyring_RotateOldTermsOpen(t *testing.T) {
	k, st := mustKeyring(t)
	var cts [][]byte
	for want := uint32(1); want <= 4; want++ {
		if got := k.ActiveTerm(); got != want {
			t.Fatalf("ActiveTerm() = %d, want %d", got, want)
		}
		ct := mustSeal(t, k, fmt.Appendf(nil, "secret-%d", want), aad1)
		if term, _ := vault.TermOf(ct); term != want {
			t.Fatalf("Seal() sealed under term %d, want %d", term, want)
		}
		cts = append(cts, ct)
		if got := mustRotate(t, k); got != want+1 {
			t.Fatalf("Rotate() = %d, want %d", got, want+1)
		}
	}
	for i, ct := range cts {
		if pt, err := k.Open(ct, []byte(aad1)); err != nil || string(pt) != fmt.Sprintf("secret-%d", i+1) {
			t.Fatalf("Open(term %d) = %q, %v", i+1, pt, err)
		}
	}
	// A restart loads every term.
	k2 := mustOpen(t, rootA, st, vault.Options{})
	if got := k2.ActiveTerm(); got != 5 {
		t.Fatalf("ActiveTerm() after reopen = %d, want 5", got)
	}
	for _, ct := range cts {
		if _, err := k2.Open(ct, []byte(aad1)); err != nil {
			t.Fatalf("Open() after reopen err = %v", err)
		}
	}
	terms := k2.Terms()
	if len(terms) != 5 || !terms[4].Active || terms[0].Active || terms[0].Term != 1 || terms[0].CreatedAt.IsZero() {
		t.Fatalf("Terms() = %+v", terms)
	}
}

func TestKeyring_DeletedTermIsUnknown(t *testing.T) {
	k, st := mustKeyring(t)
	ct := mustSeal(t, k, []byte("x"), aad1)
	mustRotate(t, k)
	st.deleteTerm(1)
	k2 := mustOpen(t, rootA, st, vault.Options{})
	before := st.loadCount()
	if _, err := k2.OpenContext(context.Background(), ct, []byte(aad1)); !errors.Is(err, vault.ErrUnknownTerm) {
		t.Fatalf("OpenContext(deleted term) err = %v, want %v", err, vault.ErrUnknownTerm)
	}
	if st.loadCount() != before {
		t.Fatal("OpenContext() of a term below the active one reloaded the store")
	}
}

func TestKeyring_CanDelete(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	st := newMemStore()
	k := mustOpen(t, rootA, st, vault.Options{Now: func() time.Time { return *clock.Load() }, DeleteGrace: time.Hour})
	mustRotate(t, k) // term 2, created at now
	mustRotate(t, k) // term 3
	tests := []struct {
		name    string
		term    uint32
		rows    int64
		after   time.Duration
		wantErr error
	}{
		{name: "active", term: 3, after: 2 * time.Hour, wantErr: vault.ErrActiveTerm},
		{name: "above active", term: 4, after: 2 * time.Hour, wantErr: vault.ErrActiveTerm},
		{name: "active without rows", term: 3, rows: 0, after: 48 * time.Hour, wantErr: vault.ErrActiveTerm},
		{name: "unknown", term: 0, after: 2 * time.Hour, wantErr: vault.ErrUnknownTerm},
		{name: "rows use it", term: 1, rows: 3, after: 2 * time.Hour, wantErr: vault.ErrTermInUse},
		{name: "replaced too recently", term: 1, after: time.Minute, wantErr: vault.ErrTermInUse},
		{name: "old and unused", term: 1, after: 2 * time.Hour},
		{name: "middle term", term: 2, after: 2 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			later := now.Add(tt.after)
			clock.Store(&later)
			if err := k.CanDelete(tt.term, tt.rows); !errors.Is(err, tt.wantErr) {
				t.Fatalf("CanDelete(%d, %d) err = %v, want %v", tt.term, tt.rows, err, tt.wantErr)
			}
		})
	}
}

func TestKeyring_Rekey(t *testing.T) {
	ctx := context.Background()
	k, st, ct1, ct2 := mustSealAcrossRotation(t, "one", "two")

	if err := k.Rekey(ctx, rootB); err != nil {
		t.Fatalf("Rekey() err = %v", err)
	}
	if _, err := vault.Open(ctx, rootA, st, vault.Options{}); !errors.Is(err, vault.ErrWrongRootKey) {
		t.Fatalf("Open(old root) err = %v, want %v", err, vault.ErrWrongRootKey)
	}
	kb := mustOpen(t, rootB, st, vault.Options{})
	for _, c := range []struct {
		ct   []byte
		want string
	}{{ct1, "one"}, {ct2, "two"}} {
		for name, kr := range map[string]*vault.Keyring{"rekeyed": k, "new root": kb} {
			if pt, err := kr.Open(c.ct, []byte(aad1)); err != nil || string(pt) != c.want {
				t.Fatalf("%s: Open() = %q, %v, want %q", name, pt, err, c.want)
			}
		}
	}
	// The rekeyed keyring now wraps under the new root: its new term opens
	// for a keyring started with the new root.
	mustRotate(t, k)
	ct3 := mustSeal(t, k, []byte("three"), aad1)
	if pt, err := kb.OpenContext(ctx, ct3, []byte(aad1)); err != nil || string(pt) != "three" {
		t.Fatalf("OpenContext(term 3) = %q, %v", pt, err)
	}
	if err := k.Rekey(ctx, rootB); err == nil {
		t.Fatal("Rekey(current root) err = nil, want an error")
	}
	if err := k.Rekey(ctx, rootB[:5]); !errors.Is(err, vault.ErrInvalidRootKey) {
		t.Fatalf("Rekey(short) err = %v, want %v", err, vault.ErrInvalidRootKey)
	}
}

// A replica still running with the old root key after a rekey keeps serving
// what it holds but cannot add a term the new root key could not unwrap.
func TestKeyring_StaleReplicaAfterRekey(t *testing.T) {
	ctx := context.Background()
	k, st := mustKeyring(t)
	stale := mustOpen(t, rootA, st, vault.Options{})
	if err := k.Rekey(ctx, rootB); err != nil {
		t.Fatalf("Rekey() err = %v", err)
	}
	if _, err := stale.Rotate(ctx); !errors.Is(err, vault.ErrWrongRootKey) {
		t.Fatalf("stale Rotate() err = %v, want %v", err, vault.ErrWrongRootKey)
	}
	if err := stale.Refresh(ctx); !errors.Is(err, vault.ErrWrongRootKey) {
		t.Fatalf("stale Refresh() err = %v, want %v", err, vault.ErrWrongRootKey)
	}
	if got := st.terms(); len(got) != 1 {
		t.Fatalf("stored terms = %v, want [1]", got)
	}
	ct := mustSeal(t, stale, []byte("still works"), aad1)
	if pt, err := k.Open(ct, []byte(aad1)); err != nil || string(pt) != "still works" {
		t.Fatalf("Open() of the stale replica's seal = %q, %v", pt, err)
	}
}

func TestKeyring_RekeyRetriesAfterConcurrentRotate(t *testing.T) {
	ctx := context.Background()
	k, st := mustKeyring(t)
	other := mustOpen(t, rootA, st, vault.Options{})
	// Between the rekey's Load and its ReplaceWrappedKeys another replica adds
	// a term, which the first attempt did not rewrap: the store must refuse it
	// (ErrStale) and the rekey must start over rather than strand term 2.
	var once sync.Once
	st.beforeReplace = func() { once.Do(func() { mustRotate(t, other) }) }
	if err := k.Rekey(ctx, rootB); err != nil {
		t.Fatalf("Rekey() err = %v", err)
	}
	kb := mustOpen(t, rootB, st, vault.Options{})
	if got := kb.ActiveTerm(); got != 2 {
		t.Fatalf("ActiveTerm() with the new root = %d, want 2", got)
	}
	if got := k.ActiveTerm(); got != 2 {
		t.Fatalf("ActiveTerm() of the rekeyed keyring = %d, want 2", got)
	}
}

// mustUnseenTerm opens two replicas on one store and has the first rotate
// and seal pt under the new term, which the second (returned) has not
// loaded yet.
func mustUnseenTerm(t *testing.T, pt string) (st *memStore, b *vault.Keyring, ct []byte) {
	t.Helper()
	st = newMemStore()
	a := mustOpen(t, rootA, st, vault.Options{})
	b = mustOpen(t, rootA, st, vault.Options{})
	mustRotate(t, a)
	return st, b, mustSeal(t, a, []byte(pt), aad1)
}

func TestKeyring_ReplicaOpensNewTerm(t *testing.T) {
	ctx := context.Background()
	_, b, ct := mustUnseenTerm(t, "from a")

	if _, err := b.Open(ct, []byte(aad1)); !errors.Is(err, vault.ErrUnknownTerm) {
		t.Fatalf("Open() before refresh err = %v, want %v", err, vault.ErrUnknownTerm)
	}
	pt, err := b.OpenContext(ctx, ct, []byte(aad1))
	if err != nil || string(pt) != "from a" {
		t.Fatalf("OpenContext() = %q, %v", pt, err)
	}
	if got := b.ActiveTerm(); got != 2 {
		t.Fatalf("ActiveTerm() after refresh = %d, want 2", got)
	}
	// A term that exists nowhere still fails, after one reload.
	if _, err := b.OpenContext(ctx, withTerm(ct, 9), []byte(aad1)); !errors.Is(err, vault.ErrUnknownTerm) {
		t.Fatalf("OpenContext(term 9) err = %v, want %v", err, vault.ErrUnknownTerm)
	}
}

func TestKeyring_RefreshCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, b, ct := mustUnseenTerm(t, "x")

		gate := make(chan struct{})
		st.mu.Lock()
		st.beforeLoad = func() { <-gate }
		st.mu.Unlock()
		before := st.loadCount()
		const n = 32
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				_, err := b.OpenContext(ctx, ct, []byte(aad1))
				errs <- err
			})
		}
		synctest.Wait() // every caller has queued behind the first load
		close(gate)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("OpenContext() err = %v", err)
			}
		}
		if got := st.loadCount() - before; got > 2 {
			t.Fatalf("%d concurrent OpenContext calls made %d loads, want at most 2", n, got)
		}
	})
}

func TestKeyring_RefreshHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, st := mustKeyring(t)
		gate := make(chan struct{})
		defer close(gate)
		st.mu.Lock()
		st.beforeLoad = func() { <-gate }
		st.mu.Unlock()
		go k.Refresh(context.Background()) // holds the keyring's lock, blocked in Load
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := k.Refresh(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Refresh() err = %v, want %v", err, context.DeadlineExceeded)
		}
		// Seal and Open never wait for the store.
		ct := mustSeal(t, k, []byte("x"), aad1)
		if _, err := k.Open(ct, []byte(aad1)); err != nil {
			t.Fatalf("Open() err = %v", err)
		}
	})
}

func TestKeyring_ConcurrentRotateOnReplicas(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	const replicas, rotations = 4, 5
	ks := make([]*vault.Keyring, replicas)
	for i := range ks {
		ks[i] = mustOpen(t, rootA, st, vault.Options{})
	}
	var wg sync.WaitGroup
	got := make(chan uint32, replicas*rotations)
	for _, k := range ks {
		wg.Go(func() {
			for range rotations {
				term, err := k.Rotate(ctx)
				if err != nil {
					t.Errorf("Rotate() err = %v", err)
					return
				}
				got <- term
			}
		})
	}
	wg.Wait()
	close(got)
	seen := map[uint32]bool{}
	for term := range got {
		if seen[term] {
			t.Fatalf("two Rotate calls returned term %d", term)
		}
		seen[term] = true
	}
	if want := 1 + replicas*rotations; len(st.terms()) != want {
		t.Fatalf("stored %d terms, want %d", len(st.terms()), want)
	}
}

func TestKeyring_SealOpenDuringRotate(t *testing.T) {
	ctx := context.Background()
	k, _ := mustKeyring(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			aad := []byte(fmt.Sprintf("cred|v1|t|c%d", i))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				pt := fmt.Appendf(nil, "secret-%d-%d", i, n)
				ct, err := k.Seal(pt, aad)
				if err != nil {
					t.Errorf("Seal() err = %v", err)
					return
				}
				got, err := k.Open(ct, aad)
				if err != nil || !bytes.Equal(got, pt) {
					t.Errorf("Open() = %q, %v, want %q", got, err, pt)
					return
				}
				if _, _, err := k.Reseal(ctx, ct, aad); err != nil {
					t.Errorf("Reseal() err = %v", err)
					return
				}
				_ = k.Terms()
			}
		})
	}
	for range 20 {
		mustRotate(t, k)
		if err := k.Refresh(ctx); err != nil {
			t.Fatalf("Refresh() err = %v", err)
		}
	}
	close(stop)
	wg.Wait()
	if got := k.ActiveTerm(); got != 21 {
		t.Fatalf("ActiveTerm() = %d, want 21", got)
	}
}

func TestKeyring_Reseal(t *testing.T) {
	ctx := context.Background()
	k, _, old, current := mustSealAcrossRotation(t, "e2b_abc", "e2b_abc")

	got, changed, err := k.Reseal(ctx, old, []byte(aad1))
	if err != nil || !changed {
		t.Fatalf("Reseal(old) changed = %v, err = %v, want true, nil", changed, err)
	}
	if term, _ := vault.TermOf(got); term != 2 {
		t.Fatalf("Reseal(old) term = %d, want 2", term)
	}
	if pt, err := k.Open(got, []byte(aad1)); err != nil || string(pt) != "e2b_abc" {
		t.Fatalf("Open(resealed) = %q, %v", pt, err)
	}
	if _, err := k.Open(got, []byte("cred|v1|t1|c2")); !errors.Is(err, vault.ErrDecrypt) {
		t.Fatalf("Open(resealed, other row) err = %v, want %v", err, vault.ErrDecrypt)
	}

	got, changed, err = k.Reseal(ctx, current, []byte(aad1))
	if err != nil || changed || !bytes.Equal(got, current) {
		t.Fatalf("Reseal(current) changed = %v, err = %v, want unchanged", changed, err)
	}
	if _, _, err := k.Reseal(ctx, old, []byte("cred|v1|t1|c2")); !errors.Is(err, vault.ErrDecrypt) {
		t.Fatalf("Reseal(wrong aad) err = %v, want %v", err, vault.ErrDecrypt)
	}
	if _, _, err := k.Reseal(ctx, old[:3], []byte(aad1)); !errors.Is(err, vault.ErrMalformed) {
		t.Fatalf("Reseal(truncated) err = %v, want %v", err, vault.ErrMalformed)
	}
}

func TestKeyring_SealCapTriggersRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st := newMemStore()
		k := mustOpen(t, rootA, st, vault.Options{SealCap: 3})
		var errs atomic.Int32
		done := make(chan error, 1)
		go func() { done <- k.Maintain(ctx, func(error) { errs.Add(1) }) }()

		for range 3 {
			mustSeal(t, k, []byte("x"), aad1)
		}
		deadline := time.Now().Add(5 * time.Second)
		for k.ActiveTerm() != 2 {
			if time.Now().After(deadline) {
				t.Fatalf("ActiveTerm() = %d after reaching the seal cap, want 2", k.ActiveTerm())
			}
			time.Sleep(time.Millisecond)
		}
		ct := mustSeal(t, k, []byte("x"), aad1)
		if term, _ := vault.TermOf(ct); term != 2 {
			t.Fatalf("Seal() after rotation used term %d, want 2", term)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Maintain() = %v, want %v", err, context.Canceled)
		}
		if errs.Load() != 0 {
			t.Fatalf("Maintain reported %d errors", errs.Load())
		}
		// Exactly one rotation: later signals for the old term are ignored.
		if got := st.terms(); len(got) != 2 {
			t.Fatalf("stored terms = %v, want [1 2]", got)
		}
	})
}

func TestKeyring_SealLimitWithoutMaintain(t *testing.T) {
	k := mustOpen(t, rootA, newMemStore(), vault.Options{SealCap: 2})
	for range 4 { // up to twice the cap
		mustSeal(t, k, []byte("x"), aad1)
	}
	if _, err := k.Seal([]byte("x"), []byte(aad1)); !errors.Is(err, vault.ErrTermExhausted) {
		t.Fatalf("Seal() past the limit err = %v, want %v", err, vault.ErrTermExhausted)
	}
	mustRotate(t, k)
	mustSeal(t, k, []byte("x"), aad1)
	if got := k.Terms()[0].Seals; got < 4 {
		t.Fatalf("Terms()[0].Seals = %d, want at least 4", got)
	}
}

func TestKeyring_MaintainRotatesOldTermOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		start := time.Now()
		var offset atomic.Int64
		now := func() time.Time { return start.Add(time.Duration(offset.Load())) }
		st := newMemStore()
		opts := vault.Options{MaxTermAge: time.Hour, RefreshInterval: 5 * time.Millisecond, Now: now}
		a := mustOpen(t, rootA, st, opts)
		b := mustOpen(t, rootA, st, opts)
		var wg sync.WaitGroup
		for _, k := range []*vault.Keyring{a, b} {
			wg.Go(func() { k.Maintain(ctx, func(err error) { t.Errorf("Maintain: %v", err) }) })
		}
		offset.Store(int64(2 * time.Hour)) // term 1 is now too old on both replicas
		deadline := time.Now().Add(5 * time.Second)
		for a.ActiveTerm() != 2 || b.ActiveTerm() != 2 {
			if time.Now().After(deadline) {
				t.Fatalf("ActiveTerm() = %d, %d, want 2, 2", a.ActiveTerm(), b.ActiveTerm())
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(30 * time.Millisecond) // a few more ticks: nothing else to do
		cancel()
		wg.Wait()
		if got := st.terms(); len(got) != 2 {
			t.Fatalf("stored terms = %v, want [1 2]: both replicas rotated", got)
		}
	})
}
