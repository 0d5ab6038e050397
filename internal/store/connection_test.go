package store_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/vault"
)

const (
	keyA = "e2b_0123456789abcdef0123456789abcdef01234567"
	keyB = "e2b_fedcba9876543210fedcba9876543210fedcba98"
)

// mustKeyringOn opens a keyring on db's vault tables with a fixed root key,
// creating the first term on a fresh database.
func mustKeyringOn(t *testing.T, db *store.DB, root []byte) *vault.Keyring {
	t.Helper()
	k, err := vault.Open(context.Background(), root, db.VaultKeys(), vault.Options{})
	if err != nil {
		t.Fatalf("vault.Open() err = %v", err)
	}
	return k
}

var (
	testRoot  = []byte("store-test-root-key-0123456789ab") // 32 bytes; tests only
	otherRoot = []byte("store-test-root-key-other-456789")
)

func mustPut(t *testing.T, db *store.DB, k store.Sealer, ws, userID, connector, key string) *mcpgate.Connection {
	t.Helper()
	c := &mcpgate.Connection{WorkspaceID: ws, Connector: connector, KeyHint: "e2b_…" + key[len(key)-4:],
		VerifiedAt: time.Now().UTC().Truncate(time.Microsecond), UpdatedBy: userID}
	if err := db.PutConnection(context.Background(), k, c, mcpgate.Secret(key)); err != nil {
		t.Fatalf("PutConnection() err = %v", err)
	}
	return c
}

// mustKeyringDB is a fresh database with a keyring on it (testRoot).
func mustKeyringDB(t *testing.T) (*store.DB, *vault.Keyring) {
	t.Helper()
	db := storetest.Open(t)
	return db, mustKeyringOn(t, db, testRoot)
}

// mustConnected creates a user whose personal workspace holds key as its
// e2b credential.
func mustConnected(t *testing.T, db *store.DB, k store.Sealer, email, key string) (ws string, u *mcpgate.User) {
	t.Helper()
	ws, u = mustWorkspace(t, db, email)
	mustPut(t, db, k, ws, u.ID, "e2b", key)
	return ws, u
}

// wantCredential checks that the workspace's e2b credential opens to want.
func wantCredential(t *testing.T, db *store.DB, k store.Sealer, ws, want string) {
	t.Helper()
	s, err := db.OpenCredential(context.Background(), k, ws, "e2b")
	if err != nil {
		t.Fatalf("OpenCredential(%s) err = %v", ws, err)
	}
	if got := s.Reveal(); got != want {
		t.Fatalf("OpenCredential(%s) = %q, want %q", ws, got, want)
	}
}

// rawConnection reads a stored row as it is in the table.
func rawConnection(t *testing.T, db *store.DB, ws, connector string) (id string, ct []byte, term uint32) {
	t.Helper()
	var t64 int64
	err := db.Pool.QueryRow(context.Background(),
		`SELECT id::text, ciphertext, key_term FROM connections WHERE workspace_id = $1 AND connector = $2`, ws, connector).
		Scan(&id, &ct, &t64)
	if err != nil {
		t.Fatalf("read connection row: %v", err)
	}
	return id, ct, uint32(t64)
}

func TestPutConnection_StoresNoPlaintext(t *testing.T) {
	db, k := mustKeyringDB(t)
	ctx := context.Background()
	ws, _ := mustConnected(t, db, k, "a@example.com", keyA)

	_, ct, term := rawConnection(t, db, ws, "e2b")
	secretPart := keyA[len("e2b_"):]
	for _, needle := range [][]byte{[]byte(keyA), []byte(secretPart), []byte(secretPart[:12]), []byte(secretPart[len(secretPart)-12:]),
		[]byte(base64.StdEncoding.EncodeToString([]byte(keyA)))} {
		if bytes.Contains(ct, needle) {
			t.Fatalf("stored ciphertext contains %q", needle)
		}
	}
	if got, err := vault.TermOf(ct); err != nil || got != term || term != k.ActiveTerm() {
		t.Fatalf("TermOf(stored) = %d, %v; key_term = %d; want active term %d", got, err, term, k.ActiveTerm())
	}
	// Every column of every table, as text: the key is nowhere, nor the
	// root key.
	var dump string
	if err := db.Pool.QueryRow(ctx, `SELECT concat_ws('|',
		(SELECT string_agg(row_to_json(c)::text, '|') FROM connections c),
		(SELECT string_agg(encode(ciphertext, 'escape'), '|') FROM connections),
		(SELECT string_agg(row_to_json(v)::text, '|') FROM vault_keys v),
		(SELECT string_agg(encode(wrapped, 'escape'), '|') FROM vault_keys),
		(SELECT string_agg(row_to_json(a)::text, '|') FROM audit_log a))`).Scan(&dump); err != nil {
		t.Fatalf("dump tables: %v", err)
	}
	for _, needle := range []string{keyA, secretPart, string(testRoot), base64.StdEncoding.EncodeToString(testRoot)} {
		if bytes.Contains([]byte(dump), []byte(needle)) {
			t.Fatalf("the database holds %q in plain text", needle)
		}
	}
	wantCredential(t, db, k, ws, keyA)
}

