// Command e2bsim serves a local E2B-compatible API (the control plane and
// the dashboard API's default templates, on one listener) for demos, tests
// and benchmarks. See package internal/e2bsim.
//
//	go run ./cmd/e2bsim --listen 127.0.0.1:3001 --team-key e2b_0123abcd
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
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
	opts   e2bsim.Options
}

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
	fs.Var(&teamKeys, "team-key", "accepted API key, each its own team (repeatable; none: any e2b_<hex> key is its own team)")
	fs.IntVar(&c.opts.MaxRunning, "max-running", 20, "running sandboxes per team before create and resume answer 429")
	fs.DurationVar(&c.opts.Latency, "latency", 0, "latency added to every response")
	fs.Float64Var(&c.opts.FailRate, "fail-rate", 0, "share of requests answered 503 (0 to 1)")
	fs.Uint64Var(&c.opts.Seed, "seed", 1, "seed for ids, tokens and failures")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
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
	c.opts.TeamKeys = teamKeys
	return c, nil
}

func run(ctx context.Context, args []string, stderr io.Writer, logger *slog.Logger) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: c.listen, Handler: e2bsim.New(c.opts), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	logger.Info("e2bsim listening", "addr", c.listen, "teams", len(c.opts.TeamKeys), "max_running", c.opts.MaxRunning,
		"latency", c.opts.Latency, "fail_rate", c.opts.FailRate)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
