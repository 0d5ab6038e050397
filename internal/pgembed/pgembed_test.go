package pgembed_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate/internal/pgembed"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// helperDirEnv makes the test binary act as a crashing mcpgate: see
// TestHelperProcess.
const helperDirEnv = "PGEMBED_TEST_HELPER_DIR"

func TestStartStopRestartKeepsData(t *testing.T) {
	t.Parallel()
	dir := mustDataDir(t)
	c := mustStart(t, dir)

	u, err := url.Parse(c.DSN())
	if err != nil {
		t.Fatalf("url.Parse(DSN()) err = %v", err)
	}
	if got, want := u.Query().Get("host"), filepath.Join(dir, "run"); got != want {
		t.Errorf("DSN host = %q, want %q", got, want)
	}
	if got, want := u.Path, "/"+pgembed.Database; got != want {
		t.Errorf("DSN path = %q, want %q", got, want)
	}

	conn := testutil.MustConnect(t, c.DSN())
	mustExec(t, conn, "CREATE TABLE notes (body text NOT NULL)")
	mustExec(t, conn, "INSERT INTO notes VALUES ('kept')")
	var listen, encoding string
	var super bool
	if err := conn.QueryRow(context.Background(),
		"SELECT current_setting('listen_addresses'), current_setting('server_encoding'), rolsuper FROM pg_roles WHERE rolname = current_user",
	).Scan(&listen, &encoding, &super); err != nil {
		t.Fatal(err)
	}
	if listen != "" || encoding != "UTF8" || !super {
		t.Errorf("listen_addresses = %q, encoding = %q, superuser = %v; want \"\", UTF8, true", listen, encoding, super)
	}
	conn.Close(context.Background())

	// The server must not share our process group, or a terminal's Ctrl-C
	// would kill it before Stop runs.
	pid := postmasterPID(t, dir)
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid == syscall.Getpgrp() {
		t.Errorf("postmaster pgid = %d (err %v), same as ours %d", pgid, err, syscall.Getpgrp())
	}
	for _, p := range []string{filepath.Join(dir, "postgres"), filepath.Join(dir, "run")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("stat %s = %v, %v; want mode 0700", p, fi.Mode(), err)
		}
	}

	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("Stop() err = %v", err)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop() err = %v, want nil", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres", "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("postmaster.pid after Stop: err = %v, want not exist", err)
	}
	if log, _ := os.ReadFile(c.LogFile()); !strings.Contains(string(log), "database system is shut down") {
		t.Errorf("%s does not record the shutdown:\n%s", c.LogFile(), log)
	}

	wantNote(t, mustStart(t, dir), "kept")
}

func TestSecondStartRefused(t *testing.T) {
	t.Parallel()
	dir := mustDataDir(t)
	c := mustStart(t, dir)

	_, err := pgembed.Start(context.Background(), pgembed.Options{Dir: dir})
	if !errors.Is(err, pgembed.ErrInUse) {
		t.Fatalf("second Start() err = %v, want ErrInUse", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "already using DATA_DIR "+dir) || !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("second Start() err = %q, want it to name the directory and our pid", msg)
	}
	// The refused Start must not have disturbed the running cluster.
	conn := testutil.MustConnect(t, c.DSN())
	if err := conn.Ping(context.Background()); err != nil {
		t.Errorf("Ping() after refused Start err = %v", err)
	}
	conn.Close(context.Background())

	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("Stop() err = %v", err)
	}
	mustStart(t, dir) // free again
}

func TestMissingBinaries(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	_, err := pgembed.Start(context.Background(), pgembed.Options{Dir: dir, BinDirs: []string{t.TempDir()}})
	if !errors.Is(err, pgembed.ErrBinariesNotFound) {
		t.Fatalf("Start() err = %v, want ErrBinariesNotFound", err)
	}
	for _, want := range []string{"apt-get install postgresql", "DATABASE_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start() err = %q, want it to mention %q", err, want)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed Start created %s (err %v)", dir, err)
	}
}

func TestSocketPathTooLong(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	_, err := pgembed.Start(context.Background(), pgembed.Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "107-byte limit") {
		t.Fatalf("Start() err = %v, want the socket path limit", err)
	}
}

func TestUnsafeSettingsRefused(t *testing.T) {
	t.Parallel()
	for _, s := range []map[string]string{
		{"work_mem": "4MB; rm -rf /"},
		{"listen_addresses": "*"},
		{"Bad Name": "1"},
	} {
		_, err := pgembed.Start(context.Background(), pgembed.Options{Dir: t.TempDir(), Settings: s})
		if err == nil {
			t.Errorf("Start(Settings: %v) err = nil, want refusal", s)
		}
	}
}

