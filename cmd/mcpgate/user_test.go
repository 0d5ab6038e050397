package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/password"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/vault"
)

// userEnv is a test database with two accounts.
type userEnv struct {
	db    *store.DB
	env   map[string]string
	admin *mcpgate.User
	other *mcpgate.User
}

func newUserEnv(t *testing.T) *userEnv {
	t.Helper()
	dsn := storetest.NewDatabase(t)
	db := mustOpenStore(t, dsn)
	e := &userEnv{db: db, env: map[string]string{"DATABASE_URL": dsn}}
	ctx := context.Background()
	var err error
	if e.admin, err = db.CreateUser(ctx, "admin@example.com", "h", nil); err != nil {
		t.Fatal(err)
	}
	if e.other, err = db.CreateUser(ctx, "bob@example.com", "h", nil); err != nil {
		t.Fatal(err)
	}
	return e
}

// fastPasswords lowers the argon2id costs of reset-password until the test
// ends.
func (e *userEnv) fastPasswords(t *testing.T) {
	saved := userPasswordParams
	userPasswordParams = password.Params{Time: 1, Memory: 1024, Threads: 1}
	t.Cleanup(func() { userPasswordParams = saved })
}

// user runs `mcpgate user args...` with stdin.
func (e *userEnv) user(stdin string, args ...string) (string, error) {
	var out bytes.Buffer
	err := userCommand(context.Background(), args, func(k string) string { return e.env[k] }, strings.NewReader(stdin), &out)
	return out.String(), err
}

func (e *userEnv) isAdmin(t *testing.T, email string) bool {
	t.Helper()
	u, _, err := e.db.FindUserByEmail(context.Background(), email)
	if err != nil {
		t.Fatalf("FindUserByEmail() err = %v", err)
	}
	return u.InstanceAdmin
}

func TestUserList(t *testing.T) {
	e := newUserEnv(t)
	out, err := e.user("", "list")
	if err != nil {
		t.Fatalf("user list err = %v", err)
	}
	for _, re := range []string{`(?m)^admin@example\.com +yes +\d{4}-`, `(?m)^bob@example\.com +no +\d{4}-`, `2 account\(s\)`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("user list output does not match %q:\n%s", re, out)
		}
	}
	if strings.Index(out, "admin@") > strings.Index(out, "bob@") {
		t.Fatalf("user list is not oldest first:\n%s", out)
	}
	// Through run, as the program does.
	var buf bytes.Buffer
	if err := run(context.Background(), []string{"user", "list"}, func(k string) string { return e.env[k] }, &buf, &buf); err != nil ||
		!strings.Contains(buf.String(), "bob@example.com") {
		t.Fatalf("run(user list) err = %v\n%s", err, buf.String())
	}
}

func TestUserSetAdmin(t *testing.T) {
	e := newUserEnv(t)
	tests := []struct {
		name      string
		args      []string
		wantErr   string
		wantAdmin bool // bob's state afterwards
	}{
		{name: "set", args: []string{"set-admin", "bob@example.com"}, wantAdmin: true},
		{name: "set again", args: []string{"set-admin", "bob@example.com"}, wantAdmin: true},
		{name: "unset, email normalised", args: []string{"unset-admin", "  Bob@Example.COM "}, wantAdmin: false},
		{name: "set, flags after the email", args: []string{"set-admin", "bob@example.com", "--log-level", "warn"}, wantAdmin: true},
		{name: "unknown account", args: []string{"unset-admin", "nobody@example.com"}, wantErr: "no account with the email nobody@example.com", wantAdmin: true},
		{name: "not an email", args: []string{"unset-admin", "bob"}, wantErr: "not a valid email address", wantAdmin: true},
		{name: "no email", args: []string{"unset-admin"}, wantErr: "give one email address", wantAdmin: true},
		{name: "two emails", args: []string{"unset-admin", "bob@example.com", "admin@example.com"}, wantErr: "give one email address", wantAdmin: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.user("", tt.args...)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("user %v err = %v, want %q\n%s", tt.args, err, tt.wantErr, out)
			}
			if got := e.isAdmin(t, "bob@example.com"); got != tt.wantAdmin {
				t.Fatalf("bob instance admin = %v, want %v", got, tt.wantAdmin)
			}
			if !e.isAdmin(t, "admin@example.com") {
				t.Fatal("admin lost instance admin")
			}
		})
	}
}

