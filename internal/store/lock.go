package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcpgate/mcpgate"
)

// Changes that must not interleave, on any replica, take a
// transaction-scoped PostgreSQL advisory lock named by a string key: the
// check that decides a change and the change itself run while it is held,
// and it is released when the transaction ends, so a crashed replica or a
// dropped connection never leaves one behind.
//
// The cost, and the exception to the rule that no database connection is
// held during an upstream call (else the pool would be sized by E2B's
// latency, not by the gateway's own work): a holder keeps one pool
// connection for as long as the work under the lock lasts, which for a tool
// call is its upstream round trip. Three bounds keep that from starving the pool or
// letting one person starve the others: at most half of the pool's
// connections may be held by locks at once (the rest is the hot path's), one
// owner (a person) at most a quarter of those (at least one), and every wait
// (for a share, a slot, a connection, the lock) ends at the Locker's wait,
// with an error rather than a hang.

// ErrLockBusy is returned when a lock stayed held by someone else for the
// whole wait.
var ErrLockBusy = errors.New("store: lock held by another change")

// ErrLockSlots is returned when every connection the Locker may hold (or
// the pool) stayed in use for the whole wait.
var ErrLockSlots = &mcpgate.Error{Code: mcpgate.EUnavailable, RetryAfter: 2,
	Message: "the gateway is busy with other changes right now; try again in a few seconds"}

// ErrLockShare is returned when the owner's own share of the slots stayed
// in use for the whole wait.
var ErrLockShare = &mcpgate.Error{Code: mcpgate.ETooMany, RetryAfter: 2,
	Message: "other changes of yours are still in progress; wait for them and try again in a few seconds"}

// Locker takes advisory locks within its pool's slots.
type Locker struct {
	db    *DB
	slots *lockSlots
	wait  time.Duration
}

// lockSlots bound the connections one pool's locks hold: all of them
// (free), and each owner's (owners).
type lockSlots struct {
	free  chan struct{}
	share int
	mu    sync.Mutex
	// owners are the owners holding or waiting for a slot, with their
	// share; an entry goes when its last user does.
	owners map[string]*ownerShare
}

type ownerShare struct {
	held  chan struct{}
	users int
}

// NewLocker returns a Locker whose waits end after wait. Lockers on one
// pool share its slots.
func (db *DB) NewLocker(wait time.Duration) *Locker {
	n := max(int(db.Pool.Config().MaxConns)/2, 1)
	slots, _ := poolSlots.LoadOrStore(db.Pool, &lockSlots{free: make(chan struct{}, n), share: max(n/4, 1),
		owners: map[string]*ownerShare{}})
	return &Locker{db: db, slots: slots.(*lockSlots), wait: wait}
}

// poolSlots are the lock slots of each pool (*pgxpool.Pool to *lockSlots):
// the bound is the pool's, however many Lockers use it. A pool lives as
// long as its process, so entries are never removed.
var poolSlots sync.Map

// take takes one of owner's share and then one slot, both before the
// waiting context ends. It returns what gives them back.
func (ls *lockSlots) take(ctx, waitCtx context.Context, owner string) (func(), error) {
	ls.mu.Lock()
	o := ls.owners[owner]
	if o == nil {
		o = &ownerShare{held: make(chan struct{}, ls.share)}
		ls.owners[owner] = o
	}
	o.users++
	ls.mu.Unlock()
	leave := func() {
		ls.mu.Lock()
		if o.users--; o.users == 0 {
			delete(ls.owners, owner)
		}
		ls.mu.Unlock()
	}
	select {
	case o.held <- struct{}{}:
	case <-waitCtx.Done():
		leave()
		return nil, waitErr(ctx, ErrLockShare)
	}
	select {
	case ls.free <- struct{}{}:
	case <-waitCtx.Done():
		<-o.held
		leave()
		return nil, waitErr(ctx, ErrLockSlots)
	}
	return func() {
		<-ls.free
		<-o.held
		leave()
	}, nil
}

