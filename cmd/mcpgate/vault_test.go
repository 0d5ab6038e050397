package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/credtest"
	"github.com/mcpgate/mcpgate/vault"
)

// TestHelperProcess is not a test: it is the mcpgate program, which the
// crash tests start as a subprocess (and kill). Arguments follow "--".
func TestHelperProcess(t *testing.T) {
	if os.Getenv("MCPGATE_TEST_HELPER") != "1" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	if err := run(context.Background(), args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mcpgate:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// cmdEnv is a test database with an initialised vault, and the environment
// the commands read.
type cmdEnv struct {
	db   *store.DB
	dsn  string
	root string // ENCRYPTION_KEY, base64
	env  map[string]string
}

func newCmdEnv(t *testing.T) *cmdEnv {
	t.Helper()
	dsn := storetest.NewDatabase(t)
	db := mustOpenStore(t, dsn)
	e := &cmdEnv{db: db, dsn: dsn, root: vault.GenerateRootKey()}
	e.env = map[string]string{
		"DATABASE_URL":   dsn,
		"ENCRYPTION_KEY": e.root,
		"JWT_SECRET":     "test-jwt-0123456789abcdefghijklmnopqrstuv",
		"LISTEN_ADDR":    "127.0.0.1:0",
		"DATA_DIR":       t.TempDir(), // the audit spool goes there
	}
	e.keyring(t) // the first start of a gateway creates term 1
	return e
}

func (e *cmdEnv) getenv(k string) string { return e.env[k] }

// keyring opens the vault with the current root key, as a restarted gateway.
func (e *cmdEnv) keyring(t *testing.T) *vault.Keyring {
	t.Helper()
	root, err := vault.ParseRootKey(e.root)
	if err != nil {
		t.Fatalf("ParseRootKey() err = %v", err)
	}
	k, err := vault.Open(context.Background(), root, e.db.VaultKeys(), vault.Options{})
	if err != nil {
		t.Fatalf("vault.Open() err = %v", err)
	}
	return k
}

// run runs mcpgate in-process and returns its standard output.
func (e *cmdEnv) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, e.getenv, &out, &errOut)
	return out.String() + errOut.String(), err
}

