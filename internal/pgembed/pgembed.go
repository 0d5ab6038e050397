package pgembed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// User is the superuser role that initdb creates and DSN connects as.
	User = "mcpgate"
	// Database is the database Start creates for the application.
	Database = "mcpgate"

	// port only names the socket file (.s.PGSQL.5432); nothing listens on TCP,
	// so it never clashes with another server.
	port = 5432
	// maxSocketPath is the longest Unix socket path Linux accepts
	// (sizeof(sun_path) - 1); PostgreSQL and every client enforce it.
	maxSocketPath = 107
	// rotateLogAt is the size above which Start moves postgres.log aside.
	rotateLogAt = 16 << 20

	defaultStartTimeout = 60 * time.Second
	// transientRetryFor bounds the retries of a start that failed on the
	// leftovers of a killed server.
	transientRetryFor = 15 * time.Second
)

// ErrInUse means another process (or another Cluster in this one) is using
// the same DATA_DIR. Test for it with errors.Is.
var ErrInUse = errors.New("DATA_DIR is in use")

type inUseError struct{ lock, holder string }

func (e *inUseError) Error() string {
	who := "another mcpgate"
	if pid := strings.TrimSpace(e.holder); pid != "" {
		who += " (pid " + pid + ")"
	}
	return fmt.Sprintf("%s is already using DATA_DIR %s (it holds %s): stop it or choose another DATA_DIR",
		who, filepath.Dir(e.lock), e.lock)
}

func (e *inUseError) Is(target error) bool { return target == ErrInUse }

// Options configure Start.
type Options struct {
	// Dir is DATA_DIR; the cluster lives in Dir/postgres. Required.
	Dir string
	// Logger receives life-cycle events (initdb, start, adopt, stop). The
	// server's own log goes to Dir/postgres.log. Nil discards.
	Logger *slog.Logger
	// BinDirs, when set, are the only directories searched for initdb, pg_ctl
	// and postgres. Empty means PATH, then /usr/lib/postgresql/*/bin.
	BinDirs []string
	// Settings are extra server parameters passed on the command line, for
	// example {"fsync": "off"} for a throw-away test cluster. Names and values
	// are limited to a safe character set because pg_ctl hands them to a shell.
	Settings map[string]string
	// StartTimeout bounds how long pg_ctl waits for the server to accept
	// connections. Zero means 60s.
	StartTimeout time.Duration
}

// Cluster is a running embedded PostgreSQL server. Its methods are safe for
// concurrent use.
type Cluster struct {
	dir     string // absolute DATA_DIR
	pgData  string
	sockDir string
	logFile string
	bin     binDir
	user    serverUser
	logger  *slog.Logger

	mu   sync.Mutex
	lock *os.File // the DATA_DIR flock; nil once stopped
}