// waitErr is the error of a wait that ended: the caller's own end, or
// busy.
func waitErr(ctx context.Context, busy error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return busy
}

// Held is the transaction that holds a Locker's locks while work runs.
// Lock takes one more in it; the zero value of the work's Held holds none
// until its first Lock.
type Held struct {
	l     *Locker
	owner string
	tx    pgx.Tx
	// free gives back the slot the Held took, if it took one.
	free func()
}

// Do runs fn with a Held on which fn takes the locks it needs, for owner
// (the person on whose behalf, whose share of the slots it uses); every
// lock taken is released when fn returns. Without a Lock call fn costs
// nothing: no slot, no connection.
func (l *Locker) Do(ctx context.Context, owner string, fn func(ctx context.Context, h *Held) error) error {
	h := &Held{l: l, owner: owner}
	defer h.release(ctx)
	return fn(ctx, h)
}

// Lock takes the advisory lock of key, waiting at most the Locker's wait
// (ErrLockBusy after it). Keys are hashed to Postgres's 64-bit lock space;
// two keys that collide only serialise more than they need to. Locks are
// taken in the order Lock is called: callers that take several keep one
// order everywhere (Postgres also breaks a deadlock by failing one side).
// A failed Lock releases every lock the Held took: the caller must stop.
func (h *Held) Lock(ctx context.Context, key string) error {
	deadline := time.Now().Add(h.l.wait)
	if h.tx == nil {
		if err := h.begin(ctx, deadline); err != nil {
			return err
		}
	}
	// lock_timeout makes the server give up and keep the connection usable;
	// the context's deadline is only the backstop (a cancelled query costs
	// the connection).
	wait := time.Until(deadline)
	if wait < time.Millisecond {
		wait = time.Millisecond
	}
	lockCtx, cancel := context.WithTimeout(ctx, wait+2*time.Second)
	defer cancel()
	if _, err := h.tx.Exec(lockCtx, `SELECT set_config('lock_timeout', $1, true)`, fmt.Sprintf("%dms", wait.Milliseconds())); err != nil {
		return mapError(err, "")
	}
	// The wait is the Locker's, bounded above by lock_timeout and lockCtx,
	// not the statement timeout every other query has (which is shorter).
	err := lockKey(WithoutQueryTimeout(lockCtx), h.tx, key)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available: lock_timeout passed
		// The transaction is aborted; a later Lock must start a new one.
		h.rollback(ctx)
		return ErrLockBusy
	}
	if err != nil {
		h.rollback(ctx)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return ErrLockBusy
		}
		return mapError(err, "")
	}
	return nil
}

// begin takes a share, a slot and a connection, each before deadline, and
// starts the transaction the locks live in.
func (h *Held) begin(ctx context.Context, deadline time.Time) error {
	waitCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	free, err := h.l.slots.take(ctx, waitCtx, h.owner)
	if err != nil {
		return err
	}
	h.free = free
	// The deadline bounds only the wait for a connection and BEGIN; the
	// transaction then lives as long as the work under the lock.
	tx, err := h.l.db.Pool.Begin(waitCtx)
	if err != nil {
		h.freeSlot()
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return ErrLockSlots
		}
		return mapError(err, "")
	}
	h.tx = tx
	return nil
}

// release ends the transaction, which releases every lock it took. It is
// not bound to ctx: a caller that went away must still give the
// connection back in good order.
func (h *Held) release(ctx context.Context) {
	if h.tx != nil {
		endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = h.tx.Commit(endCtx)
		cancel()
		h.tx = nil
	}
	h.freeSlot()
}

func (h *Held) rollback(ctx context.Context) {
	endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	_ = h.tx.Rollback(endCtx)
	cancel()
	h.tx = nil
	h.freeSlot()
}

func (h *Held) freeSlot() {
	if h.free != nil {
		h.free()
		h.free = nil
	}
}

// lockKey takes the transaction-scoped advisory lock of key in tx.
func lockKey(ctx context.Context, tx pgx.Tx, key string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, key)
	return err
}
