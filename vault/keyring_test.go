package vault_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/vault"
)

var (
	rootA = []byte("root-key-A-0123456789abcdefghijk") // 32 bytes; tests only
	rootB = []byte("root-key-B-0123456789abcdefghijk")
)

const aad1 = "cred|v1|t1|c1"

func mustKeyring(t testing.TB) (*vault.Keyring, *memStore) {
	t.Helper()
	st := newMemStore()
	return mustOpen(t, rootA, st, vault.Options{}), st
}

func mustOpen(t testing.TB, root []byte, st vault.KeyStore, opts vault.Options) *vault.Keyring {
	t.Helper()
	k, err := vault.Open(context.Background(), root, st, opts)
	if err != nil {
		t.Fatalf("Open() err = %v", err)
	}
	return k
}

func mustSeal(t testing.TB, k *vault.Keyring, plaintext []byte, aad string) []byte {
	t.Helper()
	ct, err := k.Seal(plaintext, []byte(aad))
	if err != nil {
		t.Fatalf("Seal() err = %v", err)
	}
	return ct
}

func mustRotate(t testing.TB, k *vault.Keyring) uint32 {
	t.Helper()
	term, err := k.Rotate(context.Background())
	if err != nil {
		t.Fatalf("Rotate() err = %v", err)
	}
	return term
}

// mustSealAcrossRotation seals first under term 1, rotates, and seals
// second under term 2.
func mustSealAcrossRotation(t testing.TB, first, second string) (k *vault.Keyring, st *memStore, ct1, ct2 []byte) {
	t.Helper()
	k, st = mustKeyring(t)
	ct1 = mustSeal(t, k, []byte(first), aad1)
	mustRotate(t, k)
	return k, st, ct1, mustSeal(t, k, []byte(second), aad1)
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0xff
	return c
}

func withTerm(ct []byte, term uint32) []byte {
	c := bytes.Clone(ct)
	binary.BigEndian.PutUint32(c[1:5], term)
	return c
}

func TestKeyring_Open(t *testing.T) {
	k, _ := mustKeyring(t)
	ct := mustSeal(t, k, []byte("sk-test"), aad1)
	tests := []struct {
		name    string
		ct      []byte
		aad     string
		wantErr error
	}{
		{name: "intact", ct: ct, aad: aad1},
		{name: "other row", ct: ct, aad: "cred|v1|t1|c2", wantErr: vault.ErrDecrypt},
		{name: "other workspace", ct: ct, aad: "cred|v1|t2|c1", wantErr: vault.ErrDecrypt},
		{name: "no aad", ct: ct, aad: "", wantErr: vault.ErrDecrypt},
		{name: "flipped tag", ct: flip(ct, len(ct)-1), aad: aad1, wantErr: vault.ErrDecrypt},
		{name: "flipped nonce", ct: flip(ct, 5), aad: aad1, wantErr: vault.ErrDecrypt},
		{name: "flipped body", ct: flip(ct, 17), aad: aad1, wantErr: vault.ErrDecrypt},
		{name: "unknown version", ct: flip(ct, 0), aad: aad1, wantErr: vault.ErrMalformed},
		{name: "unknown term", ct: withTerm(ct, 99), aad: aad1, wantErr: vault.ErrUnknownTerm},
		{name: "term zero", ct: withTerm(ct, 0), aad: aad1, wantErr: vault.ErrMalformed},
		{name: "truncated", ct: ct[:9], aad: aad1, wantErr: vault.ErrMalformed},
		{name: "header and tag only", ct: ct[:vault.Overhead-1], aad: aad1, wantErr: vault.ErrMalformed},
		{name: "tag cut", ct: ct[:len(ct)-1], aad: aad1, wantErr: vault.ErrDecrypt},
		{name: "empty", ct: nil, aad: aad1, wantErr: vault.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt, err := k.Open(tt.ct, []byte(tt.aad))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Open() err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && string(pt) != "sk-test" {
				t.Fatalf("Open() = %q, want %q", pt, "sk-test")
			}
			if err != nil && pt != nil {
				t.Fatalf("Open() returned %d bytes with an error", len(pt))
			}
		})
	}
}

func TestKeyring_SealFormat(t *testing.T) {
	k, _ := mustKeyring(t)
	pt := []byte("e2b_0123456789abcdef")
	ct := mustSeal(t, k, pt, aad1)
	if ct[0] != 0x01 {
		t.Fatalf("version byte = %#x, want 0x01", ct[0])
	}
	if got := binary.BigEndian.Uint32(ct[1:5]); got != 1 {
		t.Fatalf("header term = %d, want 1", got)
	}
	if len(ct) != 17+len(pt)+16 || len(ct) != vault.Overhead+len(pt) {
		t.Fatalf("len = %d, want %d", len(ct), 17+len(pt)+16)
	}
	if term, err := vault.TermOf(ct); err != nil || term != 1 {
		t.Fatalf("TermOf() = %d, %v, want 1, nil", term, err)
	}
}

