package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/password"
)

const userUsage = `Usage: mcpgate user COMMAND [flags]

Manage dashboard accounts from the server, for when nobody can log in as an
instance admin. Reads the same database configuration as serve (DATABASE_URL
or DATA_DIR); with the embedded database (no DATABASE_URL), stop mcpgate serve
first. Every change is in the account's audit log, with the source operator.

Commands:
  list                     list every account, oldest first
  set-admin EMAIL          make an account an instance admin
  unset-admin EMAIL        withdraw instance admin
  reset-password [--stdin] [--revoke-keys] EMAIL
                           set a new password and end every session of the
                           account. With --stdin the password is the first
                           line of standard input; otherwise one is generated
                           and printed once. With --revoke-keys every MCP key
                           and OAuth grant of the account is revoked too (on
                           every replica within about 100 ms); without it
                           they keep working. Two-factor sign-in stays on.
  disable-totp EMAIL       turn two-factor sign-in off for an account whose
                           person lost both their authenticator and their
                           recovery codes (check who is asking first); they
                           sign in with the password alone and enrol again
                           in Account settings.
`

// userPasswordParams are the argon2id costs of reset-password; tests lower
// them.
var userPasswordParams = password.Default

// userCommand runs `mcpgate user ...`; stdin is read by reset-password
// --stdin only.
func userCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout io.Writer) error {
	var fromStdin, revokeKeys bool
	c, err := parseCommand("user", userUsage, args, map[string]func(*flag.FlagSet){
		"list":         nil,
		"set-admin":    nil,
		"unset-admin":  nil,
		"disable-totp": nil,
		"reset-password": func(fs *flag.FlagSet) {
			fs.BoolVar(&fromStdin, "stdin", false, "read the new password from the first line of standard input")
			fs.BoolVar(&revokeKeys, "revoke-keys", false, "also revoke every MCP key and OAuth grant of the account")
		},
	}, stdout)
	if c == nil || err != nil {
		return err
	}
	cmd, positional := c.name, c.positional
	wantArgs := 1
	if cmd == "list" {
		wantArgs = 0
	}
	if len(positional) != wantArgs {
		if wantArgs == 0 {
			return fmt.Errorf("user %s: unexpected arguments %v", cmd, positional)
		}
		return fmt.Errorf("user %s: give one email address", cmd)
	}
	var email string
	if wantArgs == 1 {
		if email, err = mcpgate.NormalizeEmail(positional[0]); err != nil {
			return fmt.Errorf("user %s: %q is not a valid email address", cmd, positional[0])
		}
	}
	// Read and check the password before touching the database.
	var newPassword string
	generated := false
	if cmd == "reset-password" {
		if fromStdin {
			if newPassword, err = readPassword(stdin); err != nil {
				return err
			}
		} else {
			newPassword, generated = generatePassword(), true
		}
		if err := mcpgate.ValidatePassword(newPassword); err != nil {
			return fmt.Errorf("user reset-password: %s", mcpgate.ErrorMessage(err))
		}
	}

	cfg, err := loadConfig("user "+cmd, c.cfgArgs, getenv, false)
	if err != nil {
		return err
	}
	db, closeDB, err := openCommandDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeDB()
	op := app.NewOperator(db, newLogger(cfg, io.Discard), &userPasswordParams)
	err = runUser(ctx, op, cmd, email, userReset{password: newPassword, generated: generated, revokeKeys: revokeKeys}, stdout)
	// Written before the command exits, or it says they were not.
	closeCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if cerr := op.Close(closeCtx); cerr != nil && err == nil {
		return fmt.Errorf("user %s: done, but its audit event was not written: %w", cmd, cerr)
	}
	return err
}

// userReset is what reset-password was given.
type userReset struct {
	password              string
	generated, revokeKeys bool
}

// runUser runs one command on the operator's admin service and says what it
// did.
func runUser(ctx context.Context, op *app.Operator, cmd, email string, reset userReset, stdout io.Writer) error {
	switch cmd {
	case "list":
		users, err := op.Users(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "EMAIL\tINSTANCE ADMIN\tCREATED")
		for _, u := range users {
			admin := "no"
			if u.InstanceAdmin {
				admin = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Email, admin, u.CreatedAt.UTC().Format("2006-01-02 15:04:05Z"))
		}
		tw.Flush()
		fmt.Fprintf(stdout, "%d account(s)\n", len(users))
	case "set-admin", "unset-admin":
		admin := cmd == "set-admin"
		if err := op.SetInstanceAdmin(ctx, email, admin); err != nil {
			return userError(cmd, err)
		}
		if admin {
			fmt.Fprintf(stdout, "%s is now an instance admin\n", email)
		} else {
			fmt.Fprintf(stdout, "%s is no longer an instance admin\n", email)
		}
	case "reset-password":
		return resetPassword(ctx, op, email, reset, stdout)
	case "disable-totp":
		if err := op.DisableTOTP(ctx, email); err != nil {
			return userError(cmd, err)
		}
		fmt.Fprintf(stdout, "two-factor sign-in of %s turned off, its recovery codes deleted; the password alone signs in now\n", email)
	}
	return nil
}

func resetPassword(ctx context.Context, op *app.Operator, email string, reset userReset, stdout io.Writer) error {
	if err := op.ResetPassword(ctx, email, reset.password); err != nil {
		return userError("reset-password", err)
	}
	fmt.Fprintf(stdout, "password of %s changed; every session of the account was ended\n", email)
	if reset.revokeKeys {
		revoked, err := op.RevokeCredentials(ctx, email)
		if err != nil {
			return userError("reset-password", err)
		}
		fmt.Fprintf(stdout, "%d MCP key(s) of the account revoked, in every workspace; connector URLs with them stop working too\n", revoked.Keys)
		fmt.Fprintf(stdout, "%d OAuth grant(s) of the account revoked; those apps must sign in again\n", revoked.Grants)
	} else {
		fmt.Fprintf(stdout, "the account's MCP keys (and connector URLs) still work; revoke them in the dashboard, "+
			"or run again with --revoke-keys\n")
	}
	if reset.generated {
		fmt.Fprintf(stdout, "new password (shown only this once):\n%s\n", reset.password)
	}
	return nil
}

// userError says which command failed; the admin service's errors say why.
func userError(cmd string, err error) error { return fmt.Errorf("user %s: %w", cmd, err) }

// readPassword reads the first line of r, without its line ending.
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("user reset-password: read standard input: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("user reset-password: standard input holds no password")
	}
	return line, nil
}

// generatePassword returns 24 characters from 144 random bits.
func generatePassword() string {
	b := make([]byte, 18)
	rand.Read(b) // never fails since Go 1.24
	return base64.RawURLEncoding.EncodeToString(b)
}
