// Command e2bsim serves a local E2B-compatible API (the control plane and
// the dashboard API's default templates, on one listener) for demos, tests
// and benchmarks. See package internal/e2bsim.
//
//	go run ./cmd/e2bsim --listen 127.0.0.1:3001 --team-key e2b_0123abcd
//
// With --state FILE its sandboxes, snapshots and counters survive a restart:
// the file is loaded at start (a file that does not load is an error, not a
// fresh start), rewritten atomically within a couple of seconds of each change,
// and at shutdown. --plan hobby gives sandboxes the Hobby plan's one-hour
// lifetime limit instead of Pro's 24 hours.
//
// With --control-listen ADDR it also serves a control API on that second
// address, which switches faults while the simulator runs (for tests and
// demos; see e2bsim.Server.ControlHandler):
//
//	go run ./cmd/e2bsim --listen 127.0.0.1:3001 --control-listen 127.0.0.1:3002
//	curl -X PUT 127.0.0.1:3002/_sim/faults -d '[{"path":"/v2/sandboxes","status":503,"times":5}]'
//	curl 127.0.0.1:3002/_sim/faults
//	curl -X DELETE 127.0.0.1:3002/_sim/faults
//
// The control API is off unless the flag is given, has no authentication
// (keep it on loopback), and is never served on the E2B listener: no path
// there reaches it, so no E2B route changes.
//
// Imports from this module: internal/e2bsim.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, os.Args[1:], os.Stderr, logger); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		logger.Error("e2bsim stopped", "err", err)
		os.Exit(1)
	}
}

// config is the parsed command line.
type config struct {
	listen string
	// control is the control API's own address, or "" for none.
	control string
	plan    string
	state   string // state file, or "" to keep everything in memory only
	opts    e2bsim.Options
}

// saveEvery is how often a changed state is written to the state file.
const saveEvery = 2 * time.Second

// keys collects repeated --team-key flags.
type keys []string

func (k *keys) String() string { return fmt.Sprint(len(*k), " keys") } // never print the keys
func (k *keys) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("empty key")
	}
	*k = append(*k, strings.TrimSpace(v))
	return nil
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	var teamKeys keys
	fs := flag.NewFlagSet("e2bsim", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:3001", "address to listen on")
	fs.StringVar(&c.control, "control-listen", "", "address of the control API that switches faults at run time (off unless set; "+
		"no authentication: keep it on loopback; never served on --listen)")
	fs.Var(&teamKeys, "team-key", "accepted API key, each its own team (repeatable; none: any e2b_<hex> key is its own team)")
	fs.IntVar(&c.opts.MaxRunning, "max-running", 20, "running sandboxes per team before create and resume answer 429")
	fs.DurationVar(&c.opts.Latency, "latency", 0, "latency added to every response")
	fs.Float64Var(&c.opts.FailRate, "fail-rate", 0, "share of requests answered 503 (0 to 1)")
	fs.Uint64Var(&c.opts.Seed, "seed", 1, "seed for ids, tokens and failures")
	fs.StringVar(&c.plan, "plan", "pro", "E2B plan whose sandbox lifetime limit applies: hobby (1 h) or pro (24 h)")
	fs.DurationVar(&c.opts.TransitionDelay, "transition", 500*time.Millisecond,
		"how long a sandbox stays pausing or killing before it is paused or gone")
	fs.StringVar(&c.state, "state", "", "file that keeps sandboxes across restarts (loaded at start, saved on change and at shutdown)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if _, port, _ := net.SplitHostPort(c.control); c.control != "" && c.control == c.listen && port != "0" {
		return c, errors.New("--control-listen must be another address than --listen: the control API is never served beside E2B's routes")
	}
	if c.opts.FailRate < 0 || c.opts.FailRate > 1 {
		return c, errors.New("--fail-rate must be between 0 and 1")
	}
	if c.opts.MaxRunning < 1 {
		return c, errors.New("--max-running must be at least 1")
	}
	if c.opts.Latency < 0 {
		return c, errors.New("--latency must not be negative")
	}
	if c.opts.TransitionDelay < 0 {
		return c, errors.New("--transition must not be negative")
	}
	switch c.plan {
	case "hobby":
		c.opts.MaxLifetime = e2bsim.HobbyMaxLifetime
	case "pro":
		c.opts.MaxLifetime = e2bsim.ProMaxLifetime
	default:
		return c, fmt.Errorf("--plan must be hobby or pro, not %q", c.plan)
	}
	c.opts.TeamKeys = teamKeys
	return c, nil
}

