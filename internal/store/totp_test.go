package store_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/vault"
)

const totpSecret = mcpgate.Secret("JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP")

// mustPendingTOTP is a fresh database with a keyring and one person, ada,
// whose enrolment with totpSecret is pending.
func mustPendingTOTP(t *testing.T) (*store.DB, *vault.Keyring, string) {
	t.Helper()
	db := storetest.Open(t)
	k := mustKeyringOn(t, db, testRoot)
	ada := mustUser(t, db, "ada@example.com").ID
	if err := db.BeginTOTP(context.Background(), k, ada, totpSecret); err != nil {
		t.Fatal(err)
	}
	return db, k, ada
}

// TestTOTP_Sealed: the secret is stored sealed, bound to its person and row,
// and a pending enrolment becomes the person's factor only when confirmed.
func TestTOTP_Sealed(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	k := mustKeyringOn(t, db, testRoot)
	ada, bob := mustUser(t, db, "ada@example.com").ID, mustUser(t, db, "bob@example.com").ID
	if err := db.BeginTOTP(ctx, k, ada, totpSecret); err != nil {
		t.Fatalf("BeginTOTP() err = %v", err)
	}
	if err := db.BeginTOTP(ctx, k, bob, "KRSXG5DTMVRXEZLUKRSXG5DTMVRXEZLU"); err != nil {
		t.Fatalf("BeginTOTP(bob) err = %v", err)
	}
	var stored []byte
	if err := db.Pool.QueryRow(ctx, `SELECT secret FROM totp_factors WHERE user_id = $1`, ada).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stored, []byte(totpSecret.Reveal())) {
		t.Fatal("the stored secret holds the plaintext")
	}
	f, err := db.FindTOTP(ctx, k, ada)
	if err != nil || f.Secret != totpSecret || f.Confirmed {
		t.Fatalf("FindTOTP() = %+v, %v; want the pending secret", f, err)
	}
	if on, _ := db.TOTPEnabled(ctx, ada); on {
		t.Fatal("TOTPEnabled() of a pending enrolment = true")
	}
	// Another person's ciphertext copied into this row does not open.
	if _, err := db.Pool.Exec(ctx, `UPDATE totp_factors SET secret = (SELECT secret FROM totp_factors WHERE user_id = $2) WHERE user_id = $1`, bob, ada); err != nil {
		t.Fatal(err)
	}
	if _, err := db.FindTOTP(ctx, k, bob); !errors.Is(err, vault.ErrDecrypt) {
		t.Fatalf("FindTOTP(copied ciphertext) err = %v, want ErrDecrypt", err)
	}

	hash := mcpgate.HashToken("code")
	if err := db.ConfirmTOTP(ctx, ada, 100, [][]byte{hash}); err != nil {
		t.Fatalf("ConfirmTOTP() err = %v", err)
	}
	if err := db.ConfirmTOTP(ctx, ada, 101, nil); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("ConfirmTOTP() twice err = %v, want not_found", err)
	}
	if err := db.BeginTOTP(ctx, k, ada, totpSecret); mcpgate.ErrorCode(err) != mcpgate.EConflict {
		t.Fatalf("BeginTOTP() while confirmed err = %v, want conflict", err)
	}
	// Steps only move forward.
	for _, tt := range []struct {
		step int64
		want bool
	}{{100, false}, {99, false}, {102, true}, {101, false}, {102, false}, {103, true}} {
		if ok, err := db.AcceptTOTPStep(ctx, ada, tt.step); err != nil || ok != tt.want {
			t.Fatalf("AcceptTOTPStep(%d) = %v, %v; want %v", tt.step, ok, err, tt.want)
		}
	}
	// Bob's enrolment is pending: no step is taken, no code is spent.
	if ok, _ := db.AcceptTOTPStep(ctx, bob, 500); ok {
		t.Fatal("AcceptTOTPStep() of a pending enrolment = true")
	}
	if ok, _, _ := db.UseRecoveryCode(ctx, bob, hash); ok {
		t.Fatal("another person spent ada's recovery code")
	}
	if ok, left, err := db.UseRecoveryCode(ctx, ada, hash); err != nil || !ok || left != 0 {
		t.Fatalf("UseRecoveryCode() = %v, %d, %v; want true, 0", ok, left, err)
	}
	if ok, _, _ := db.UseRecoveryCode(ctx, ada, hash); ok {
		t.Fatal("a recovery code was spent twice")
	}
	if err := db.DisableTOTP(ctx, ada); err != nil {
		t.Fatalf("DisableTOTP() err = %v", err)
	}
	if _, err := db.FindTOTP(ctx, k, ada); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("FindTOTP() after DisableTOTP err = %v, want not_found", err)
	}
	if err := db.DisableTOTP(ctx, ada); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("DisableTOTP() twice err = %v, want not_found", err)
	}
}