// A server killed with SIGKILL leaves a stale postmaster.pid; it must not
// block the next Start, and committed data must survive.
func TestRestartAfterPostmasterKilled(t *testing.T) {
	t.Parallel()
	dir := mustDataDir(t)
	c := mustStart(t, dir)
	mustWriteNote(t, c.DSN(), "survived")

	if err := syscall.Kill(postmasterPID(t, dir), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Errorf("Stop() of a killed server err = %v, want nil", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres", "postmaster.pid")); err != nil {
		t.Fatalf("want a stale postmaster.pid for this test, stat err = %v", err)
	}

	wantNote(t, mustStart(t, dir), "survived")
}

// When mcpgate itself dies without Stop, the server runs on as an orphan; the
// next Start must take it over rather than fail or start a second one.
func TestRestartAfterOwnerCrash(t *testing.T) {
	t.Parallel()
	dir := mustDataDir(t)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper did not report its DSN: %v", err)
	}
	mustWriteNote(t, strings.TrimSpace(line), "orphaned")

	// While the helper lives, its lock keeps us out, across processes.
	if _, err := pgembed.Start(context.Background(), pgembed.Options{Dir: dir}); !errors.Is(err, pgembed.ErrInUse) {
		t.Fatalf("Start() while another process runs the cluster err = %v, want ErrInUse", err)
	}

	orphan := postmasterPID(t, dir)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	c := mustStart(t, dir)
	if got := postmasterPID(t, dir); got != orphan {
		t.Errorf("postmaster pid = %d, want the adopted orphan %d", got, orphan)
	}
	wantNote(t, c, "orphaned")
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("Stop() err = %v", err)
	}
	if err := syscall.Kill(orphan, 0); !errors.Is(err, syscall.ESRCH) {
		// A zombie may linger until init reaps it; give it a moment.
		waitGone(t, orphan)
	}
}

// TestMain doubles as the crashing mcpgate of TestRestartAfterOwnerCrash:
// with helperDirEnv set, the test binary starts a cluster, prints its DSN and
// waits to be killed without calling Stop.
func TestMain(m *testing.M) {
	if dir := os.Getenv(helperDirEnv); dir != "" {
		c, err := pgembed.Start(context.Background(), pgembed.Options{Dir: dir})
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		fmt.Println(c.DSN())
		time.Sleep(time.Hour)
	}
	os.Exit(m.Run())
}

// mustDataDir returns a fresh DATA_DIR, once the server binaries are known
// to be there.
func mustDataDir(t *testing.T) string {
	t.Helper()
	mustHaveBinaries(t)
	return testutil.ClusterDir(t)
}

// mustHaveBinaries fails, never skips (but under -short, make check's tier,
// which starts no PostgreSQL): the project's test command installs the
// server package, so its absence is a broken setup to report.
func mustHaveBinaries(t *testing.T) {
	t.Helper()
	testutil.SkipIfShort(t, "PostgreSQL's server binaries")
	if _, err := pgembed.FindBinaries(context.Background(), nil, 0); err != nil {
		t.Fatalf("%v\n(make test installs it through scripts/ensure-postgres.sh)", err)
	}
}

func mustStart(t *testing.T, dir string) *pgembed.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgembed.Start(ctx, pgembed.Options{Dir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Start() err = %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("cleanup Stop() err = %v", err)
		}
	})
	return c
}

func mustExec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("Exec(%q) err = %v", sql, err)
	}
}

// mustWriteNote commits one note in a new table of the cluster at dsn, for
// wantNote to find after a restart.
func mustWriteNote(t *testing.T, dsn, body string) {
	t.Helper()
	conn := testutil.MustConnect(t, dsn)
	defer conn.Close(context.Background())
	mustExec(t, conn, "CREATE TABLE notes (body text NOT NULL)")
	mustExec(t, conn, "INSERT INTO notes VALUES ('"+body+"')")
}

// wantNote checks that the note committed before a restart is there.
func wantNote(t *testing.T, c *pgembed.Cluster, want string) {
	t.Helper()
	conn := testutil.MustConnect(t, c.DSN())
	defer conn.Close(context.Background())
	var body string
	if err := conn.QueryRow(context.Background(), "SELECT body FROM notes").Scan(&body); err != nil {
		t.Fatalf("select note err = %v", err)
	}
	if body != want {
		t.Errorf("note after the restart = %q, want %q", body, want)
	}
}

func postmasterPID(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "postgres", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		t.Fatalf("bad postmaster.pid: %v", err)
	}
	return pid
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for range 100 {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("postmaster %d still running after Stop", pid)
}