func TestOpenCredential_CopiedCiphertextDoesNotOpen(t *testing.T) {
	db, k := mustKeyringDB(t)
	ctx := context.Background()
	wsA, ua := mustConnected(t, db, k, "a@example.com", keyA)
	wsB, _ := mustConnected(t, db, k, "b@example.com", keyB)
	mustPut(t, db, k, wsA, ua.ID, "other", keyB) // another row of the same workspace

	_, ctA, _ := rawConnection(t, db, wsA, "e2b")
	tests := []struct {
		name     string
		ws, conn string
	}{
		{name: "other workspace", ws: wsB, conn: "e2b"},
		{name: "other row of the same workspace", ws: wsA, conn: "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := db.Pool.Exec(ctx, `UPDATE connections SET ciphertext = $3 WHERE workspace_id = $1 AND connector = $2`,
				tt.ws, tt.conn, ctA); err != nil {
				t.Fatalf("copy ciphertext: %v", err)
			}
			s, err := db.OpenCredential(ctx, k, tt.ws, tt.conn)
			if !errors.Is(err, vault.ErrDecrypt) {
				t.Fatalf("OpenCredential(copied) = %q, err = %v, want %v", s.Reveal(), err, vault.ErrDecrypt)
			}
		})
	}
	wantCredential(t, db, k, wsA, keyA)
}