// TestTOTP_SpentOnce: a time step and a recovery code are each taken once,
// however many requests race with them.
func TestTOTP_SpentOnce(t *testing.T) {
	db, _, ada := mustPendingTOTP(t)
	ctx := context.Background()
	hash := mcpgate.HashToken("code")
	if err := db.ConfirmTOTP(ctx, ada, 1, [][]byte{hash}); err != nil {
		t.Fatal(err)
	}
	var steps, codes atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if ok, err := db.AcceptTOTPStep(ctx, ada, 2); err == nil && ok {
				steps.Add(1)
			}
			if ok, _, err := db.UseRecoveryCode(ctx, ada, hash); err == nil && ok {
				codes.Add(1)
			}
		})
	}
	wg.Wait()
	if steps.Load() != 1 || codes.Load() != 1 {
		t.Fatalf("accepted %d steps and %d recovery codes of 8 racing requests, want 1 and 1", steps.Load(), codes.Load())
	}
}

// TestTOTP_Rotation: TOTP secrets follow key rotation like credentials: the
// re-seal moves them, the term usage counts them, and a term that still
// seals one cannot be deleted.
func TestTOTP_Rotation(t *testing.T) {
	db, k, ada := mustPendingTOTP(t)
	ctx := context.Background()
	for range 2 {
		if _, err := k.Rotate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := db.CountSealedBelow(ctx, 3); err != nil || n != 1 {
		t.Fatalf("CountSealedBelow(3) = %d, %v; want 1", n, err)
	}
	if err := db.DeleteVaultTerm(ctx, 1); !errors.Is(err, vault.ErrTermInUse) {
		t.Fatalf("DeleteVaultTerm(1) err = %v, want ErrTermInUse", err)
	}
	moved, failed, err := db.ResealOld(ctx, k, 10, nil)
	if err != nil || moved != 1 || len(failed) != 0 {
		t.Fatalf("ResealOld() = %d, %v, %v; want 1 moved", moved, failed, err)
	}
	usage, err := db.SealedTermUsage(ctx)
	if err != nil || len(usage) != 1 || usage[0] != (store.TermUsage{Term: 3, Rows: 1}) {
		t.Fatalf("SealedTermUsage() = %v, %v; want [{3 1}]", usage, err)
	}
	if err := db.DeleteVaultTerm(ctx, 1); err != nil {
		t.Fatalf("DeleteVaultTerm(1) after re-seal err = %v", err)
	}
	if f, err := db.FindTOTP(ctx, mustKeyringOn(t, db, testRoot), ada); err != nil || f.Secret != totpSecret {
		t.Fatalf("FindTOTP() after re-seal = %+v, %v", f, err)
	}
	// A secret that does not open is reported by reference and skipped.
	if _, err := k.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE totp_factors SET secret = set_byte(secret, length(secret) - 1, get_byte(secret, length(secret) - 1) # 1)`); err != nil {
		t.Fatal(err)
	}
	var id string
	_ = db.Pool.QueryRow(ctx, `SELECT id FROM totp_factors`).Scan(&id)
	moved, failed, err = db.ResealOld(ctx, k, 10, nil)
	if err != nil || moved != 0 || len(failed) != 1 || failed[0] != "totp_factors:"+id {
		t.Fatalf("ResealOld(damaged) = %d, %v, %v; want [totp_factors:%s] failed", moved, failed, err, id)
	}
	if moved, failed, err = db.ResealOld(ctx, k, 10, failed); err != nil || moved != 0 || len(failed) != 0 {
		t.Fatalf("ResealOld(skip) = %d, %v, %v; want nothing", moved, failed, err)
	}
}
