package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcpgate/mcpgate/internal/pgembed"
	"github.com/mcpgate/mcpgate/internal/reseal"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/vault"
)

const vaultUsage = `Usage: mcpgate vault COMMAND [flags]

Manage the credential keyring. The root key (ENCRYPTION_KEY) wraps data keys
stored in the database, each with a term; the newest term seals, every term
opens. These commands read the same configuration as serve (DATABASE_URL or
DATA_DIR, ENCRYPTION_KEY) and may run while the gateway keeps serving, except
with the embedded database (no DATABASE_URL), which runs inside mcpgate serve:
stop it first.

Commands:
  status    list the key terms, the active one, and how many credentials
            each still seals.

  rotate [--reseal-only] [--batch N] [--pause D] [--settle D]
            add a new key term, then re-seal every credential still under an
            older term with it, one row per short transaction.
            Stopping it at any point (Ctrl-C, kill, crash) loses nothing:
            every credential stays readable under its old or its new term.
            To finish after a stop, run
                mcpgate vault rotate --reseal-only
            which re-seals under the newest term without adding another.
            (Running plain rotate again also works; it adds one more term.)
            Running gateways re-seal by themselves too, in the background,
            once they load the new term (within a minute).
            --batch N     credentials per batch (default 100)
            --pause D     pause between batches, to spare a busy database
            --settle D    after the last batch, keep sweeping until the new
                          term is this old, so that credentials saved by
                          gateways that had not switched to it yet are
                          re-sealed too (default 90s; 0 to skip)

  rekey --new-key-file FILE   (or NEW_ENCRYPTION_KEY)
            re-wrap the data keys under a new root key, in one transaction.
            Afterwards the old ENCRYPTION_KEY opens nothing: replace it with
            the new one everywhere mcpgate runs and restart every replica.
            Credentials are not re-sealed (they are sealed by the data keys).

  prune     delete old key terms that no credential uses any more. The
            active term is never deleted, nor a term replaced less than
            10 minutes ago.

Generate a root key with: openssl rand -base64 32
`

// errHelpShown is returned by parseFlags when it printed the help: the
// command then exits successfully without doing anything.
var errHelpShown = errors.New("help shown")

// parsedCommand is one `mcpgate GROUP COMMAND [flags] [args]` line.
type parsedCommand struct {
	name       string
	cfgArgs    []string // serve's configuration flags, for loadConfig
	positional []string
}

// parseCommand parses the command line of a command group (user, vault):
// commands maps each command to the function defining its own flags (nil
// when it has none). A missing or unknown command prints usage and is
// refused; help (the group's or a command's -h) prints it and returns nil,
// nil: the command then exits successfully without doing anything.
func parseCommand(group, usage string, args []string, commands map[string]func(*flag.FlagSet), stdout io.Writer) (*parsedCommand, error) {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return nil, fmt.Errorf("%s: no command given", group)
	}
	name, args := args[0], args[1:]
	if name == "help" || name == "-h" || name == "--help" {
		fmt.Fprint(stdout, usage)
		return nil, nil
	}
	define, ok := commands[name]
	if !ok {
		fmt.Fprint(stdout, usage)
		return nil, fmt.Errorf("%s: unknown command %q", group, name)
	}
	cfgArgs, positional, err := parseFlags(group+" "+name, args, define, usage, stdout)
	if errors.Is(err, errHelpShown) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &parsedCommand{name: name, cfgArgs: cfgArgs, positional: positional}, nil
}