func TestKeyring_SealNeverContainsPlaintext(t *testing.T) {
	k, st := mustKeyring(t)
	// Plaintexts of 8 bytes or more: a shorter one could turn up in random
	// bytes by chance.
	for _, pt := range []string{"e2b_0123456789abcdef0123456789abcdef", "aaaaaaaaaaaaaaaa", "e2b_abcd", strings.Repeat("sk_e2b_", 50)} {
		ct := mustSeal(t, k, []byte(pt), aad1)
		if bytes.Contains(ct, []byte(pt)) {
			t.Fatalf("Seal(%q) contains the plaintext", pt)
		}
		// Nor a long run of it: the body is the plaintext XOR a key stream.
		if bytes.Contains(ct, []byte(pt[:8])) {
			t.Fatalf("Seal(%q) contains a plaintext prefix", pt)
		}
	}
	// The root key never reaches the store, in raw or base64 form.
	stored := st.allBytes()
	if bytes.Contains(stored, rootA) || bytes.Contains(stored, []byte(base64.StdEncoding.EncodeToString(rootA))) {
		t.Fatal("store holds the root key")
	}
}

func TestKeyring_SealsDiffer(t *testing.T) {
	k, _ := mustKeyring(t)
	a := mustSeal(t, k, []byte("same"), aad1)
	b := mustSeal(t, k, []byte("same"), aad1)
	if bytes.Equal(a, b) {
		t.Fatal("two Seals of the same input are equal")
	}
	if bytes.Equal(a[5:17], b[5:17]) {
		t.Fatal("two Seals share a nonce")
	}
}

func TestKeyring_FlipAnyByteFails(t *testing.T) {
	k, _ := mustKeyring(t)
	ct := mustSeal(t, k, []byte("e2b_deadbeef"), aad1)
	for i := range ct {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			c := bytes.Clone(ct)
			c[i] ^= mask
			if pt, err := k.Open(c, []byte(aad1)); err == nil {
				t.Fatalf("Open() with byte %d ^ %#x = %q, want an error", i, mask, pt)
			}
		}
	}
}

func TestKeyring_EmptyPlaintext(t *testing.T) {
	k, _ := mustKeyring(t)
	ct := mustSeal(t, k, nil, aad1)
	pt, err := k.Open(ct, []byte(aad1))
	if err != nil || len(pt) != 0 {
		t.Fatalf("Open() = %q, %v, want empty, nil", pt, err)
	}
}

func TestOpen_FirstStartAndReopen(t *testing.T) {
	st := newMemStore()
	k := mustOpen(t, rootA, st, vault.Options{})
	if got := k.ActiveTerm(); got != 1 {
		t.Fatalf("ActiveTerm() = %d, want 1", got)
	}
	ct := mustSeal(t, k, []byte("secret"), aad1)

	k2 := mustOpen(t, rootA, st, vault.Options{}) // a restart
	if got, err := k2.Open(ct, []byte(aad1)); err != nil || string(got) != "secret" {
		t.Fatalf("Open() after reopen = %q, %v", got, err)
	}
	if got := st.terms(); len(got) != 1 {
		t.Fatalf("stored terms = %v, want [1]", got)
	}
}

func TestOpen_WrongRootKey(t *testing.T) {
	st := newMemStore()
	k := mustOpen(t, rootA, st, vault.Options{})
	mustRotate(t, k)
	before := st.allBytes()

	_, err := vault.Open(context.Background(), rootB, st, vault.Options{})
	if !errors.Is(err, vault.ErrWrongRootKey) {
		t.Fatalf("Open(wrong root) err = %v, want %v", err, vault.ErrWrongRootKey)
	}
	if !bytes.Equal(before, st.allBytes()) {
		t.Fatal("Open(wrong root) changed the store")
	}
}

func TestOpen_BadArguments(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		root    []byte
		opts    vault.Options
		wantErr error
	}{
		{name: "short root", root: rootA[:31], wantErr: vault.ErrInvalidRootKey},
		{name: "long root", root: append(bytes.Clone(rootA), 0), wantErr: vault.ErrInvalidRootKey},
		{name: "nil root", root: nil, wantErr: vault.ErrInvalidRootKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := vault.Open(ctx, tt.root, newMemStore(), tt.opts); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Open() err = %v, want %v", err, tt.wantErr)
			}
		})
	}
	if _, err := vault.Open(ctx, rootA, newMemStore(), vault.Options{SealCap: vault.MaxSealCap + 1}); err == nil {
		t.Fatal("Open(SealCap too large) err = nil, want an error")
	}
	if _, err := vault.Open(ctx, rootA, nil, vault.Options{}); err == nil {
		t.Fatal("Open(nil store) err = nil, want an error")
	}
}

