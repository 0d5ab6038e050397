// Command pgembed-dev starts (or reuses) an embedded PostgreSQL cluster for
// development and tests and prints its connection URL on stdout.
//
// Unlike mcpgate serve, it leaves the server running when it exits, so that
// "make test" can point TEST_DATABASE_URL at it; the next run finds the server
// through postmaster.pid and reuses it. Stop it with --stop.
//
//	pgembed-dev --dir .cache/testpg          # prints the DSN
//	pgembed-dev --dir .cache/testpg --stop
//	pgembed-dev --probe URL [URL...]         # prints the first URL that works
//
// --probe exists because psql may be missing on a fresh machine while Go is
// always there: it prints the first URL that connects as a role allowed to
// create databases, exits 2 when no server answers at all, and 1 when one
// answers but none of the URLs can use it.
//
// Logs and errors go to stderr; the server's own log is DIR/postgres.log.
//
// Imports from this module: internal/pgembed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate/internal/pgembed"
)

// errNoServer makes the process exit 2: nothing listens where we probed.
var errNoServer = errors.New("no server answers")

func main() {
	err := run()
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "pgembed-dev:", err)
	if errors.Is(err, errNoServer) {
		os.Exit(2)
	}
	os.Exit(1)
}

func run() error {
	dir := flag.String("dir", "", "data directory of the cluster (required)")
	stop := flag.Bool("stop", false, "stop the cluster instead of starting it")
	wait := flag.Duration("wait", 60*time.Second, "how long to wait while another process holds the directory")
	durable := flag.Bool("durable", false, "keep fsync on (by default a test cluster trades crash safety for speed)")
	verbose := flag.Bool("v", false, "log life-cycle events to stderr")
	probeMode := flag.Bool("probe", false, "probe the URLs given as arguments instead of running a cluster")
	flag.Parse()
	if *probeMode {
		return probe(flag.Args())
	}
	if *dir == "" || flag.NArg() > 0 {
		flag.Usage()
		return errors.New("--dir is required and no arguments are accepted")
	}

	level := slog.LevelError
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	opts := pgembed.Options{Dir: *dir, Logger: logger}
	if !*durable {
		// Safe to lose on an OS crash: tests recreate their databases.
		opts.Settings = map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
	}
	// Another make test may be starting or reusing the same cluster right
	// now; it holds the directory only for a moment.
	var c *pgembed.Cluster
	deadline := time.Now().Add(*wait)
	for {
		var err error
		c, err = pgembed.Start(ctx, opts)
		if err == nil {
			break
		}
		if !errors.Is(err, pgembed.ErrInUse) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}

	if *stop {
		stopCtx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		return c.Stop(stopCtx)
	}
	// No Stop: the server outlives us on purpose, and exiting releases the
	// directory lock.
	fmt.Println(c.DSN())
	return nil
}

// probe prints the first URL that connects as a role that may create
// databases (the test harness makes one per test).
func probe(urls []string) error {
	if len(urls) == 0 {
		return errors.New("--probe needs at least one URL")
	}
	var reasons []string
	answered := false
	for _, u := range urls {
		err := probeOne(u)
		if err == nil {
			fmt.Println(u)
			return nil
		}
		if !isUnreachable(err) {
			answered = true
		}
		reasons = append(reasons, fmt.Sprintf("%s: %v", u, err))
	}
	err := errors.New(strings.Join(reasons, "; "))
	if !answered {
		return fmt.Errorf("%w: %w", errNoServer, err)
	}
	return err
}

func probeOne(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return err
	}
	cfg.ConnectTimeout = 3 * time.Second
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var canCreate bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper OR rolcreatedb FROM pg_roles WHERE rolname = current_user").Scan(&canCreate); err != nil {
		return err
	}
	if !canCreate {
		return errors.New("role may not create databases")
	}
	return nil
}

// isUnreachable tells "nothing listens" (fall back to the embedded cluster)
// from "a server said no" (worth reporting).
func isUnreachable(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, context.DeadlineExceeded)
}
