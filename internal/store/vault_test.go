package store_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/vault"
)

// TestVaultKeys_Contract drives the Postgres KeyStore directly with opaque
// bytes, checking each rule of the vault.KeyStore contract.
func TestVaultKeys_Contract(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	ks := db.VaultKeys()
	created := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	wk := func(term uint32, wrapped string) vault.WrappedKey {
		return vault.WrappedKey{Term: term, Wrapped: []byte(wrapped), CreatedAt: created.Add(time.Duration(term) * time.Hour)}
	}

	check, keys, err := ks.Load(ctx)
	if err != nil || check != nil || len(keys) != 0 {
		t.Fatalf("Load() on a fresh database = %q, %v, %v; want nothing", check, keys, err)
	}
	if err := ks.InsertKey(ctx, []byte("c1"), wk(1, "k1")); !errors.Is(err, vault.ErrStale) {
		t.Fatalf("InsertKey() before Init err = %v, want %v", err, vault.ErrStale)
	}
	if err := ks.Init(ctx, []byte("c1"), wk(1, "k1")); err != nil {
		t.Fatalf("Init() err = %v", err)
	}
	if err := ks.Init(ctx, []byte("c2"), wk(1, "other")); !errors.Is(err, vault.ErrCheckExists) {
		t.Fatalf("second Init() err = %v, want %v", err, vault.ErrCheckExists)
	}

	tests := []struct {
		name    string
		check   string
		key     vault.WrappedKey
		wantErr error
	}{
		{name: "stale check", check: "c-old", key: wk(2, "k2"), wantErr: vault.ErrStale},
		{name: "same term", check: "c1", key: wk(1, "k1b"), wantErr: vault.ErrTermExists},
		{name: "next term", check: "c1", key: wk(2, "k2")},
		{name: "term below max", check: "c1", key: wk(1, "k1c"), wantErr: vault.ErrTermExists},
		{name: "gap above max", check: "c1", key: wk(5, "k5")},
		{name: "between existing terms", check: "c1", key: wk(3, "k3"), wantErr: vault.ErrTermExists},
	}
	for _, tt := range tests {
		t.Run("InsertKey/"+tt.name, func(t *testing.T) {
			if err := ks.InsertKey(ctx, []byte(tt.check), tt.key); !errors.Is(err, tt.wantErr) {
				t.Fatalf("InsertKey() err = %v, want %v", err, tt.wantErr)
			}
		})
	}
	check, keys, err = ks.Load(ctx)
	if err != nil {
		t.Fatalf("Load() err = %v", err)
	}
	want := []vault.WrappedKey{wk(1, "k1"), wk(2, "k2"), wk(5, "k5")}
	if !bytes.Equal(check, []byte("c1")) || !cmp.Equal(keys, want, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })) {
		t.Fatalf("Load() = %q, %+v; want c1, %+v", check, keys, want)
	}

	replace := []struct {
		name     string
		oldCheck string
		keys     []vault.WrappedKey
		wantErr  error
	}{
		{name: "stale check", oldCheck: "c-old", keys: []vault.WrappedKey{wk(1, "r1"), wk(2, "r2"), wk(5, "r5")}, wantErr: vault.ErrStale},
		{name: "a term missing", oldCheck: "c1", keys: []vault.WrappedKey{wk(1, "r1"), wk(2, "r2")}, wantErr: vault.ErrStale},
		{name: "an extra term", oldCheck: "c1", keys: []vault.WrappedKey{wk(1, "r1"), wk(2, "r2"), wk(5, "r5"), wk(6, "r6")}, wantErr: vault.ErrStale},
		{name: "another term set", oldCheck: "c1", keys: []vault.WrappedKey{wk(1, "r1"), wk(2, "r2"), wk(4, "r4")}, wantErr: vault.ErrStale},
		{name: "same term set", oldCheck: "c1", keys: []vault.WrappedKey{wk(5, "r5"), wk(1, "r1"), wk(2, "r2")}},
	}
	for _, tt := range replace {
		t.Run("ReplaceWrappedKeys/"+tt.name, func(t *testing.T) {
			before, beforeKeys, _ := ks.Load(ctx)
			err := ks.ReplaceWrappedKeys(ctx, []byte(tt.oldCheck), []byte("c2"), tt.keys)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ReplaceWrappedKeys() err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				after, afterKeys, _ := ks.Load(ctx)
				if !bytes.Equal(before, after) || !cmp.Equal(beforeKeys, afterKeys) {
					t.Fatal("a refused ReplaceWrappedKeys() changed the store")
				}
			}
		})
	}
	check, keys, _ = ks.Load(ctx)
	want = []vault.WrappedKey{wk(1, "r1"), wk(2, "r2"), wk(5, "r5")}
	if !bytes.Equal(check, []byte("c2")) || !cmp.Equal(keys, want, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })) {
		t.Fatalf("Load() after replace = %q, %+v; want c2, %+v (created_at kept)", check, keys, want)
	}
	if err := ks.InsertKey(ctx, []byte("c1"), wk(6, "k6")); !errors.Is(err, vault.ErrStale) {
		t.Fatalf("InsertKey() with the replaced check err = %v, want %v", err, vault.ErrStale)
	}
}