// parseFlags parses a subcommand's own flags, defined by define, together
// with serve's configuration flags (--database-url, --data-dir,
// --encryption-key, …), which it returns re-encoded for loadConfig. Flags
// and positional arguments may be interleaved.
func parseFlags(command string, args []string, define func(fs *flag.FlagSet), help string, stdout io.Writer) (cfgArgs, positional []string, err error) {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if define != nil {
		define(fs)
	}
	cfgFlags := map[string]bool{}
	for _, s := range (&Config{}).settings(false) {
		if fs.Lookup(s.flag) == nil {
			fs.String(s.flag, "", s.usage+" (env "+s.env+")")
			cfgFlags[s.flag] = true
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, help)
				return nil, nil, errHelpShown
			}
			return nil, nil, fmt.Errorf("%s: %w (see mcpgate %s -h)", command, err, command)
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	fs.Visit(func(f *flag.Flag) {
		if cfgFlags[f.Name] {
			cfgArgs = append(cfgArgs, "-"+f.Name+"="+f.Value.String())
		}
	})
	return cfgArgs, positional, nil
}

// vaultCommand runs `mcpgate vault ...`.
func vaultCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var (
		rot        = rotateOptions{batch: reseal.DefaultBatch, settle: reseal.DefaultSettle}
		newKeyFile string
	)
	c, err := parseCommand("vault", vaultUsage, args, map[string]func(*flag.FlagSet){
		"status": nil,
		"prune":  nil,
		"rotate": func(fs *flag.FlagSet) {
			fs.BoolVar(&rot.resealOnly, "reseal-only", false, "re-seal under the newest term without adding one")
			fs.IntVar(&rot.batch, "batch", rot.batch, "credentials per batch")
			fs.DurationVar(&rot.pause, "pause", 0, "pause between batches")
			fs.DurationVar(&rot.settle, "settle", rot.settle, "keep sweeping until the new term is this old")
		},
		"rekey": func(fs *flag.FlagSet) {
			fs.StringVar(&newKeyFile, "new-key-file", "", "file holding the new root key (base64)")
		},
	}, stdout)
	if c == nil || err != nil {
		return err
	}
	cmd := c.name
	if len(c.positional) > 0 {
		return fmt.Errorf("vault %s: unexpected arguments %v", cmd, c.positional)
	}
	if rot.batch < 1 {
		return errors.New("vault rotate: --batch must be at least 1")
	}

	// Read the new key before touching the database, so a mistake there
	// changes nothing.
	var newKey []byte
	if cmd == "rekey" {
		if newKey, err = readNewRootKey(newKeyFile, getenv); err != nil {
			return err
		}
		defer clear(newKey)
	}

	v, err := openVault(ctx, "vault "+cmd, c.cfgArgs, getenv, cmd == "status")
	if err != nil {
		return err
	}
	defer v.close()
	switch cmd {
	case "status":
		return vaultStatus(ctx, v, stdout)
	case "rotate":
		return vaultRotate(ctx, v, rot, stdout)
	case "rekey":
		return vaultRekey(ctx, v, newKey, stdout)
	default:
		return vaultPrune(ctx, v, stdout)
	}
}

// vaultEnv is an open database and keyring for a vault command.
type vaultEnv struct {
	db      *store.DB
	keyring *vault.Keyring // nil when the vault holds no keys yet (status only)
	// keyFile is the file under DATA_DIR the root key was read from, when it
	// came from there (embedded database, no ENCRYPTION_KEY given).
	keyFile string
	close   func()
}

// openVault reads the configuration like migrate does, connects, checks the
// schema and opens the keyring with ENCRYPTION_KEY. It never creates keys:
// a database whose vault holds none is refused (allowEmpty returns it
// without a keyring), and a wrong root key is refused before anything is
// written.
func openVault(ctx context.Context, command string, cfgArgs []string, getenv func(string) string, allowEmpty bool) (_ *vaultEnv, err error) {
	cfg, err := loadConfig(command, cfgArgs, getenv, false)
	if err != nil {
		return nil, err
	}
	rootKey, keyFile, err := vaultRootKey(cfg)
	if err != nil {
		return nil, err
	}
	defer clear(rootKey)
	db, closeDB, err := openCommandDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			closeDB()
		}
	}()
	check, keys, err := db.VaultKeys().Load(ctx)
	if err != nil {
		return nil, err
	}
	v := &vaultEnv{db: db, keyFile: keyFile, close: closeDB}
	if len(check) == 0 && len(keys) == 0 {
		if allowEmpty {
			return v, nil
		}
		return nil, errors.New("the vault holds no keys yet: mcpgate serve creates them on its first start; nothing was changed")
	}
	k, err := vault.Open(ctx, rootKey, db.VaultKeys(), vault.Options{})
	if err != nil {
		return nil, vaultOpenError(err)
	}
	v.keyring = k
	return v, nil
}