func TestPutConnection_ReplaceKeepsOneRow(t *testing.T) {
	db, k := mustKeyringDB(t)
	ctx := context.Background()
	ws, u := mustConnected(t, db, k, "a@example.com", keyA)
	id1, ct1, _ := rawConnection(t, db, ws, "e2b")
	if err := db.MarkAuthFailure(ctx, ws, "e2b"); err != nil {
		t.Fatalf("MarkAuthFailure() err = %v", err)
	}

	c := mustPut(t, db, k, ws, u.ID, "e2b", keyB)
	id2, ct2, _ := rawConnection(t, db, ws, "e2b")
	if id1 != id2 {
		t.Fatalf("replacing changed the row id: %s -> %s", id1, id2)
	}
	if bytes.Equal(ct1, ct2) {
		t.Fatal("replacing kept the ciphertext")
	}
	var rows, withOld int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE ciphertext = $1) FROM connections`, ct1).
		Scan(&rows, &withOld); err != nil {
		t.Fatalf("count rows: %v", err)
	}
	if rows != 1 || withOld != 0 {
		t.Fatalf("after replacing: %d row(s), %d with the old ciphertext; want 1, 0", rows, withOld)
	}
	wantCredential(t, db, k, ws, keyB)
	got, err := db.FindConnection(ctx, ws, "e2b")
	if err != nil {
		t.Fatalf("FindConnection() err = %v", err)
	}
	want := &mcpgate.Connection{WorkspaceID: ws, Connector: "e2b", KeyHint: "e2b_…" + keyB[len(keyB)-4:],
		VerifiedAt: c.VerifiedAt, UpdatedBy: u.Email, UpdatedAt: c.UpdatedAt}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Fatalf("FindConnection() mismatch (-want +got):\n%s", diff)
	}
}

func TestConnection_WorkspaceIsolation(t *testing.T) {
	db, k := mustKeyringDB(t)
	ctx := context.Background()
	wsA, _ := mustConnected(t, db, k, "a@example.com", keyA)
	wsB, _ := mustWorkspace(t, db, "b@example.com")

	for _, ws := range []string{wsB, "not-a-uuid", "00000000-0000-0000-0000-000000000000"} {
		t.Run(ws, func(t *testing.T) {
			if _, err := db.FindConnection(ctx, ws, "e2b"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
				t.Fatalf("FindConnection() err = %v, want not_found", err)
			}
			if s, err := db.OpenCredential(ctx, k, ws, "e2b"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
				t.Fatalf("OpenCredential() = %q, err = %v, want not_found", s.Reveal(), err)
			}
			if err := db.DeleteConnection(ctx, ws, "e2b"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
				t.Fatalf("DeleteConnection() err = %v, want not_found", err)
			}
			_ = db.MarkAuthFailure(ctx, ws, "e2b")
		})
	}
	c, err := db.FindConnection(ctx, wsA, "e2b")
	if err != nil || c.LastAuthFail != nil {
		t.Fatalf("FindConnection(A) = %+v, %v; want untouched", c, err)
	}
	wantCredential(t, db, k, wsA, keyA)
	if err := db.DeleteConnection(ctx, wsA, "e2b"); err != nil {
		t.Fatalf("DeleteConnection(A) err = %v", err)
	}
	if _, err := db.OpenCredential(ctx, k, wsA, "e2b"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("OpenCredential() after delete err = %v, want not_found", err)
	}
}

// mustPopulate stores n credentials, each in its own workspace, and returns
// them by workspace id.
func mustPopulate(t *testing.T, db *store.DB, k store.Sealer, n int) map[string]string {
	t.Helper()
	ctx := context.Background()
	u := mustUser(t, db, "owner@example.com")
	want := make(map[string]string, n)
	for i := range n {
		ws, err := db.CreateWorkspace(ctx, u.ID, fmt.Sprintf("ws %d", i))
		if err != nil {
			t.Fatalf("CreateWorkspace() err = %v", err)
		}
		key := fmt.Sprintf("e2b_%040x", i+1)
		mustPut(t, db, k, ws.ID, u.ID, "e2b", key)
		want[ws.ID] = key
	}
	return want
}

// checkAllOpen checks that every stored credential opens with k, to its
// value, and that each sits under term.
func checkAllOpen(t *testing.T, db *store.DB, k store.Sealer, want map[string]string, term uint32) {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `SELECT workspace_id::text, key_term, ciphertext FROM connections WHERE connector = 'e2b'`)
	if err != nil {
		t.Fatalf("list connections: %v", err)
	}
	n := 0
	for rows.Next() {
		var ws string
		var kt int64
		var ct []byte
		if err := rows.Scan(&ws, &kt, &ct); err != nil {
			t.Fatalf("scan: %v", err)
		}
		n++
		if h, _ := vault.TermOf(ct); uint32(kt) != term || h != term {
			t.Fatalf("workspace %s: key_term %d, header term %d; want %d", ws, kt, h, term)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("list connections: %v", err)
	}
	if n != len(want) {
		t.Fatalf("%d credential rows, want %d", n, len(want))
	}
	for ws, key := range want {
		wantCredential(t, db, k, ws, key)
	}
}

// resealAll runs ResealOld in batches of batch until nothing old is left,
// and returns how many rows each batch moved.
func resealAll(t *testing.T, db *store.DB, k store.Sealer, batch int) (moved []int) {
	t.Helper()
	for {
		n, _, err := db.ResealOld(context.Background(), k, batch, nil)
		if err != nil {
			t.Fatalf("ResealOld() err = %v", err)
		}
		if n == 0 {
			return moved
		}
		moved = append(moved, n)
	}
}

func TestResealOld(t *testing.T) {
	db, k := mustKeyringDB(t)
	ctx := context.Background()
	want := mustPopulate(t, db, k, 25)
	if n, _, err := db.ResealOld(ctx, k, 10, nil); n != 0 || err != nil {
		t.Fatalf("ResealOld() with nothing old = %d, %v; want 0, nil", n, err)
	}
	usage, err := db.SealedTermUsage(ctx)
	if err != nil || !cmp.Equal(usage, []store.TermUsage{{Term: 1, Rows: 25}}) {
		t.Fatalf("SealedTermUsage() = %v, %v; want [{1 25}]", usage, err)
	}
	term, err := k.Rotate(ctx)
	if err != nil || term != 2 {
		t.Fatalf("Rotate() = %d, %v", term, err)
	}
	// A credential stored after the rotation is already under term 2.
	ws, _ := mustConnected(t, db, k, "late@example.com", keyB)
	want[ws] = keyB
	usage, _ = db.SealedTermUsage(ctx)
	if !cmp.Equal(usage, []store.TermUsage{{Term: 1, Rows: 25}, {Term: 2, Rows: 1}}) {
		t.Fatalf("SealedTermUsage() = %v, want [{1 25} {2 1}]", usage)
	}
	if moved := resealAll(t, db, k, 10); !cmp.Equal(moved, []int{10, 10, 5}) {
		t.Fatalf("ResealOld() batches = %v, want [10 10 5]", moved)
	}
	usage, _ = db.SealedTermUsage(ctx)
	if !cmp.Equal(usage, []store.TermUsage{{Term: 2, Rows: 26}}) {
		t.Fatalf("SealedTermUsage() = %v, want [{2 26}]", usage)
	}
	checkAllOpen(t, db, k, want, 2)
	// A restarted gateway (a new keyring) opens them too.
	checkAllOpen(t, db, mustKeyringOn(t, db, testRoot), want, 2)
}

func TestResealOld_ConcurrentRunsShareTheWork(t *testing.T) {
	db, k := mustKeyringDB(t)
	ctx := context.Background()
	want := mustPopulate(t, db, k, 40)
	if _, err := k.Rotate(ctx); err != nil {
		t.Fatalf("Rotate() err = %v", err)
	}
	other := mustKeyringOn(t, db, testRoot) // another process, already on term 2
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for _, s := range []store.Sealer{k, other, k} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, _, err := db.ResealOld(ctx, s, 3, nil)
				if err != nil {
					t.Errorf("ResealOld() err = %v", err)
					return
				}
				if n == 0 {
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if total != 40 {
		t.Fatalf("ResealOld() moved %d rows in all, want 40 (each once)", total)
	}
	checkAllOpen(t, db, k, want, 2)
}

func TestDeleteVaultTerm(t *testing.T) {
	db, k := mustKeyringDB(t)
	ctx := context.Background()
	want := mustPopulate(t, db, k, 3)
	for range 2 {
		if _, err := k.Rotate(ctx); err != nil {
			t.Fatalf("Rotate() err = %v", err)
		}
	}
	// Terms 1 (3 rows), 2 (unused) and 3 (active).
	tests := []struct {
		name    string
		term    uint32
		wantErr error
	}{
		{name: "active", term: 3, wantErr: vault.ErrActiveTerm},
		{name: "above active", term: 4, wantErr: vault.ErrActiveTerm},
		{name: "used", term: 1, wantErr: vault.ErrTermInUse},
		{name: "old and unused", term: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := db.DeleteVaultTerm(ctx, tt.term); !errors.Is(err, tt.wantErr) {
				t.Fatalf("DeleteVaultTerm(%d) err = %v, want %v", tt.term, err, tt.wantErr)
			}
		})
	}
	_, keys, err := db.VaultKeys().Load(ctx)
	if err != nil {
		t.Fatalf("Load() err = %v", err)
	}
	var terms []uint32
	for _, wk := range keys {
		terms = append(terms, wk.Term)
	}
	if !cmp.Equal(terms, []uint32{1, 3}) {
		t.Fatalf("stored terms = %v, want [1 3]", terms)
	}
	k2 := mustKeyringOn(t, db, testRoot)
	checkAllOpen(t, db, k2, want, 1)
	// Once its rows moved on, term 1 may go too, and everything still opens.
	resealAll(t, db, k2, 100)
	if err := db.DeleteVaultTerm(ctx, 1); err != nil {
		t.Fatalf("DeleteVaultTerm(1) after re-seal err = %v", err)
	}
	checkAllOpen(t, db, mustKeyringOn(t, db, testRoot), want, 3)
}

// A credential that no longer opens must not stop the others from moving to
// the new term: before, every run retried the same damaged row first.
func TestResealOld_SkipsDamagedRow(t *testing.T) {
	db, k := mustKeyringDB(t)
	ctx := context.Background()
	want := mustPopulate(t, db, k, 5)
	var badWS string
	for ws := range want {
		badWS = ws
		break
	}
	badID, ct, _ := rawConnection(t, db, badWS, "e2b")
	ct[len(ct)-1] ^= 0xff
	if _, err := db.Pool.Exec(ctx, `UPDATE connections SET ciphertext = $2 WHERE id = $1`, badID, ct); err != nil {
		t.Fatal(err)
	}
	delete(want, badWS)
	if _, err := k.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	var skip []string
	for range 10 {
		n, failed, err := db.ResealOld(ctx, k, 2, skip)
		if err != nil {
			t.Fatalf("ResealOld() err = %v", err)
		}
		skip = append(skip, failed...)
		if n == 0 {
			break
		}
	}
	if !cmp.Equal(skip, []string{badID}) {
		t.Fatalf("ResealOld() failed ids = %v, want [%s]", skip, badID)
	}
	for ws, key := range want {
		if _, _, term := rawConnection(t, db, ws, "e2b"); term != 2 {
			t.Fatalf("credential of %s under term %d, want 2", ws, term)
		}
		wantCredential(t, db, k, ws, key)
	}
}