func TestUserResetPassword(t *testing.T) {
	e := newUserEnv(t)
	e.fastPasswords(t)
	ctx := context.Background()
	session := func() string {
		id, err := e.db.CreateSession(ctx, e.other.ID, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatalf("CreateSession() err = %v", err)
		}
		return id
	}
	checkPassword := func(want string) {
		t.Helper()
		_, hash, err := e.db.FindUserByEmail(ctx, "bob@example.com")
		if err != nil {
			t.Fatal(err)
		}
		if err := password.Verify(want, hash); err != nil {
			t.Fatalf("password.Verify(new password) err = %v", err)
		}
	}
	checkRevoked := func(id string) {
		t.Helper()
		if _, err := e.db.FindSessionUser(ctx, id); mcpgate.ErrorCode(err) != mcpgate.EUnauthorized {
			t.Fatalf("FindSessionUser() after reset err = %v, want unauthorized", err)
		}
	}

	// From standard input.
	s1 := session()
	out, err := e.user("correct horse battery\r\nignored\n", "reset-password", "--stdin", "bob@example.com")
	if err != nil {
		t.Fatalf("reset-password --stdin err = %v\n%s", err, out)
	}
	if strings.Contains(out, "correct horse") || !strings.Contains(out, "every session of the account was ended") {
		t.Fatalf("reset-password --stdin output:\n%s", out)
	}
	checkPassword("correct horse battery")
	checkRevoked(s1)
	if _, err := e.db.FindSessionUser(ctx, session()); err != nil {
		t.Fatalf("a session started after the reset err = %v", err)
	}

	// Generated, printed once.
	s2 := session()
	out, err = e.user("", "reset-password", "bob@example.com")
	if err != nil {
		t.Fatalf("reset-password err = %v\n%s", err, out)
	}
	m := regexp.MustCompile(`new password \(shown only this once\):\n([A-Za-z0-9_-]{24})\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("reset-password output shows no generated password:\n%s", out)
	}
	checkPassword(m[1])
	checkRevoked(s2)

	// Refused, and nothing changes.
	_, before, _ := e.db.FindUserByEmail(ctx, "bob@example.com")
	for _, tt := range []struct {
		name, stdin string
		args        []string
		wantErr     string
	}{
		{name: "too short", stdin: "short\n", args: []string{"--stdin", "bob@example.com"}, wantErr: "at least 10 characters"},
		{name: "empty stdin", stdin: "", args: []string{"--stdin", "bob@example.com"}, wantErr: "holds no password"},
		{name: "unknown account", args: []string{"nobody@example.com"}, wantErr: "no account with the email"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.user(tt.stdin, append([]string{"reset-password"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("reset-password err = %v, want %q\n%s", err, tt.wantErr, out)
			}
			if strings.Contains(out, "new password") {
				t.Fatalf("a refused reset printed a password:\n%s", out)
			}
		})
	}
	if _, after, _ := e.db.FindUserByEmail(ctx, "bob@example.com"); after != before {
		t.Fatal("a refused reset changed the password")
	}
}

// TestUserResetPassword_RevokeKeys: reset-password says
// the account's MCP keys still work, and with --revoke-keys revokes them
// all (and no one else's).
func TestUserResetPassword_RevokeKeys(t *testing.T) {
	e := newUserEnv(t)
	e.fastPasswords(t)
	ctx := context.Background()
	addKey := func(u *mcpgate.User) string {
		t.Helper()
		wss, err := e.db.WorkspacesOfUser(ctx, u.ID)
		if err != nil || len(wss) == 0 {
			t.Fatalf("WorkspacesOfUser() = %v, %v", wss, err)
		}
		_, id, hash := mcpgate.NewMCPKey()
		if err := e.db.CreateKey(ctx, &mcpgate.APIKey{ID: id, WorkspaceID: wss[0].ID, UserID: u.ID, Name: "k", Scope: mcpgate.ScopeFull}, hash); err != nil {
			t.Fatalf("CreateKey() err = %v", err)
		}
		return id
	}
	revoked := func(id string) bool {
		t.Helper()
		k, _, err := e.db.FindKeyForAuth(ctx, id)
		if err != nil {
			t.Fatalf("FindKeyForAuth() err = %v", err)
		}
		return k.RevokedAt != nil
	}
	bob1, bob2, admin := addKey(e.other), addKey(e.other), addKey(e.admin)

	out, err := e.user("correct horse battery\n", "reset-password", "--stdin", "bob@example.com")
	if err != nil {
		t.Fatalf("reset-password err = %v\n%s", err, out)
	}
	if !strings.Contains(out, "MCP keys (and connector URLs) still work") || revoked(bob1) {
		t.Fatalf("reset-password without --revoke-keys: output\n%s\nkey revoked = %v; want the key kept and the output saying so", out, revoked(bob1))
	}
	out, err = e.user("correct horse battery 2\n", "reset-password", "--stdin", "--revoke-keys", "bob@example.com")
	if err != nil {
		t.Fatalf("reset-password --revoke-keys err = %v\n%s", err, out)
	}
	if !strings.Contains(out, "2 MCP key(s) of the account revoked") || !strings.Contains(out, "0 OAuth grant(s) of the account revoked") {
		t.Errorf("reset-password --revoke-keys output:\n%s", out)
	}
	if !revoked(bob1) || !revoked(bob2) || revoked(admin) {
		t.Errorf("revoked: bob's = %v, %v, admin's = %v; want bob's only", revoked(bob1), revoked(bob2), revoked(admin))
	}
}

// enableTOTP turns two-factor sign-in on for u.
func (e *userEnv) enableTOTP(t *testing.T, u *mcpgate.User) {
	t.Helper()
	ctx := context.Background()
	k, err := vault.Open(ctx, []byte("user-test-root-key-0123456789abc"), e.db.VaultKeys(), vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.BeginTOTP(ctx, k, u.ID, "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"); err != nil {
		t.Fatal(err)
	}
	if err := e.db.ConfirmTOTP(ctx, u.ID, 1, [][]byte{mcpgate.HashToken("x")}); err != nil {
		t.Fatal(err)
	}
}

func TestUserDisableTOTP(t *testing.T) {
	e := newUserEnv(t)
	ctx := context.Background()
	e.enableTOTP(t, e.other)
	out, err := e.user("", "disable-totp", "bob@example.com")
	if err != nil || !strings.Contains(out, "two-factor sign-in of bob@example.com turned off") {
		t.Fatalf("user disable-totp = %q, %v", out, err)
	}
	if on, _ := e.db.TOTPEnabled(ctx, e.other.ID); on {
		t.Fatal("TOTP still on after disable-totp")
	}
	if _, err := e.user("", "disable-totp", "bob@example.com"); err == nil || !strings.Contains(err.Error(), "has no two-factor sign-in") {
		t.Fatalf("user disable-totp again err = %v", err)
	}
	if _, err := e.user("", "disable-totp", "nobody@example.com"); err == nil || !strings.Contains(err.Error(), "no account with the email") {
		t.Fatalf("user disable-totp (unknown) err = %v", err)
	}
}

// operatorEvents returns the operator's audit rows in the personal workspace
// of u, oldest first, as the store reads them back.
func (e *userEnv) operatorEvents(t *testing.T, u *mcpgate.User) []mcpgate.AuditEvent {
	t.Helper()
	ctx := context.Background()
	wss, err := e.db.WorkspacesOfUser(ctx, u.ID)
	if err != nil || len(wss) == 0 {
		t.Fatalf("WorkspacesOfUser() = %v, %v", wss, err)
	}
	evs, _, err := e.db.ListAudit(ctx, wss[0].ID, mcpgate.AuditFilter{Source: mcpgate.SourceOperator, Limit: 100})
	if err != nil {
		t.Fatalf("ListAudit() err = %v", err)
	}
	slices.Reverse(evs)
	for _, ev := range evs {
		if ev.ActorID != u.ID || ev.Kind != mcpgate.KindAdmin || ev.Outcome != mcpgate.OutcomeOK {
			t.Errorf("operator event %+v: want an ok admin event naming %s", ev, u.Email)
		}
	}
	return evs
}

// TestUser_AuditsEveryChange (issue 32): every change `mcpgate user` makes
// is in the audit log of the account's personal workspace when the command
// returns, with the source "operator", the side effects of the person's own
// way to it, and no password in it. Before, the command wrote no audit event.
func TestUser_AuditsEveryChange(t *testing.T) {
	e := newUserEnv(t)
	e.fastPasswords(t)
	ctx := context.Background()
	const newPassword = "operator chose this one"
	if err := e.db.RecordLoginFailure(ctx, 15*time.Minute, "email:bob@example.com"); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		stdin  string
		args   []string
		action mcpgate.AdminAction
		args0  map[string]any
	}{
		{args: []string{"set-admin", "bob@example.com"}, action: mcpgate.ActionInstanceAdminChanged, args0: map[string]any{"instance_admin": true}},
		{args: []string{"unset-admin", "bob@example.com"}, action: mcpgate.ActionInstanceAdminChanged, args0: map[string]any{"instance_admin": false}},
		{stdin: newPassword + "\n", args: []string{"reset-password", "--stdin", "bob@example.com"}, action: mcpgate.ActionPasswordReset},
		{stdin: newPassword + "\n", args: []string{"reset-password", "--stdin", "--revoke-keys", "bob@example.com"},
			action: mcpgate.ActionKeysRevokedAll, args0: map[string]any{"count": float64(0), "grants": float64(0)}},
		{args: []string{"disable-totp", "bob@example.com"}, action: mcpgate.ActionTOTPDisabled},
	}
	e.enableTOTP(t, e.other)
	var outputs strings.Builder
	for i, st := range steps {
		out, err := e.user(st.stdin, st.args...)
		if err != nil {
			t.Fatalf("user %v err = %v\n%s", st.args, err, out)
		}
		outputs.WriteString(out)
		evs := e.operatorEvents(t, e.other)
		if len(evs) == 0 {
			t.Fatalf("after user %v: no operator event in the audit log", st.args)
		}
		last := evs[len(evs)-1]
		if last.Action != string(st.action) || st.args0 != nil && !maps.Equal(last.Arguments, st.args0) {
			t.Errorf("after user %v the last operator event is %s %v, want %s %v", st.args, last.Action, last.Arguments, st.action, st.args0)
		}
		if i == 0 && len(evs) != 1 {
			t.Errorf("after one command: %d operator events, want 1", len(evs))
		}
	}
	evs := e.operatorEvents(t, e.other)
	if len(evs) != 6 { // the reset with --revoke-keys writes two
		t.Errorf("operator events = %d, want 6", len(evs))
	}
	raw, _ := json.Marshal(evs)
	if strings.Contains(string(raw), newPassword) || strings.Contains(outputs.String(), newPassword) {
		t.Errorf("the password is in the audit log or the output:\n%s\n%s", raw, outputs.String())
	}
	if n := len(e.operatorEvents(t, e.admin)); n != 0 {
		t.Errorf("the other account has %d operator events, want 0", n)
	}
	// As the reset link does, the reset forgets the failed logins.
	if n, _, err := e.db.LoginFailures(ctx, "email:bob@example.com", 15*time.Minute); err != nil || n != 0 {
		t.Errorf("failed logins after the reset = %d, %v; want 0", n, err)
	}
}

// TestUser_FailsWhenItsAuditEventIsRefused: a change whose audit event the
// database does not take is not reported as done quietly; the command fails
// and says so (after the writer's retries, about ten seconds).
func TestUser_FailsWhenItsAuditEventIsRefused(t *testing.T) {
	t.Parallel() // the wait is the writer's, not this test's
	e := newUserEnv(t)
	ctx := context.Background()
	if _, err := e.db.Pool.Exec(ctx, `
		CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'audit refused'; END$$;
		CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_audit();`); err != nil {
		t.Fatal(err)
	}
	out, err := e.user("", "set-admin", "bob@example.com")
	if err == nil || !strings.Contains(err.Error(), "its audit event was not written") {
		t.Fatalf("set-admin with the audit log refusing: err = %v, want it to say the audit event was not written\n%s", err, out)
	}
}