// vaultOpenError explains a failure to open the keyring.
func vaultOpenError(err error) error {
	if errors.Is(err, vault.ErrWrongRootKey) {
		return fmt.Errorf("ENCRYPTION_KEY does not match this database: it is not the key the vault was created or last "+
			"rekeyed with. Use the right key; nothing was changed: %w", err)
	}
	return fmt.Errorf("open vault: %w", err)
}

// openCommandDB connects to DATABASE_URL or starts the embedded database,
// and checks that the schema is current. The returned func closes both.
func openCommandDB(ctx context.Context, cfg *Config) (*store.DB, func(), error) {
	log := newLogger(cfg, io.Discard)
	db, closeDB, err := openStore(ctx, cfg, log)
	if errors.Is(err, pgembed.ErrInUse) {
		return nil, nil, fmt.Errorf("the embedded database under %s is in use, most likely by mcpgate serve: "+
			"stop it first, or run this against DATABASE_URL: %w", cfg.DB.DataDir, err)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := db.Ready(ctx); err != nil {
		closeDB()
		return nil, nil, err
	}
	return db, closeDB, nil
}

// vaultRootKey returns ENCRYPTION_KEY (flag, environment or _FILE) or, with
// the embedded database, the key serve generated under DATA_DIR, and that
// file's path. It never generates a key.
func vaultRootKey(cfg *Config) (key []byte, keyFile string, err error) {
	v := cfg.Vault.EncryptionKey.Reveal()
	if v == "" && cfg.Embedded() {
		keyFile = filepath.Join(cfg.DB.DataDir, "encryption_key")
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, "", &ConfigError{Problems: []string{fmt.Sprintf(
				"ENCRYPTION_KEY is not set and %s cannot be read (%v): set ENCRYPTION_KEY to the key the gateway runs with",
				keyFile, errors.Unwrap(err))}}
		}
		v = strings.TrimSpace(string(b))
		if err := checkRootKey(keyFile, v); err != nil {
			return nil, "", &ConfigError{Problems: []string{err.Error()}}
		}
	}
	if v == "" {
		return nil, "", &ConfigError{Problems: []string{"ENCRYPTION_KEY is required: the key the gateway runs with"}}
	}
	key, err = vault.ParseRootKey(v)
	if err != nil {
		return nil, "", &ConfigError{Problems: []string{"ENCRYPTION_KEY must be 32 random bytes, base64-encoded"}}
	}
	return key, keyFile, nil
}

// readNewRootKey reads rekey's new root key from --new-key-file or
// NEW_ENCRYPTION_KEY. Error messages never repeat the key.
func readNewRootKey(path string, getenv func(string) string) ([]byte, error) {
	v := getenv("NEW_ENCRYPTION_KEY")
	switch {
	case path != "" && v != "":
		return nil, errors.New("vault rekey: both --new-key-file and NEW_ENCRYPTION_KEY are set; give one")
	case path != "":
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("vault rekey: read --new-key-file: %w", err)
		}
		v = string(b)
	case v == "":
		return nil, errors.New("vault rekey: give the new root key with --new-key-file FILE or NEW_ENCRYPTION_KEY " +
			"(generate one: openssl rand -base64 32)")
	}
	v = strings.TrimSpace(v)
	if err := checkRootKey("the new root key", v); err != nil {
		return nil, fmt.Errorf("vault rekey: %w", err)
	}
	return vault.ParseRootKey(v)
}