func TestOpen_KeysWithoutCheckRefused(t *testing.T) {
	st := newMemStore()
	mustOpen(t, rootA, st, vault.Options{})
	st.check = nil // someone deleted the check row
	if _, err := vault.Open(context.Background(), rootA, st, vault.Options{}); err == nil {
		t.Fatal("Open() err = nil, want an error when keys exist without a check value")
	}
}

func TestOpen_ConcurrentFirstStart(t *testing.T) {
	st := newMemStore()
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		root := rootA
		if i == n-1 {
			root = rootB
		}
		go func() {
			_, err := vault.Open(context.Background(), root, st, vault.Options{})
			errs <- err
		}()
	}
	var ok, wrong int
	for range n {
		switch err := <-errs; {
		case err == nil:
			ok++
		case errors.Is(err, vault.ErrWrongRootKey):
			wrong++
		default:
			t.Fatalf("Open() err = %v", err)
		}
	}
	// Whichever root initialised the store wins; every other root is refused.
	if !(ok == n-1 && wrong == 1) && !(ok == 1 && wrong == n-1) {
		t.Fatalf("ok = %d, wrong = %d", ok, wrong)
	}
	if got := st.terms(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("stored terms = %v, want [1]", got)
	}
}

func TestParseRootKey(t *testing.T) {
	raw := bytes.Clone(rootA)
	tests := []struct {
		name    string
		in      string
		wantErr error
	}{
		{name: "std", in: base64.StdEncoding.EncodeToString(raw)},
		{name: "url", in: base64.URLEncoding.EncodeToString(raw)},
		{name: "raw std", in: base64.RawStdEncoding.EncodeToString(raw)},
		{name: "raw url", in: base64.RawURLEncoding.EncodeToString(raw)},
		{name: "trailing newline", in: base64.StdEncoding.EncodeToString(raw) + "\n"},
		{name: "empty", in: "", wantErr: vault.ErrInvalidRootKey},
		{name: "short", in: base64.StdEncoding.EncodeToString(raw[:16]), wantErr: vault.ErrInvalidRootKey},
		{name: "long", in: base64.StdEncoding.EncodeToString(append(raw, 1)), wantErr: vault.ErrInvalidRootKey},
		{name: "not base64", in: "not*base64!", wantErr: vault.ErrInvalidRootKey},
		{name: "all zero", in: base64.StdEncoding.EncodeToString(make([]byte, 32)), wantErr: vault.ErrInvalidRootKey},
		{name: "placeholder", in: "changeme", wantErr: vault.ErrInvalidRootKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := vault.ParseRootKey(tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ParseRootKey() err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && !bytes.Equal(key, raw) {
				t.Fatalf("ParseRootKey() = %x, want %x", key, raw)
			}
			if err != nil && tt.in != "" && strings.Contains(err.Error(), strings.TrimSpace(tt.in)) {
				t.Fatalf("ParseRootKey() error %q repeats the input", err)
			}
		})
	}
}

func TestGenerateRootKey(t *testing.T) {
	a, b := vault.GenerateRootKey(), vault.GenerateRootKey()
	if a == b {
		t.Fatal("GenerateRootKey() twice gave the same key")
	}
	if key, err := vault.ParseRootKey(a); err != nil || len(key) != vault.KeySize {
		t.Fatalf("ParseRootKey(GenerateRootKey()) = %d bytes, %v", len(key), err)
	}
}

func TestCredentialAAD(t *testing.T) {
	if got, want := string(vault.CredentialAAD("ws-1", "conn-2")), "cred|v1|ws-1|conn-2"; got != want {
		t.Fatalf("CredentialAAD() = %q, want %q", got, want)
	}
	if got, want := string(vault.UpstreamHeadersAAD("ws-1", "srv-2")), "upstream|v1|ws-1|srv-2"; got != want {
		t.Fatalf("UpstreamHeadersAAD() = %q, want %q", got, want)
	}
}

func TestTermOf(t *testing.T) {
	k, _ := mustKeyring(t)
	ct := mustSeal(t, k, []byte("x"), aad1)
	tests := []struct {
		name     string
		ct       []byte
		wantTerm uint32
		wantErr  error
	}{
		{name: "sealed", ct: ct, wantTerm: 1},
		{name: "other term", ct: withTerm(ct, 7), wantTerm: 7},
		{name: "term zero", ct: withTerm(ct, 0), wantErr: vault.ErrMalformed},
		{name: "bad version", ct: flip(ct, 0), wantErr: vault.ErrMalformed},
		{name: "too short", ct: ct[:vault.Overhead-1], wantErr: vault.ErrMalformed},
		{name: "nil", wantErr: vault.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			term, err := vault.TermOf(tt.ct)
			if !errors.Is(err, tt.wantErr) || term != tt.wantTerm {
				t.Fatalf("TermOf() = %d, %v, want %d, %v", term, err, tt.wantTerm, tt.wantErr)
			}
		})
	}
}