func (e *cmdEnv) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.run(t, args...)
	if err != nil {
		t.Fatalf("mcpgate %s: err = %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// populate stores n credentials, one per workspace, and returns them by
// workspace id.
func (e *cmdEnv) populate(t *testing.T, n int) map[string]string {
	t.Helper()
	ctx := context.Background()
	k := e.keyring(t)
	u, err := e.db.CreateUser(ctx, "owner@example.com", "hash", nil)
	if err != nil {
		t.Fatalf("CreateUser() err = %v", err)
	}
	want := make(map[string]string, n)
	for i := range n {
		ws, key := credtest.Put(t, e.db, k, u.ID, i)
		want[ws] = key
	}
	return want
}

// termUsage returns rows per term, e.g. "1:3 2:5".
func (e *cmdEnv) termUsage(t *testing.T) string { return credtest.TermUsage(t, e.db) }

// checkAll checks, with a freshly opened keyring, that every credential
// opens to its value and sits under wantTerm, the newest term.
func (e *cmdEnv) checkAll(t *testing.T, want map[string]string, wantTerm uint32) {
	t.Helper()
	k := e.keyring(t)
	if got := k.ActiveTerm(); got != wantTerm {
		t.Fatalf("ActiveTerm() = %d, want %d", got, wantTerm)
	}
	if got, want := e.termUsage(t), fmt.Sprintf("%d:%d", wantTerm, len(want)); got != want {
		t.Fatalf("credentials per term = %q, want %q", got, want)
	}
	credtest.CheckOpen(t, e.db, k, want)
}

// snapshot returns every byte of the vault and credential tables.
func (e *cmdEnv) snapshot(t *testing.T) string {
	t.Helper()
	var s string
	err := e.db.Pool.QueryRow(context.Background(), `SELECT concat_ws('|',
		(SELECT string_agg(row_to_json(v)::text, ',' ORDER BY term) FROM vault_keys v),
		(SELECT string_agg(row_to_json(c)::text, ',') FROM vault_check c),
		(SELECT string_agg(row_to_json(c)::text, ',' ORDER BY id) FROM connections c))`).Scan(&s)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return s
}

func TestVaultRotate(t *testing.T) {
	e := newCmdEnv(t)
	want := e.populate(t, 23)

	out := e.mustRun(t, "vault", "rotate", "--batch", "5", "--settle", "0")
	for _, s := range []string{"added key term 2", "23 credential(s) to re-seal", "re-sealed 5 credential(s), 18 left",
		"re-sealed 23 credential(s), 0 left", "done: every credential is sealed under key term 2"} {
		if !strings.Contains(out, s) {
			t.Fatalf("rotate output lacks %q:\n%s", s, out)
		}
	}
	e.checkAll(t, want, 2)

	out = e.mustRun(t, "vault", "status")
	for _, re := range []string{`(?m)^1 .* 0$`, `(?m)^2 .* active +23$`, `Active term: 2\.`, `Older terms \[1\] seal no credentials`} {
		if !regexpMatch(re, out) {
			t.Fatalf("status output does not match %q:\n%s", re, out)
		}
	}

	// Term 2 is brand new: a gateway may still seal with term 1, so prune
	// keeps it.
	out = e.mustRun(t, "vault", "prune")
	if !strings.Contains(out, "kept key term 1") || !strings.Contains(out, "0 term(s) deleted") {
		t.Fatalf("prune output:\n%s", out)
	}
	// Once term 2 is older than the grace period, prune deletes term 1,
	// never the active term, and everything still opens.
	if _, err := e.db.Pool.Exec(context.Background(), `UPDATE vault_keys SET created_at = created_at - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	out = e.mustRun(t, "vault", "prune")
	if !strings.Contains(out, "deleted key term 1") || !strings.Contains(out, "1 term(s) deleted; active term 2") {
		t.Fatalf("prune output:\n%s", out)
	}
	e.checkAll(t, want, 2)
	out = e.mustRun(t, "vault", "prune")
	if !strings.Contains(out, "0 term(s) deleted; active term 2") {
		t.Fatalf("prune output:\n%s", out)
	}

	// Nothing under an old term: --reseal-only has nothing to do.
	out = e.mustRun(t, "vault", "rotate", "--reseal-only", "--settle", "0")
	if !strings.Contains(out, "0 credential(s) to re-seal") || strings.Contains(out, "added key term") {
		t.Fatalf("rotate --reseal-only output:\n%s", out)
	}
	e.checkAll(t, want, 2)
}

// TestVaultRotate_ResumesAfterKill kills `vault rotate` twice mid-way, then
// finishes the job: every credential opens under the newest term, none is
// lost.
func TestVaultRotate_ResumesAfterKill(t *testing.T) {
	e := newCmdEnv(t)
	want := e.populate(t, 300)
	slow := []string{"--batch", "10", "--pause", "20ms", "--settle", "0"}

	e.runKilled(t, 3, append([]string{"vault", "rotate"}, slow...)...)
	usage := e.termUsage(t)
	if !strings.HasPrefix(usage, "1:") || !strings.Contains(usage, " 2:") {
		t.Fatalf("after the first kill, credentials per term = %q; want some under 1 and some under 2", usage)
	}
	checkOpenAll(t, e, want) // mid-way, everything opens

	e.runKilled(t, 2, append([]string{"vault", "rotate"}, slow...)...)
	if usage := e.termUsage(t); !strings.Contains(usage, " 3:") {
		t.Fatalf("after the second kill, credentials per term = %q; want some under 3", usage)
	}
	checkOpenAll(t, e, want)

	out := e.mustRun(t, "vault", "rotate", "--reseal-only", "--settle", "0")
	if !strings.Contains(out, "re-sealing under the active key term 3") || !strings.Contains(out, "done: every credential is sealed under key term 3") {
		t.Fatalf("rotate --reseal-only output:\n%s", out)
	}
	e.checkAll(t, want, 3)
}

// runKilled starts mcpgate with args in a subprocess and kills it (SIGKILL)
// once it printed progress lines "re-sealed …" afterLines times.
func (e *cmdEnv) runKilled(t *testing.T, afterLines int, args ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "MCPGATE_TEST_HELPER=1", "DATABASE_URL="+e.dsn, "ENCRYPTION_KEY="+e.root,
		"ENCRYPTION_KEY_FILE=", "DATABASE_URL_FILE=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mcpgate: %v", err)
	}
	var seen []string
	progress := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.HasPrefix(sc.Text(), "re-sealed ") {
			progress++
		}
		if progress == afterLines {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatalf("kill: %v", err)
			}
			break
		}
	}
	io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != -1 {
		t.Fatalf("mcpgate %v: wait err = %v, want killed before it finished\nstdout:\n%s\nstderr:\n%s",
			args, err, strings.Join(seen, "\n"), stderr.String())
	}
	for _, l := range seen {
		if strings.HasPrefix(l, "done") {
			t.Fatalf("mcpgate %v finished before the kill:\n%s", args, strings.Join(seen, "\n"))
		}
	}
}

func checkOpenAll(t *testing.T, e *cmdEnv, want map[string]string) {
	t.Helper()
	k := e.keyring(t)
	for ws, key := range want {
		got, err := e.db.OpenCredential(context.Background(), k, ws, "e2b")
		if err != nil || got.Reveal() != key {
			t.Fatalf("OpenCredential(%s) = %q, %v; want %q", ws, got.Reveal(), err, key)
		}
	}
}

func TestVaultRekey(t *testing.T) {
	e := newCmdEnv(t)
	want := e.populate(t, 5)
	oldRoot := e.root
	newRoot := vault.GenerateRootKey()
	keyFile := filepath.Join(t.TempDir(), "new_key")
	if err := os.WriteFile(keyFile, []byte(newRoot+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Refused before anything changes: a bad new key, the same key, two
	// sources, no key, a wrong current key.
	before := e.snapshot(t)
	refused := []struct {
		name    string
		args    []string
		env     map[string]string
		wantMsg string
	}{
		{name: "no new key", wantMsg: "--new-key-file FILE or NEW_ENCRYPTION_KEY"},
		{name: "placeholder", env: map[string]string{"NEW_ENCRYPTION_KEY": "changeme"}, wantMsg: "placeholder"},
		{name: "short", env: map[string]string{"NEW_ENCRYPTION_KEY": "c2hvcnQga2V5"}, wantMsg: "32 random bytes"},
		{name: "both sources", args: []string{"--new-key-file", keyFile}, env: map[string]string{"NEW_ENCRYPTION_KEY": newRoot}, wantMsg: "give one"},
		{name: "missing file", args: []string{"--new-key-file", keyFile + ".missing"}, wantMsg: "read --new-key-file"},
		{name: "same key", env: map[string]string{"NEW_ENCRYPTION_KEY": oldRoot}, wantMsg: "the new root key is the current one"},
		{name: "wrong current key", args: []string{"--new-key-file", keyFile}, env: map[string]string{"ENCRYPTION_KEY": vault.GenerateRootKey()}, wantMsg: "ENCRYPTION_KEY does not match this database"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			saved := e.env
			e.env = map[string]string{}
			for k, v := range saved {
				e.env[k] = v
			}
			for k, v := range tt.env {
				e.env[k] = v
			}
			defer func() { e.env = saved }()
			out, err := e.run(t, append([]string{"vault", "rekey"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("rekey err = %v, want one saying %q\n%s", err, tt.wantMsg, out)
			}
			if strings.Contains(err.Error()+out, newRoot) || strings.Contains(err.Error()+out, oldRoot) {
				t.Fatalf("rekey output or error repeats a root key: %v\n%s", err, out)
			}
			if e.snapshot(t) != before {
				t.Fatal("a refused rekey changed the database")
			}
		})
	}

	out := e.mustRun(t, "vault", "rekey", "--new-key-file", keyFile)
	for _, s := range []string{"rekeyed: the 1 data key(s)", "Replace ENCRYPTION_KEY", "Restart every replica"} {
		if !strings.Contains(out, s) {
			t.Fatalf("rekey output lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, newRoot) || strings.Contains(out, oldRoot) {
		t.Fatalf("rekey output shows a root key:\n%s", out)
	}

	// The old key opens nothing: the vault, the vault commands and serve's
	// start-up refuse it.
	oldRaw, _ := vault.ParseRootKey(oldRoot)
	if _, err := vault.Open(context.Background(), oldRaw, e.db.VaultKeys(), vault.Options{}); !errors.Is(err, vault.ErrWrongRootKey) {
		t.Fatalf("vault.Open(old key) after rekey err = %v, want %v", err, vault.ErrWrongRootKey)
	}
	if out, err := e.run(t, "vault", "status"); err == nil || !strings.Contains(err.Error(), "ENCRYPTION_KEY does not match") {
		t.Fatalf("vault status with the old key: err = %v\n%s", err, out)
	}
	if gw, err := e.startGateway(t, oldRoot, io.Discard); err == nil || !strings.Contains(err.Error(), "ENCRYPTION_KEY") {
		if gw != nil {
			gw.Close()
		}
		t.Fatalf("newGateway(old key) after rekey err = %v, want one about ENCRYPTION_KEY", err)
	}

	// The new key opens every credential, in the vault and in serve.
	e.root = newRoot
	e.env["ENCRYPTION_KEY"] = newRoot
	e.checkAll(t, want, 1)
	gw, err := e.startGateway(t, newRoot, io.Discard)
	if err != nil {
		t.Fatalf("newGateway(new key) err = %v", err)
	}
	defer gw.Close()
	for ws, key := range want {
		got, err := e.db.OpenCredential(context.Background(), gw.Keyring, ws, "e2b")
		if err != nil || got.Reveal() != key {
			t.Fatalf("gateway OpenCredential(%s) = %q, %v; want %q", ws, got.Reveal(), err, key)
		}
	}
	// And rotation goes on under the new key.
	e.mustRun(t, "vault", "rotate", "--settle", "0")
	e.checkAll(t, want, 2)
}

func TestVaultRekey_ReplacesTheDataDirKeyFile(t *testing.T) {
	e := newCmdEnv(t)
	want := e.populate(t, 2)
	keyFile := filepath.Join(t.TempDir(), "encryption_key")
	if err := os.WriteFile(keyFile, []byte(e.root+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	newRoot := vault.GenerateRootKey()
	newRaw, _ := vault.ParseRootKey(newRoot)
	v := &vaultEnv{db: e.db, keyring: e.keyring(t), keyFile: keyFile}
	var out bytes.Buffer
	if err := vaultRekey(context.Background(), v, newRaw, &out); err != nil {
		t.Fatalf("vaultRekey() err = %v", err)
	}
	b, err := os.ReadFile(keyFile)
	if err != nil || strings.TrimSpace(string(b)) != newRoot {
		t.Fatalf("key file after rekey = %q, %v; want the new key", b, err)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", fi.Mode(), err)
	}
	if _, err := os.Stat(keyFile + ".new"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("staged key file left behind: %v", err)
	}
	e.root = newRoot
	e.checkAll(t, want, 1)
}

// startGateway runs serve's start-up (newGateway) with root as
// ENCRYPTION_KEY, logging to log.
func (e *cmdEnv) startGateway(t *testing.T, root string, log io.Writer) (*app.Gateway, error) {
	t.Helper()
	env := map[string]string{}
	for k, v := range e.env {
		env[k] = v
	}
	env["ENCRYPTION_KEY"] = root
	cfg, err := LoadConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("LoadConfig() err = %v", err)
	}
	return newGateway(context.Background(), cfg, e.db, slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

func TestServe_WrongRootKeyRefused(t *testing.T) {
	e := newCmdEnv(t)
	e.populate(t, 3)
	before := e.snapshot(t)
	wrong := vault.GenerateRootKey()

	var logs bytes.Buffer
	gw, err := e.startGateway(t, wrong, &logs)
	if err == nil {
		gw.Close()
		t.Fatal("newGateway(wrong key) err = nil, want a refusal")
	}
	for _, s := range []string{"ENCRYPTION_KEY does not match this database", "nothing was changed"} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("newGateway(wrong key) err = %q, want it to say %q", err, s)
		}
	}
	if !errors.Is(err, vault.ErrWrongRootKey) {
		t.Fatalf("newGateway(wrong key) err = %v, want %v", err, vault.ErrWrongRootKey)
	}
	for _, args := range [][]string{{"vault", "status"}, {"vault", "rotate", "--settle", "0"}, {"vault", "prune"}} {
		e.env["ENCRYPTION_KEY"] = wrong
		out, err := e.run(t, args...)
		if err == nil || !strings.Contains(err.Error(), "ENCRYPTION_KEY does not match this database") {
			t.Fatalf("mcpgate %v with a wrong key: err = %v\n%s", args, err, out)
		}
	}
	if e.snapshot(t) != before {
		t.Fatal("a wrong ENCRYPTION_KEY changed the database")
	}
	if strings.Contains(logs.String(), wrong) || strings.Contains(logs.String(), e.root) {
		t.Fatal("the log shows a root key")
	}

	// The right key still starts.
	gw, err = e.startGateway(t, e.root, &logs)
	if err != nil {
		t.Fatalf("newGateway(right key) err = %v", err)
	}
	gw.Close()
	if strings.Contains(logs.String(), e.root) {
		t.Fatal("the log shows the root key")
	}
}

func TestVault_NoKeysYet(t *testing.T) {
	dsn := storetest.NewDatabase(t)
	env := map[string]string{"DATABASE_URL": dsn, "ENCRYPTION_KEY": vault.GenerateRootKey()}
	getenv := func(k string) string { return env[k] }
	var out bytes.Buffer
	if err := run(context.Background(), []string{"vault", "status"}, getenv, &out, &out); err != nil ||
		!strings.Contains(out.String(), "holds no keys yet") {
		t.Fatalf("vault status on a fresh database: err = %v\n%s", err, out.String())
	}
	for _, cmd := range []string{"rotate", "prune"} {
		if err := run(context.Background(), []string{"vault", cmd}, getenv, &out, &out); err == nil ||
			!strings.Contains(err.Error(), "holds no keys yet") {
			t.Fatalf("vault %s on a fresh database: err = %v", cmd, err)
		}
	}
	db := mustOpenStore(t, dsn)
	if check, keys, err := db.VaultKeys().Load(context.Background()); err != nil || check != nil || len(keys) != 0 {
		t.Fatalf("vault tables after the commands = %q, %v, %v; want empty", check, keys, err)
	}
}

// TestCommandUsage: the command lines of the command groups (parseCommand)
// and what each refuses before touching a database.
func TestCommandUsage(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		wantOut string
	}{
		{name: "user: no command", args: []string{"user"}, wantErr: "no command given", wantOut: "Usage: mcpgate user"},
		{name: "user: unknown", args: []string{"user", "delete", "a@example.com"}, wantErr: `unknown command "delete"`},
		{name: "user: help", args: []string{"user", "help"}, wantOut: "reset-password [--stdin] [--revoke-keys] EMAIL"},
		{name: "user: flag help", args: []string{"user", "list", "-h"}, wantOut: "Usage: mcpgate user"},
		{name: "user: list takes no argument", args: []string{"user", "list", "x"}, wantErr: "unexpected arguments"},
		{name: "vault: no command", args: []string{"vault"}, wantErr: "no command given", wantOut: "Usage: mcpgate vault"},
		{name: "vault: unknown", args: []string{"vault", "spin"}, wantErr: `unknown command "spin"`},
		{name: "vault: help", args: []string{"vault", "help"}, wantOut: "--reseal-only"},
		{name: "vault: flag help", args: []string{"vault", "rotate", "-h"}, wantOut: "mcpgate vault rotate --reseal-only"},
		{name: "vault: unknown flag", args: []string{"vault", "rotate", "--fast"}, wantErr: "flag provided but not defined: -fast"},
		{name: "vault: bad batch", args: []string{"vault", "rotate", "--batch", "0"}, wantErr: "--batch must be at least 1"},
		{name: "vault: extra argument", args: []string{"vault", "status", "now"}, wantErr: "unexpected arguments"},
		{name: "vault: no key", args: []string{"vault", "status"}, env: map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/x"}, wantErr: "ENCRYPTION_KEY is required"},
		{name: "vault: bad key", args: []string{"vault", "status", "--encryption-key", "changeme"}, env: map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/x"}, wantErr: "placeholder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, func(k string) string { return tt.env[k] }, &out, &out)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("run(%v) err = %v, want %q", tt.args, err, tt.wantErr)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Fatalf("run(%v) output lacks %q:\n%s", tt.args, tt.wantOut, out.String())
			}
		})
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

// TestServe_CredentialThroughRotateAndRekey stores an E2B key through the
// API of a running gateway, then rotates and rekeys the vault while it keeps
// serving: the key is sealed in the table, opens throughout, and never shows
// in a response or a log line.
func TestServe_CredentialThroughRotateAndRekey(t *testing.T) {
	e := newCmdEnv(t)
	ctx := context.Background()
	const good, good2 = "e2b_0123456789abcdef0123456789abcdef0a1b", "e2b_fedcba9876543210fedcba9876543210c2d3"
	const unknown, personal = "e2b_00000000000000000000000000000000dead", "sk_e2b_0123456789abcdef0123456789abcdef"
	sim := httptest.NewServer(e2bsim.New(e2bsim.Options{TeamKeys: []string{good, good2}}))
	defer sim.Close()
	e.env["E2B_API_URL"], e.env["E2B_DASHBOARD_API_URL"] = sim.URL, sim.URL

	var logs testutil.LockedBuffer
	gw, err := e.startGateway(t, e.root, &logs)
	if err != nil {
		t.Fatalf("newGateway() err = %v", err)
	}
	defer func() { gw.Close() }()
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	c := newAPIBrowser(t, srv.URL)

	c.want(201, "POST", "/api/v1/auth/signup", `{"email":"ada@example.com","password":"a long enough password"}`)
	var me struct {
		Workspaces []struct{ ID string } `json:"workspaces"`
	}
	if err := json.Unmarshal(c.want(200, "GET", "/api/v1/me", ""), &me); err != nil || len(me.Workspaces) != 1 {
		t.Fatalf("GET /me = %+v, %v", me, err)
	}
	ws := me.Workspaces[0].ID
	conn := "/api/v1/workspaces/" + ws + "/connections/e2b"

	c.want(400, "PUT", conn, `{"api_key":"`+personal+`"}`)
	c.want(400, "PUT", conn, `{"api_key":"`+unknown+`"}`)
	c.want(404, "GET", conn, "")
	body := c.want(200, "PUT", conn, `{"api_key":" `+good+`\n"}`)
	if !strings.Contains(string(body), `"key_hint":"e2b_…0a1b"`) || !strings.Contains(string(body), `"updated_by":"ada@example.com"`) {
		t.Fatalf("PUT connection = %s", body)
	}
	var ct []byte
	if err := e.db.Pool.QueryRow(ctx, `SELECT ciphertext FROM connections`).Scan(&ct); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ct, []byte(good)) || bytes.Contains(ct, []byte(good[4:20])) {
		t.Fatal("the stored ciphertext holds the key")
	}
	open := func(k *vault.Keyring, want string) {
		t.Helper()
		s, err := e.db.OpenCredential(ctx, k, ws, "e2b")
		if err != nil || s.Reveal() != want {
			t.Fatalf("OpenCredential() = %q, %v; want %q", s.Reveal(), err, want)
		}
	}
	open(gw.Keyring, good) // trimmed before it was sealed

	// rotate while the gateway serves: the gateway opens the re-sealed row
	// (loading the new term on demand), and seals new keys under it after a
	// refresh.
	e.mustRun(t, "vault", "rotate", "--settle", "0")
	open(gw.Keyring, good)
	c.want(200, "PUT", conn, `{"api_key":"`+good2+`"}`)
	open(gw.Keyring, good2)
	e.checkAll(t, map[string]string{ws: good2}, 2)

	// rekey while it serves: it keeps opening and sealing with the keys it
	// holds; a restart needs the new key.
	newRoot := vault.GenerateRootKey()
	e.env["NEW_ENCRYPTION_KEY"] = newRoot
	e.mustRun(t, "vault", "rekey")
	delete(e.env, "NEW_ENCRYPTION_KEY")
	c.want(200, "PUT", conn, `{"api_key":"`+good+`"}`)
	open(gw.Keyring, good)
	gw.Close()
	if _, err := e.startGateway(t, e.root, &logs); err == nil || !strings.Contains(err.Error(), "ENCRYPTION_KEY") {
		t.Fatalf("restart with the old key err = %v, want a refusal", err)
	}
	e.root, e.env["ENCRYPTION_KEY"] = newRoot, newRoot
	gw, err = e.startGateway(t, newRoot, &logs)
	if err != nil {
		t.Fatalf("restart with the new key err = %v", err)
	}
	open(gw.Keyring, good)
	e.checkAll(t, map[string]string{ws: good}, 2)

	for _, k := range []string{good, good2, unknown, personal} {
		secret := strings.TrimPrefix(strings.TrimPrefix(k, "sk_"), "e2b_")[:24]
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("the log shows the key %q:\n%s", k, logs.String())
		}
		if strings.Contains(c.responses.String(), secret) {
			t.Fatalf("a response shows the key %q", k)
		}
	}
	if !strings.Contains(logs.String(), "{") {
		t.Fatal("nothing was logged: the log capture is not wired")
	}
}