// usageByTerm counts credentials per key term.
func usageByTerm(ctx context.Context, db *store.DB) (map[uint32]int64, error) {
	usage, err := db.SealedTermUsage(ctx)
	if err != nil {
		return nil, err
	}
	m := make(map[uint32]int64, len(usage))
	for _, u := range usage {
		m[u.Term] = u.Rows
	}
	return m, nil
}

func vaultStatus(ctx context.Context, v *vaultEnv, out io.Writer) error {
	usage, err := usageByTerm(ctx, v.db)
	if err != nil {
		return err
	}
	if v.keyring == nil {
		fmt.Fprintln(out, "The vault holds no keys yet: mcpgate serve creates the first term on its first start.")
		return nil
	}
	terms := v.keyring.Terms()
	active := v.keyring.ActiveTerm()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TERM\tCREATED\tSTATE\tCREDENTIALS")
	var old int64
	var unused []uint32
	known := map[uint32]bool{}
	for _, t := range terms {
		known[t.Term] = true
		state := ""
		if t.Active {
			state = "active"
		} else {
			old += usage[t.Term]
			if usage[t.Term] == 0 {
				unused = append(unused, t.Term)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\n", t.Term, t.CreatedAt.UTC().Format("2006-01-02 15:04:05Z"), state, usage[t.Term])
	}
	var missing int64
	for term, n := range usage {
		if !known[term] {
			fmt.Fprintf(tw, "%d\t-\tMISSING KEY\t%d\n", term, n)
			missing += n
		}
	}
	tw.Flush()
	fmt.Fprintf(out, "\nActive term: %d.\n", active)
	if old > 0 {
		fmt.Fprintf(out, "%d credential(s) are sealed under older terms; `mcpgate vault rotate --reseal-only` moves them to term %d.\n", old, active)
	}
	if len(unused) > 0 {
		fmt.Fprintf(out, "Older terms %v seal no credentials; `mcpgate vault prune` deletes them once the term after each is %s old.\n", unused, vault.DefaultDeleteGrace)
	}
	if missing > 0 {
		fmt.Fprintf(out, "%d credential(s) are sealed under a term whose key is gone and cannot be opened.\n", missing)
	}
	return nil
}

// rotateOptions are rotate's flags.
type rotateOptions struct {
	resealOnly bool
	batch      int
	pause      time.Duration
	settle     time.Duration
}

// vaultRotate adds a term (unless resealOnly) and re-seals every credential
// under an older term, with the job the gateways run in the background
// (reseal.Run). It is safe to stop at any point: each row moves in its own
// transaction, and a row not yet moved still opens under its term.
func vaultRotate(ctx context.Context, v *vaultEnv, o rotateOptions, out io.Writer) error {
	k, db := v.keyring, v.db
	if o.resealOnly {
		fmt.Fprintf(out, "re-sealing under the active key term %d (no new term)\n", k.ActiveTerm())
	} else {
		term, err := k.Rotate(ctx)
		if err != nil {
			return fmt.Errorf("vault rotate: %w", err)
		}
		fmt.Fprintf(out, "added key term %d: it seals from now on (running gateways switch to it within %s)\n",
			term, vault.DefaultRefreshInterval)
	}
	left, err := db.CountSealedBelow(ctx, k.ActiveTerm())
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d credential(s) to re-seal\n", left)

	moved, announced := 0, false
	rep, err := reseal.Run(ctx, db, k, reseal.Options{Batch: o.batch, Pause: o.pause, Settle: o.settle,
		Progress: func(r reseal.Report) {
			if r.Moved > moved {
				moved = r.Moved
				fmt.Fprintf(out, "re-sealed %d credential(s), %d left\n", r.Moved, r.Left)
			}
			if r.Settling > 0 && !announced {
				fmt.Fprintf(out, "sweeping for %s more, for credentials saved by gateways not yet on term %d "+
					"(stopping now is safe; --settle 0 skips this)\n", r.Settling.Round(time.Second), r.Term)
				announced = true
			}
		}})
	if err != nil {
		return fmt.Errorf("vault rotate stopped after re-sealing %d credential(s); nothing was lost (each credential is under "+
			"its old term or the new one). Run `mcpgate vault rotate --reseal-only` to finish: %w", rep.Moved, err)
	}
	if len(rep.Failed) > 0 {
		return fmt.Errorf("vault rotate re-sealed every credential but %d that do not open with any installed key "+
			"(damaged, or sealed under a deleted term): connection id(s) %s. Ask their workspaces to store the key again, "+
			"or delete those rows", len(rep.Failed), strings.Join(rep.Failed, ", "))
	}
	fmt.Fprintf(out, "done: every credential is sealed under key term %d\n", rep.Term)
	return nil
}

// vaultRekey re-wraps the data keys under newKey. With the embedded database
// and the key kept under DATA_DIR, it also replaces that file: the new key is
// written beside it first, and moved over it once the rekey committed.
func vaultRekey(ctx context.Context, v *vaultEnv, newKey []byte, out io.Writer) error {
	staged := ""
	if v.keyFile != "" {
		staged = v.keyFile + ".new"
		if err := writeKeyFile(staged, newKey); err != nil {
			return fmt.Errorf("vault rekey: nothing was changed: %w", err)
		}
	}
	if err := v.keyring.Rekey(ctx, newKey); err != nil {
		if staged != "" {
			os.Remove(staged)
		}
		return fmt.Errorf("vault rekey: nothing was changed: %w", err)
	}
	n := len(v.keyring.Terms())
	fmt.Fprintf(out, "rekeyed: the %d data key(s) are now wrapped by the new root key; the old ENCRYPTION_KEY opens nothing any more.\n", n)
	if staged != "" {
		if err := os.Rename(staged, v.keyFile); err != nil {
			return fmt.Errorf("vault rekey: done, but could not move %s over %s: move it yourself before starting mcpgate: %w",
				staged, v.keyFile, err)
		}
		fmt.Fprintf(out, "The new key replaced %s; keep a backup of it.\nRestart mcpgate serve.\n", v.keyFile)
		return nil
	}
	fmt.Fprint(out, `Next:
  1. Replace ENCRYPTION_KEY with the new key everywhere mcpgate runs (secret store, environment, files), and keep a backup of it.
  2. Restart every replica. Until then running replicas keep serving with the keys they hold, but cannot load new
     key terms, and a replica started with the old key is refused.
`)
	return nil
}

// writeKeyFile writes a root key, base64, readable by its owner only.
func writeKeyFile(path string, key []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, base64.StdEncoding.EncodeToString(key)); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// vaultPrune deletes the old terms that Keyring.CanDelete allows.
func vaultPrune(ctx context.Context, v *vaultEnv, out io.Writer) error {
	usage, err := usageByTerm(ctx, v.db)
	if err != nil {
		return err
	}
	deleted := 0
	for _, t := range v.keyring.Terms() {
		if t.Active {
			continue
		}
		err := v.keyring.CanDelete(t.Term, usage[t.Term])
		if err == nil {
			err = v.db.DeleteVaultTerm(ctx, t.Term)
		}
		switch {
		case err == nil:
			fmt.Fprintf(out, "deleted key term %d\n", t.Term)
			deleted++
		case errors.Is(err, vault.ErrTermInUse) && usage[t.Term] > 0:
			fmt.Fprintf(out, "kept key term %d: %d credential(s) still use it (mcpgate vault rotate --reseal-only moves them)\n", t.Term, usage[t.Term])
		case errors.Is(err, vault.ErrTermInUse):
			fmt.Fprintf(out, "kept key term %d: the term after it is younger than %s, and a gateway may still seal with it\n", t.Term, vault.DefaultDeleteGrace)
		default:
			return fmt.Errorf("vault prune: term %d: %w", t.Term, err)
		}
	}
	fmt.Fprintf(out, "%d term(s) deleted; active term %d\n", deleted, v.keyring.ActiveTerm())
	return nil
}
