package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// TestLocker: a key's lock is held across pools (replicas) until the work
// under it returns; a waiter gives up after the Locker's wait with
// ErrLockBusy; other keys are not held up; a Locker holds at most half the
// pool, failing fast (ErrLockSlots) rather than taking the rest, and one
// person at most a quarter of that (ErrLockShare).
func TestLocker(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t)
	second, err := store.Open(ctx, db.Pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Close)
	// The short waits are for what must fail; what must succeed goes
	// through patient Lockers on the same pools (they share the pools'
	// slots), since opening a connection may alone take longer than 50 ms on
	// a busy machine, which the short wait would report as no slot.
	mine, theirs := db.NewLocker(50*time.Millisecond), second.NewLocker(50*time.Millisecond)
	minePatient, theirsPatient := db.NewLocker(10*time.Second), second.NewLocker(10*time.Second)

	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- minePatient.Do(ctx, "ana", func(ctx context.Context, h *store.Held) error {
			if err := h.Lock(ctx, "sandbox a"); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	lock := func(l *store.Locker, key string) error {
		return l.Do(ctx, "bo", func(ctx context.Context, h *store.Held) error { return h.Lock(ctx, key) })
	}
	// Twice: the second try starts after the holder's own wait has passed,
	// which bounds only how long it waited, not how long it holds.
	for range 2 {
		if err := lock(theirs, "sandbox a"); !errors.Is(err, store.ErrLockBusy) {
			t.Errorf("the same key on another pool: err = %v, want ErrLockBusy", err)
		}
	}
	if err := lock(theirsPatient, "sandbox b"); err != nil {
		t.Errorf("another key: err = %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := lock(theirsPatient, "sandbox a"); err != nil {
		t.Errorf("after the holder returned: err = %v", err)
	}
	if err := minePatient.Do(ctx, "bo", func(context.Context, *store.Held) error { return nil }); err != nil {
		t.Errorf("work that takes no lock: err = %v", err)
	}

	// Every slot held, by as many people: the next one fails fast, and leaves
	// the pool's other half to everything else.
	slots := int(db.Pool.Config().MaxConns) / 2
	letGo := hold(t, minePatient, slots, func(i int) string { return "person " + string(rune('a'+i)) })
	err = lock(mine, "one more")
	if !errors.Is(err, store.ErrLockSlots) || mcpgate.ErrorCode(err) != mcpgate.EUnavailable {
		t.Errorf("with every slot held: err = %v, want ErrLockSlots", err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT 1`).Scan(&n); err != nil {
		t.Errorf("a query beside the held locks: err = %v", err)
	}
	letGo()

	// One person holds at most a quarter of the slots: theirs wait, other
	// people's do not.
	share := max(slots/4, 1)
	letGo = hold(t, minePatient, share, func(int) string { return "ana" })
	err = mine.Do(ctx, "ana", func(ctx context.Context, h *store.Held) error { return h.Lock(ctx, "ana's next") })
	if !errors.Is(err, store.ErrLockShare) || mcpgate.ErrorCode(err) != mcpgate.ETooMany {
		t.Errorf("past one person's share: err = %v, want ErrLockShare", err)
	}
	if err := lock(minePatient, "bo's"); err != nil {
		t.Errorf("another person while one holds their share: err = %v", err)
	}
	letGo()
}

// hold has n calls of owner(i) hold a lock each until the returned func is
// called.
func hold(t *testing.T, l *store.Locker, n int, owner func(i int) string) func() {
	t.Helper()
	ctx := context.Background()
	release := make(chan struct{})
	var holders []chan error
	for i := range n {
		ch, locked := make(chan error, 1), make(chan struct{})
		go func() {
			ch <- l.Do(ctx, owner(i), func(ctx context.Context, h *store.Held) error {
				if err := h.Lock(ctx, "held "+string(rune('a'+i))); err != nil {
					close(locked)
					return err
				}
				close(locked)
				<-release
				return nil
			})
		}()
		<-locked
		holders = append(holders, ch)
	}
	return func() {
		close(release)
		for _, ch := range holders {
			if err := <-ch; err != nil {
				t.Error(err)
			}
		}
	}
}

// TestLocker_WaitOutlastsQueryTimeout: a wait for a lock is bounded by the
// Locker's wait, not by the statement timeout every other query has: a
// change that waits longer than a query may for the change before it gets
// the lock once it is free, not "database unavailable".
func TestLocker_WaitOutlastsQueryTimeout(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t)
	db.SetQueryTimeout(100 * time.Millisecond)
	l := db.NewLocker(20 * time.Second)
	letGo := hold(t, l, 1, func(int) string { return "ana" }) // holds "held a"
	waited := make(chan error, 1)
	go func() {
		waited <- l.Do(ctx, "bo", func(ctx context.Context, h *store.Held) error { return h.Lock(ctx, "held a") })
	}()
	storetest.Until(t, "the second change to wait for the lock", func() bool { return storetest.WaitingLocks(t, db) > 0 })
	time.Sleep(300 * time.Millisecond) // three query timeouts: the wait must outlast them
	letGo()
	if err := <-waited; err != nil {
		t.Fatalf("a wait longer than the query timeout: err = %v, want the lock", err)
	}
}
