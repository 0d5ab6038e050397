package main

import (
	"context"
	"fmt"
	"io"

	"github.com/mcpgate/mcpgate/internal/store"
)

// migrate runs `mcpgate migrate [up|down|status]` against DATABASE_URL, or
// the embedded database under DATA_DIR.
func migrate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	action := "up"
	if len(args) > 0 {
		action, args = args[0], args[1:]
	}
	if action != "up" && action != "down" && action != "status" {
		return fmt.Errorf("migrate: unknown action %q; use up, down or status", action)
	}
	// migrate touches no sealed data, so it does not need the secrets.
	cfg, err := loadConfig("migrate", args, getenv, false)
	if err != nil {
		return err
	}
	log := newLogger(cfg, io.Discard)
	db, closeDB, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeDB()
	switch action {
	case "up":
		n, err := db.Migrate(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "applied %d migration(s); schema at version %d\n", n, store.LatestMigration())
	case "down":
		if err := db.MigrateDown(ctx); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "rolled back one migration")
	case "status":
		st, err := db.MigrationsStatus(ctx)
		if err != nil {
			return err
		}
		for _, s := range st {
			state := "pending"
			if s.Applied {
				state = "applied " + s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
			}
			fmt.Fprintf(stdout, "%05d  %-40s  %s\n", s.Version, s.Source, state)
		}
	}
	return nil
}