// Start initialises the cluster in opts.Dir/postgres on first use, starts the
// server (or adopts one left running by a crashed process) and makes sure the
// application database exists. The server keeps running until Stop; see the
// package documentation for what happens when the caller dies first.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("embedded postgres: no data directory given")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	extra, err := settingsArgs(opts.Settings)
	if err != nil {
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	c := &Cluster{
		dir:     dir,
		pgData:  filepath.Join(dir, "postgres"),
		sockDir: filepath.Join(dir, "run"),
		logFile: filepath.Join(dir, "postgres.log"),
		logger:  opts.Logger,
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if sock := c.socketPath(); len(sock) > maxSocketPath {
		return nil, fmt.Errorf("embedded postgres: DATA_DIR %s is too deep: its socket path %s is %d bytes, over the %d-byte limit of Unix sockets; choose a shorter DATA_DIR",
			dir, sock, len(sock), maxSocketPath)
	}
	if c.user, err = resolveServerUser(); err != nil {
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	major, err := clusterMajorVersion(c.pgData)
	if err != nil {
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	if c.bin, err = findBinaries(ctx, opts.BinDirs, major); err != nil {
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded postgres: create DATA_DIR: %w", err)
	}
	// Lock before touching anything else in DATA_DIR: a refused second Start
	// must leave the running cluster's files alone.
	if c.lock, err = lockFile(filepath.Join(dir, "postgres.lock")); err != nil {
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	if err := c.prepareDataDir(); err != nil {
		c.lock.Close()
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	if err := c.start(ctx, major == 0, extra, opts.StartTimeout); err != nil {
		c.lock.Close()
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	return c, nil
}

// DSN returns a connection URL for the application database, as the superuser
// User, over the Unix socket, for example
//
//	postgres://mcpgate@/mcpgate?host=/srv/mcpgate/data/run&port=5432&sslmode=disable
//
// pgx, libpq (psql) and net/url all parse it, so tests can swap the database
// name in the path.
func (c *Cluster) DSN() string { return c.dsn(Database) }

func (c *Cluster) dsn(database string) string {
	// Slashes are legal in a query; leaving them readable helps in logs.
	// Spaces become %20, not "+", which libpq would take literally.
	host := strings.NewReplacer("%2F", "/", "+", "%20").Replace(url.QueryEscape(c.sockDir))
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(User),
		Path:     "/" + database,
		RawQuery: "host=" + host + "&port=" + strconv.Itoa(port) + "&sslmode=disable",
	}
	return u.String()
}

// LogFile returns the path of the server's log, DATA_DIR/postgres.log.
func (c *Cluster) LogFile() string { return c.logFile }

// Stop shuts the server down with pg_ctl stop -m fast (open transactions are
// rolled back, data is flushed) and releases DATA_DIR. If that does not finish
// in time it falls back to -m immediate (crash recovery on the next start,
// still no data loss for committed transactions). Stop is idempotent.
//
// Give Stop its own context with a timeout: the context that a signal
// handler cancels is already done and would abort the shutdown.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock == nil {
		return nil
	}
	// The flock goes whatever happens: a server we failed to stop is adopted
	// or stopped by the next Start, and keeping the lock would only block it.
	defer func() {
		c.lock.Close()
		c.lock = nil
	}()
	err := c.pgStop(ctx, "fast")
	if err == nil {
		c.logger.Info("embedded postgres stopped", "data_dir", c.dir)
		return nil
	}
	if !c.running(context.WithoutCancel(ctx)) {
		// Killed or crashed before we got here: nothing left to stop, and
		// postmaster.pid is stale, which the next Start handles.
		c.logger.Warn("embedded postgres was not running at stop", "data_dir", c.dir, "error", err)
		return nil
	}
	c.logger.Warn("embedded postgres fast stop failed, trying immediate", "error", err)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err2 := c.pgStop(stopCtx, "immediate"); err2 != nil && c.running(stopCtx) {
		return fmt.Errorf("stop embedded postgres: %w", errors.Join(err, err2))
	}
	return nil
}

func (c *Cluster) socketPath() string {
	return filepath.Join(c.sockDir, ".s.PGSQL."+strconv.Itoa(port))
}

// prepareDataDir creates the socket directory and the log file, and gives
// the server user what it needs to reach them.
func (c *Cluster) prepareDataDir() error {
	if c.user.switchTo != nil {
		// The server user must traverse DATA_DIR to reach its own
		// subdirectories. o+x lets it look up names it already knows without
		// listing anything; every file in DATA_DIR keeps its own mode.
		fi, err := os.Stat(c.dir)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(c.dir, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("let %s traverse DATA_DIR: %w", c.user.name, err)
			}
			c.logger.Info("added o+x to DATA_DIR so the postgres user can reach it", "data_dir", c.dir, "user", c.user.name)
		}
	}
	if err := c.user.checkTraverse(c.dir); err != nil {
		return err
	}
	if err := c.ensurePrivateDir(c.sockDir); err != nil {
		return err
	}
	return c.ensureLogFile()
}

// ensurePrivateDir makes dir a real directory (not a symlink), mode 0700,
// owned by the server user: the socket's only access control.
func (c *Cluster) ensurePrivateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	return c.user.own(dir)
}

// ensureLogFile creates postgres.log for the server user (pg_ctl opens it as
// that user) and moves a large one aside so it cannot fill the disk forever.
func (c *Cluster) ensureLogFile() error {
	if fi, err := os.Lstat(c.logFile); err == nil && fi.Mode().IsRegular() && fi.Size() > rotateLogAt {
		if err := os.Rename(c.logFile, c.logFile+".1"); err != nil {
			return fmt.Errorf("rotate %s: %w", c.logFile, err)
		}
	}
	f, err := os.OpenFile(c.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND|noFollow, 0o600)
	if err != nil {
		return fmt.Errorf("create log file: %w", err)
	}
	f.Close()
	return c.user.own(c.logFile)
}

// start runs initdb when needed, then gets a server running: adopting one
// that a crashed owner left behind, or starting a fresh one.
func (c *Cluster) start(ctx context.Context, initNeeded bool, extra string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	if initNeeded {
		if err := c.initdb(ctx); err != nil {
			return err
		}
	} else {
		if err := c.user.ownTree(c.pgData); err != nil {
			return fmt.Errorf("hand the cluster to %s: %w", c.user.name, err)
		}
		// postgres refuses a group- or world-readable data directory.
		if err := os.Chmod(c.pgData, 0o700); err != nil {
			return err
		}
	}

	if c.running(ctx) {
		// We hold the flock, so whoever started this server is gone.
		if err := c.ping(ctx); err == nil {
			c.logger.Warn("adopted an embedded postgres left running by a previous process", "data_dir", c.dir)
			return c.ensureDatabase(ctx)
		}
		c.logger.Warn("restarting an unresponsive embedded postgres left running by a previous process", "data_dir", c.dir)
		// pg_ctl also fails when the server dies while it waits, which is
		// the point; only a server that is still there is a problem.
		if err := c.pgStop(ctx, "immediate"); err != nil && c.running(ctx) {
			return err
		}
	}

	if err := c.pgStart(ctx, extra, timeout); err != nil {
		return err
	}
	if err := c.ensureDatabase(ctx); err != nil {
		// Leave nothing running behind a failed Start.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = c.pgStop(stopCtx, "fast")
		return err
	}
	c.logger.Info("embedded postgres started", "data_dir", c.dir, "version", c.bin.major, "user", c.user.name)
	return nil
}

// initdb creates the cluster in a scratch directory and renames it into
// place, so a crash or Ctrl-C half-way never leaves a half-made cluster that
// later looks real.
func (c *Cluster) initdb(ctx context.Context) error {
	tmp := c.pgData + ".initdb"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := c.ensurePrivateDir(tmp); err != nil {
		return err
	}
	c.logger.Info("creating embedded postgres cluster", "data_dir", c.pgData, "version", c.bin.major)
	if _, err := c.run(ctx, "initdb",
		"--pgdata", tmp,
		"--username", User,
		// Trust on the socket only; see the package documentation for why.
		"--auth-local", "trust",
		"--auth-host", "reject",
		"--encoding", "UTF8",
		// C.UTF-8: byte-order collation (fast, the same on every machine,
		// no glibc collation changes to break indexes) with Unicode-aware
		// lower()/upper().
		"--locale", "C.UTF-8",
		"--no-instructions",
	); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, c.pgData); err != nil {
		return fmt.Errorf("move new cluster into place (does %s exist and hold something else?): %w", c.pgData, err)
	}
	if d, err := os.Open(c.dir); err == nil { // make the rename durable
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// pgStart starts the server and waits until it accepts connections.
func (c *Cluster) pgStart(ctx context.Context, extra string, timeout time.Duration) error {
	// The postmaster's working directory is PGDATA, so a relative socket
	// directory needs no shell or list quoting whatever DATA_DIR contains.
	// These settings are on the command line so that neither an edited
	// postgresql.conf nor ALTER SYSTEM can open a TCP port.
	opts := "-c listen_addresses='' -c unix_socket_directories=../run -c unix_socket_permissions=0700 -c port=" + strconv.Itoa(port) + extra
	secs := strconv.Itoa(max(1, int(timeout.Seconds())))

	// A server killed with SIGKILL leaves traces for a moment: backends that
	// exit only when they notice the postmaster is gone ("pre-existing shared
	// memory block is still in use"), and a zombie postmaster until init
	// reaps it, which makes postmaster.pid look live ("lock file ... already
	// exists"). Retry briefly on those instead of failing on the race; the
	// flock already rules out a second pgembed, so a real conflict is only a
	// foreign server on our directory, reported after the retries.
	deadline := time.Now().Add(min(timeout, transientRetryFor))
	for attempt := 1; ; attempt++ {
		offset := fileSize(c.logFile)
		_, err := c.run(ctx, "pg_ctl", "start", "--pgdata", c.pgData, "--log", c.logFile, "--wait", "--timeout", secs, "--silent", "-o", opts)
		if err == nil {
			return nil
		}
		logTail := readFrom(c.logFile, offset)
		if !transientStartFailure(logTail) || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%w\nlast lines of %s:\n%s", err, c.logFile, lastLines(logTail, 15))
		}
		c.logger.Info("embedded postgres not ready to start yet, retrying", "attempt", attempt)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func transientStartFailure(log string) bool {
	return strings.Contains(log, "pre-existing shared memory block") ||
		(strings.Contains(log, "lock file") && strings.Contains(log, "already exists"))
}

func (c *Cluster) pgStop(ctx context.Context, mode string) error {
	secs := "60"
	if d, ok := ctx.Deadline(); ok {
		secs = strconv.Itoa(max(1, int(time.Until(d).Seconds())))
	}
	_, err := c.run(ctx, "pg_ctl", "stop", "--pgdata", c.pgData, "--mode", mode, "--wait", "--timeout", secs, "--silent")
	return err
}

// running reports whether postmaster.pid names a live server. pg_ctl status
// ignores a stale file left by a killed server.
func (c *Cluster) running(ctx context.Context) bool {
	_, err := c.run(ctx, "pg_ctl", "status", "--pgdata", c.pgData)
	return err == nil // exit 3: not running; 4: no cluster
}

func (c *Cluster) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.dsn("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.Ping(ctx)
}

// ensureDatabase creates the application database. It runs on every start,
// not only after initdb, so a crash between the two heals itself.
func (c *Cluster) ensureDatabase(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.dsn("postgres"))
	if err != nil {
		return fmt.Errorf("connect to embedded postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", Database).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", Database, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{Database}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", Database, err)
	}
	c.logger.Info("created embedded postgres database", "database", Database)
	return nil
}

// run executes one of the server binaries as the server user, in its own
// process group, with a scrubbed environment, and returns its output.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.bin.path(name), args...)
	// The child changes directory after dropping privileges, and our own
	// working directory (say /root) may be closed to the server user.
	cmd.Dir = c.dir
	cmd.Env = childEnv()
	cmd.SysProcAttr = c.user.sysProcAttr()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// pg_ctl redirects the postmaster's output to the log file, but should
	// anything keep our pipe open, do not hang on it.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(out.String())
		if msg != "" {
			return out.Bytes(), fmt.Errorf("%s %s: %w: %s", name, firstArg(args), err, msg)
		}
		return out.Bytes(), fmt.Errorf("%s %s: %w", name, firstArg(args), err)
	}
	return out.Bytes(), nil
}