// TestVaultKeys_Replicas runs two keyrings on one database, as two gateway
// replicas do.
func TestVaultKeys_Replicas(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()

	// Both start at once on an empty database: one creates term 1, both
	// use it.
	var k1, k2 *vault.Keyring
	var wg sync.WaitGroup
	var err1, err2 error
	wg.Add(2)
	go func() { defer wg.Done(); k1, err1 = vault.Open(ctx, testRoot, db.VaultKeys(), vault.Options{}) }()
	go func() { defer wg.Done(); k2, err2 = vault.Open(ctx, testRoot, db.VaultKeys(), vault.Options{}) }()
	wg.Wait()
	if err1 != nil || err2 != nil {
		t.Fatalf("vault.Open() errs = %v, %v", err1, err2)
	}
	aad := vault.CredentialAAD("ws-1", "conn-1")
	ct1, err := k1.Seal([]byte(keyA), aad)
	if err != nil {
		t.Fatalf("Seal() err = %v", err)
	}
	if got, err := k2.Open(ct1, aad); err != nil || string(got) != keyA {
		t.Fatalf("replica Open() = %q, %v", got, err)
	}

	// Rotate on one; the other opens what it seals under the new term.
	term, err := k1.Rotate(ctx)
	if err != nil || term != 2 {
		t.Fatalf("Rotate() = %d, %v; want 2", term, err)
	}
	ct2, err := k1.Seal([]byte(keyB), aad)
	if err != nil {
		t.Fatalf("Seal() err = %v", err)
	}
	if _, err := k2.Open(ct2, aad); !errors.Is(err, vault.ErrUnknownTerm) {
		t.Fatalf("replica Open() before refresh err = %v, want %v", err, vault.ErrUnknownTerm)
	}
	if got, err := k2.OpenContext(ctx, ct2, aad); err != nil || string(got) != keyB {
		t.Fatalf("replica OpenContext() = %q, %v; want it to load term 2", got, err)
	}
	if got := k2.ActiveTerm(); got != 2 {
		t.Fatalf("replica ActiveTerm() = %d, want 2", got)
	}

	// Concurrent rotations on both never reuse a term.
	var t1, t2 uint32
	wg.Add(2)
	go func() { defer wg.Done(); t1, err1 = k1.Rotate(ctx) }()
	go func() { defer wg.Done(); t2, err2 = k2.Rotate(ctx) }()
	wg.Wait()
	if err1 != nil || err2 != nil || t1 == t2 || max(t1, t2) != 4 {
		t.Fatalf("concurrent Rotate() = %d, %v and %d, %v; want terms 3 and 4", t1, err1, t2, err2)
	}

	// Rekey on one: a restart with the old root key is refused, the new one
	// opens everything, and the other replica, still running, keeps opening.
	if err := k1.Rekey(ctx, otherRoot); err != nil {
		t.Fatalf("Rekey() err = %v", err)
	}
	if _, err := vault.Open(ctx, testRoot, db.VaultKeys(), vault.Options{}); !errors.Is(err, vault.ErrWrongRootKey) {
		t.Fatalf("vault.Open(old root) after rekey err = %v, want %v", err, vault.ErrWrongRootKey)
	}
	k3, err := vault.Open(ctx, otherRoot, db.VaultKeys(), vault.Options{})
	if err != nil {
		t.Fatalf("vault.Open(new root) err = %v", err)
	}
	for _, ct := range [][]byte{ct1, ct2} {
		if _, err := k3.Open(ct, aad); err != nil {
			t.Fatalf("Open() with the new root key err = %v", err)
		}
		if _, err := k2.Open(ct, aad); err != nil {
			t.Fatalf("running replica Open() after rekey err = %v", err)
		}
	}
	if err := k2.Refresh(ctx); !errors.Is(err, vault.ErrWrongRootKey) {
		t.Fatalf("running replica Refresh() after rekey err = %v, want %v", err, vault.ErrWrongRootKey)
	}
}

func TestVaultKeys_WrongRootKeyChangesNothing(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	k := mustKeyringOn(t, db, testRoot)
	if _, err := k.Rotate(ctx); err != nil {
		t.Fatalf("Rotate() err = %v", err)
	}
	check, keys, _ := db.VaultKeys().Load(ctx)
	if _, err := vault.Open(ctx, otherRoot, db.VaultKeys(), vault.Options{}); !errors.Is(err, vault.ErrWrongRootKey) {
		t.Fatalf("vault.Open(wrong root) err = %v, want %v", err, vault.ErrWrongRootKey)
	}
	check2, keys2, _ := db.VaultKeys().Load(ctx)
	if !bytes.Equal(check, check2) || !cmp.Equal(keys, keys2) {
		t.Fatal("vault.Open(wrong root) changed the key store")
	}
}
