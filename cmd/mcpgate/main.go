package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcpgate/mcpgate/internal/logctx"
)

const usageText = `mcpgate: a multi-tenant MCP gateway for E2B sandboxes

Usage:
  mcpgate serve [flags]             run the gateway (flags: mcpgate serve -h)
  mcpgate migrate [up|down|status]  apply, roll back one, or list migrations
  mcpgate vault status|rotate|rekey|prune
                                    manage the credential keyring (mcpgate vault help)
  mcpgate user list|set-admin|unset-admin|reset-password
                                    manage dashboard accounts (mcpgate user help)
  mcpgate version                   print the version

Configuration comes from flags or the environment: LISTEN_ADDR, PUBLIC_URL,
DATABASE_URL, DATA_DIR, ENCRYPTION_KEY, JWT_SECRET, E2B_API_URL,
E2B_DASHBOARD_API_URL, SIGNUP, LOG_FORMAT, LOG_LEVEL (secrets also as NAME_FILE).
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "mcpgate:", err)
		os.Exit(1)
	}
}

// run executes one subcommand. It is main without the process: tests call it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], getenv, stdout, nil)
	case "migrate":
		return migrate(ctx, args[1:], getenv, stdout)
	case "vault":
		return vaultCommand(ctx, args[1:], getenv, stdout)
	case "user":
		return userCommand(ctx, args[1:], getenv, os.Stdin, stdout)
	case "version":
		fmt.Fprintln(stdout, "mcpgate", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usageText)
		return nil
	}
	fmt.Fprint(stderr, usageText)
	return fmt.Errorf("unknown command %q", args[0])
}

// newLogger builds the process's one logger. Lines logged with a request's
// context carry its request_id (logctx), whichever layer writes them.
func newLogger(cfg *Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if cfg.LogFormat == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(logctx.New(h))
}
