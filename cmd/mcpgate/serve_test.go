package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/migrations"
)

// serveEnv is the environment of a test instance: a fresh database,
// generated secrets, a loopback port chosen by the kernel, and an E2B API
// that nothing listens on.
func serveEnv(t *testing.T) map[string]string {
	t.Helper()
	return map[string]string{
		"DATABASE_URL": storetest.NewDatabase(t), "LISTEN_ADDR": "127.0.0.1:0",
		"ENCRYPTION_KEY": newKey(t), "JWT_SECRET": newKey(t), "LOG_LEVEL": "debug",
		"E2B_API_URL": "http://127.0.0.1:9", "E2B_DASHBOARD_API_URL": "http://127.0.0.1:9",
		"DATA_DIR": t.TempDir(), // the audit spool goes there
	}
}

// mustOpenStore opens the store on dsn until the test ends.
func mustOpenStore(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("store.Open() err = %v", err)
	}
	t.Cleanup(db.Close)
	return db
}

// serveInstance is serve running in the test process.
type serveInstance struct {
	base string
	logs *testutil.LockedBuffer
	// watch sees every line of the log as it is written.
	watch  *logWatch
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// mustServe runs serve with env until the test ends (or stop is called) and
// returns once it accepts connections. serve must return nil when stopped;
// its log is printed if the test failed.
func mustServe(t *testing.T, env map[string]string) *serveInstance {
	t.Helper()
	if _, ok := env["DATA_DIR"]; !ok {
		env["DATA_DIR"] = t.TempDir() // never the tree: the audit spool goes there
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &serveInstance{logs: &testutil.LockedBuffer{}, watch: &logWatch{}, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() { in.done <- serve(ctx, nil, envOf(env), io.MultiWriter(in.logs, in.watch), ready) }()
	select {
	case addr := <-ready:
		in.base = "http://" + addr
	case err := <-in.done:
		cancel()
		t.Fatalf("serve() err = %v before ready; logs:\n%s", err, in.logs)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("serve not ready after 60s; logs:\n%s", in.logs)
	}
	t.Cleanup(func() {
		if err := in.stop(t); err != nil {
			t.Errorf("serve() err = %v", err)
		}
		if t.Failed() {
			t.Logf("serve log:\n%s", in.logs)
		}
	})
	return in
}

// stop cancels serve's context (once) and returns what serve returned.
func (in *serveInstance) stop(t testing.TB) error {
	t.Helper()
	in.once.Do(func() {
		in.cancel()
		select {
		case in.err = <-in.done:
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not return 30s after cancel")
		}
	})
	return in.err
}

// apiBrowser keeps cookies and sends the CSRF header, like the dashboard.
// It keeps every response body, for tests that check none holds a secret.
type apiBrowser struct {
	t         *testing.T
	base      string
	jar       *cookiejar.Jar
	hc        *http.Client
	responses bytes.Buffer
}

func newAPIBrowser(t *testing.T, base string) *apiBrowser {
	jar, _ := cookiejar.New(nil)
	return &apiBrowser{t: t, base: base, jar: jar, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

func (b *apiBrowser) cookie(name string) string { return e2eCookie(b.jar, b.base, name) }

// do sends a request with a JSON body (when body is not empty) and returns
// the status and body.
func (b *apiBrowser) do(method, path, body string) (int, []byte) {
	b.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.base+path, rd)
	if err != nil {
		b.t.Fatalf("NewRequest() err = %v", err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := b.cookie(api.CSRFCookie); tok != "" {
		req.Header.Set(api.CSRFHeader, tok)
	}
	status, out := e2eSend(b.t, b.hc, req)
	b.responses.Write(out)
	return status, out
}

// want sends a request and fails unless it answers status.
func (b *apiBrowser) want(status int, method, path, body string) []byte {
	b.t.Helper()
	got, out := b.do(method, path, body)
	if got != status {
		b.t.Fatalf("%s %s status = %d, want %d; body %s", method, path, got, status, out)
	}
	return out
}

func TestServe_EndToEnd(t *testing.T) {
	env := serveEnv(t)
	in := mustServe(t, env)
	b := newAPIBrowser(t, in.base)

	b.want(200, "GET", "/healthz", "")
	if out := b.want(200, "GET", "/readyz", ""); !strings.Contains(string(out), "ready") {
		t.Errorf("/readyz body = %s", out)
	}
	const pw = "a long enough password"
	b.want(201, "POST", "/api/v1/auth/signup", `{"email":"Ada@Example.com","password":"`+pw+`"}`)
	var me struct {
		User struct {
			ID, Email     string
			InstanceAdmin bool `json:"instance_admin"`
		} `json:"user"`
		Workspaces []struct{ ID, Name, Role string } `json:"workspaces"`
	}
	if err := json.Unmarshal(b.want(200, "GET", "/api/v1/me", ""), &me); err != nil {
		t.Fatalf("decode /me: %v", err)
	}
	if me.User.Email != "ada@example.com" || !me.User.InstanceAdmin || len(me.Workspaces) != 1 || me.Workspaces[0].Role != "owner" {
		t.Fatalf("/me = %+v, want ada, serveInstance admin, owner of a personal workspace", me)
	}
	b.want(201, "POST", "/api/v1/workspaces", `{"name":"Team"}`)
	var list struct {
		Workspaces []struct{ ID, Name string } `json:"workspaces"`
	}
	if err := json.Unmarshal(b.want(200, "GET", "/api/v1/workspaces", ""), &list); err != nil || len(list.Workspaces) != 2 {
		t.Fatalf("GET /workspaces = %+v, %v; want two", list, err)
	}
	b.want(204, "POST", "/api/v1/auth/logout", "")
	b.want(401, "GET", "/api/v1/me", "")
	b.want(200, "POST", "/api/v1/auth/login", `{"email":"ada@example.com","password":"`+pw+`"}`)
	b.want(200, "GET", "/api/v1/me", "")

	if err := in.stop(t); err != nil {
		t.Fatalf("serve() after cancel err = %v, want nil", err)
	}
	if _, err := http.Get(in.base + "/healthz"); err == nil {
		t.Errorf("still serving after serve returned")
	}
	logs := in.logs.String()
	for _, want := range []string{"mcpgate serving", "shutting down"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	for _, secret := range []string{env["JWT_SECRET"], env["ENCRYPTION_KEY"], pw} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs show a secret %q", secret)
		}
	}
}

func TestServe_ConfigProblems(t *testing.T) {
	env := map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/x", "LISTEN_ADDR": "nope", "SIGNUP": "closed"}
	ready := make(chan string, 1)
	err := serve(context.Background(), nil, envOf(env), io.Discard, ready)
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 4 {
		t.Fatalf("serve() err = %v, want a *ConfigError with 4 problems (listen, signup, two secrets)", err)
	}
	if len(ready) != 0 {
		t.Fatalf("serve reported ready with a bad configuration")
	}
}

func TestRun_Migrate(t *testing.T) {
	env := envOf(map[string]string{"DATABASE_URL": storetest.NewDatabase(t)})
	ctx := context.Background()
	run1 := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if err := run(ctx, args, env, &stdout, &stderr); err != nil {
			t.Fatalf("run(%q) err = %v; stderr %s", args, err, stderr.String())
		}
		return stdout.String()
	}
	// Count the files, not the latest version: versions have gaps while
	// branches that each add a migration are merged.
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	latest := len(files)
	lastLine := func(status string) string {
		lines := strings.Split(strings.TrimSpace(status), "\n")
		return lines[len(lines)-1]
	}
	status := run1("migrate", "status")
	if n := strings.Count(status, "applied"); n != latest || strings.Contains(status, "pending") {
		t.Fatalf("migrate status = %q, want %d applied migrations", status, latest)
	}
	if out := run1("migrate", "down"); !strings.Contains(out, "rolled back") {
		t.Fatalf("migrate down = %q", out)
	}
	if st := run1("migrate", "status"); !strings.Contains(lastLine(st), "pending") {
		t.Fatalf("migrate status after down = %q, want the last migration pending", st)
	}
	if out := run1("migrate", "up"); !strings.Contains(out, "applied 1 migration") {
		t.Fatalf("migrate up = %q, want one applied", out)
	}
	if st := run1("migrate", "status"); strings.Contains(st, "pending") {
		t.Fatalf("migrate status after up = %q, want all applied", st)
	}
	if out := run1("migrate"); !strings.Contains(out, "applied 0 migration") {
		t.Fatalf("migrate (up, nothing to do) = %q", out)
	}
	var stdout bytes.Buffer
	if err := run(ctx, []string{"migrate", "sideways"}, env, &stdout, io.Discard); err == nil {
		t.Fatalf("migrate sideways err = nil, want an error")
	}
}

func TestRun_Commands(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantErr    bool
		wantStdout string
		wantStderr string
	}{
		{name: "no command", args: nil, wantErr: true, wantStderr: "Usage:"},
		{name: "unknown command", args: []string{"frobnicate"}, wantErr: true, wantStderr: "Usage:"},
		{name: "version", args: []string{"version"}, wantStdout: "mcpgate " + version},
		{name: "help", args: []string{"help"}, wantStdout: "Usage:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, envOf(nil), &stdout, &stderr)
			if (err != nil) != tt.wantErr {
				t.Fatalf("run(%q) err = %v, want error %v", tt.args, err, tt.wantErr)
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) || !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("run(%q) stdout %q, stderr %q; want %q, %q", tt.args, stdout.String(), stderr.String(), tt.wantStdout, tt.wantStderr)
			}
		})
	}
}