func firstArg(args []string) string {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0]
	}
	return ""
}

// childEnv keeps PATH and the time zone and drops everything else: PG*
// variables (PGHOST, PGPORT, PGDATA...) would silently redirect pg_ctl, and
// the C locale keeps its messages in English for the log checks above.
func childEnv() []string {
	env := []string{"LC_ALL=C"}
	for _, k := range []string{"PATH", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

var (
	settingNameRE  = regexp.MustCompile(`^[a-z][a-z0-9_.]*$`)
	settingValueRE = regexp.MustCompile(`^[A-Za-z0-9_.:+-]+$`)
	// reservedSettings keep the server off the network and on its socket.
	reservedSettings = []string{"listen_addresses", "port", "unix_socket_directories", "unix_socket_permissions", "unix_socket_group"}
)

// settingsArgs turns Options.Settings into " -c name=value" pairs, in a fixed
// order, refusing anything a shell could misread.
func settingsArgs(settings map[string]string) (string, error) {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		value := settings[name]
		if !settingNameRE.MatchString(name) || !settingValueRE.MatchString(value) {
			return "", fmt.Errorf("setting %q = %q: only [a-z0-9_.] names and [A-Za-z0-9_.:+-] values are allowed", name, value)
		}
		if slices.Contains(reservedSettings, name) {
			return "", fmt.Errorf("setting %q is managed by the embedded postgres", name)
		}
		b.WriteString(" -c " + name + "=" + value)
	}
	return b.String(), nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns what was appended to path after offset (at most 64 KiB).
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	return string(b)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
