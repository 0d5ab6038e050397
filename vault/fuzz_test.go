package vault_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/mcpgate/mcpgate/vault"
)

// FuzzOpen feeds arbitrary bytes to every parser of ciphertexts. None may
// panic, and every failure must be one of the sentinels.
func FuzzOpen(f *testing.F) {
	k, _ := mustKeyring(f)
	ct := mustSeal(f, k, []byte("e2b_0123"), aad1)
	f.Add(ct, []byte(aad1))
	f.Add(ct[:vault.Overhead], []byte(aad1))
	f.Add(ct[:16], []byte(aad1))
	f.Add(withTerm(ct, 0xffffffff), []byte(aad1))
	f.Add(withTerm(ct, 0), []byte(aad1))
	f.Add([]byte{}, []byte{})
	f.Add([]byte{0x01}, []byte("x"))
	f.Add(bytes.Repeat([]byte{0x01}, 64), []byte(aad1))
	f.Fuzz(func(t *testing.T, ct, aad []byte) {
		pt, err := k.Open(ct, aad)
		if err != nil && !errors.Is(err, vault.ErrMalformed) && !errors.Is(err, vault.ErrUnknownTerm) && !errors.Is(err, vault.ErrDecrypt) {
			t.Fatalf("Open() err = %v, not a sentinel", err)
		}
		if err == nil && !bytes.Equal(aad, []byte(aad1)) {
			t.Fatalf("Open() succeeded with aad %q", aad)
		}
		if err == nil && len(pt) != len(ct)-vault.Overhead {
			t.Fatalf("Open() = %d bytes from %d", len(pt), len(ct))
		}
		if term, err := vault.TermOf(ct); err == nil && term == 0 {
			t.Fatal("TermOf() = 0 without an error")
		}
		if _, _, err := k.Reseal(context.Background(), ct, aad); err == nil && !bytes.Equal(aad, []byte(aad1)) {
			t.Fatalf("Reseal() succeeded with aad %q", aad)
		}
	})
}

// FuzzSealOpen checks the round trip for arbitrary plaintexts and additional
// data, and that the plaintext does not open under other additional data.
func FuzzSealOpen(f *testing.F) {
	k, _ := mustKeyring(f)
	f.Add([]byte("e2b_0123456789abcdef"), "ws-1", "conn-1")
	f.Add([]byte{}, "", "")
	f.Add(bytes.Repeat([]byte{0}, 1024), "a|b", "c")
	f.Fuzz(func(t *testing.T, pt []byte, ws, conn string) {
		aad := vault.CredentialAAD(ws, conn)
		ct, err := k.Seal(pt, aad)
		if err != nil {
			t.Fatalf("Seal() err = %v", err)
		}
		if len(ct) != len(pt)+vault.Overhead {
			t.Fatalf("len(Seal()) = %d, want %d", len(ct), len(pt)+vault.Overhead)
		}
		got, err := k.Open(ct, aad)
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("Open(Seal(%q)) = %q, %v", pt, got, err)
		}
		if _, err := k.Open(ct, append(aad, 'x')); !errors.Is(err, vault.ErrDecrypt) {
			t.Fatalf("Open() with other aad err = %v, want %v", err, vault.ErrDecrypt)
		}
	})
}

// credentialBench is a keyring, a plaintext the size of an E2B key and the
// AAD of a credential row: what Seal and Open handle on every tool call.
func credentialBench(b *testing.B) (k *vault.Keyring, pt, aad []byte) {
	k, _ = mustKeyring(b)
	pt = []byte("e2b_0123456789abcdef0123456789abcdef01234567")
	aad = vault.CredentialAAD("0b6c3f3e-4d47-4f0a-9a59-7b8f2f0b1c2d", "6f1d2e3c-8a7b-4c5d-9e0f-1a2b3c4d5e6f")
	return k, pt, aad
}

// benchParallel runs op on every core, counting allocations and n bytes
// per op.
func benchParallel(b *testing.B, n int, op func() error) {
	b.ReportAllocs()
	b.SetBytes(int64(n))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkSeal(b *testing.B) {
	k, pt, aad := credentialBench(b)
	benchParallel(b, len(pt), func() error { _, err := k.Seal(pt, aad); return err })
}

func BenchmarkOpen(b *testing.B) {
	k, pt, aad := credentialBench(b)
	ct := mustSeal(b, k, pt, string(aad))
	benchParallel(b, len(pt), func() error { _, err := k.Open(ct, aad); return err })
}
