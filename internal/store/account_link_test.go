package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// TestResetPassword_RacesAPasswordChange: a reset link used while a password
// change is being committed (on another replica, say) must not win. The
// change holds the user's row, uncommitted, until the reset is seen waiting
// for it (pg_stat_activity says so: no sleep decides the order); once the
// change commits, the reset finds the link no longer stands on the password
// it was issued for. Checked without a lock, the link would have passed on
// the old hash and then overwritten the new password.
func TestResetPassword_RacesAPasswordChange(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	u, err := db.CreateUser(ctx, "race@example.com", "first hash", nil)
	if err != nil {
		t.Fatal(err)
	}
	tok := []byte("reset-token-hash-race")
	if err := db.CreateAccountToken(ctx, u.ID, store.TokenReset, tok, u.Email, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	change, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = change.Rollback(ctx) }()
	if _, err := change.Exec(ctx, `UPDATE users SET password_hash = 'changed hash' WHERE id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := db.ResetPassword(ctx, tok, "reset hash")
		done <- err
	}()
	waitForLockWait(t, db)
	if err := change.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Fatalf("ResetPassword() racing a password change err = %v, want invalid", err)
	}
	var hash string
	if err := db.Pool.QueryRow(ctx, `SELECT password_hash FROM users WHERE id = $1`, u.ID).Scan(&hash); err != nil || hash != "changed hash" {
		t.Fatalf("password hash = %q, %v; want the change's", hash, err)
	}
}

// waitForLockWait returns once a session of db's database waits for a lock.
func waitForLockWait(t *testing.T, db *store.DB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the reset never waited for the password change's lock")
}