func run(ctx context.Context, args []string, stderr io.Writer, logger *slog.Logger) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	sim := e2bsim.New(c.opts)
	if c.state != "" {
		n, err := loadState(sim, c.state)
		if err != nil {
			return err
		}
		logger.Info("e2bsim state loaded", "file", c.state, "bytes", n)
	}
	// Bind before saying anything: a taken port is reported as the error it
	// is, never after a "listening" line.
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s (is another e2bsim or program using it? choose one with --listen): %w", c.listen, err)
	}
	servers := []*http.Server{{Handler: sim, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}}
	listeners := []net.Listener{ln}
	if c.control != "" {
		cln, err := net.Listen("tcp", c.control)
		if err != nil {
			ln.Close()
			return fmt.Errorf("cannot listen on %s for the control API (choose another --control-listen): %w", c.control, err)
		}
		servers = append(servers, &http.Server{Handler: sim.ControlHandler(), ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, cln)
	}
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { errc <- srv.Serve(listeners[i]) }()
	}
	logger.Info("e2bsim listening", "addr", ln.Addr().String(), "teams", len(c.opts.TeamKeys), "max_running", c.opts.MaxRunning,
		"plan", c.plan, "latency", c.opts.Latency, "fail_rate", c.opts.FailRate, "state", c.state)
	if len(listeners) > 1 {
		addr := listeners[1].Addr().(*net.TCPAddr)
		logger.Info("e2bsim control API listening", "addr", addr.String(), "path", e2bsim.ControlPath)
		if !addr.IP.IsLoopback() {
			logger.Warn("the control API has no authentication and listens beyond loopback: anyone who reaches it can switch faults",
				"addr", addr.String())
		}
	}

	var tick <-chan time.Time
	if c.state != "" {
		t := time.NewTicker(saveEvery)
		defer t.Stop()
		tick = t.C
	}
	failed := false // the last save failed: try again even without a new change
serve:
	for {
		select {
		case err := <-errc:
			return err
		case <-tick:
			if failed || sim.Changed() {
				serr := saveState(sim, c.state)
				if serr != nil {
					logger.Error("e2bsim state not saved", "file", c.state, "err", serr) // keep serving
				}
				failed = serr != nil
			}
		case <-ctx.Done():
			break serve
		}
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, srv := range servers {
		errs = append(errs, srv.Shutdown(shutdown))
	}
	err = errors.Join(errs...)
	if c.state != "" {
		// After Shutdown: no request can change the state any more.
		if serr := saveState(sim, c.state); serr != nil {
			return errors.Join(err, serr)
		}
		logger.Info("e2bsim state saved", "file", c.state)
	}
	return err
}

// loadState reads the state file; a missing file is a fresh start, a file
// that does not load is an error naming it.
func loadState(sim *e2bsim.Server, path string) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read state file: %w", err)
	}
	if err := sim.LoadState(bytes.NewReader(b)); err != nil {
		return 0, fmt.Errorf("state file %s cannot be loaded (move it away to start with no sandboxes): %w", path, err)
	}
	return len(b), nil
}

// saveState writes the state to a temporary file beside path and renames
// it over path, so a crash mid-write never leaves a half-written file. The
// file may hold network secrets sent to the simulator: mode 0600.
func saveState(sim *e2bsim.Server, path string) error {
	var buf bytes.Buffer
	if err := sim.SaveState(&buf); err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	defer os.Remove(f.Name()) // gone after the rename; cleans up after a failure
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("save state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("save state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}
