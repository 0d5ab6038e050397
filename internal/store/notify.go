package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// InvalidationChannel is the LISTEN/NOTIFY channel on which every replica
// hears that cached keys or tool policies of a workspace changed.
const InvalidationChannel = "mcpgate_invalidate"

// Invalidation kinds carried in a notification's payload ("<kind>:<workspace>",
// or "<kind>:<workspace>:<id>" for a kind about one row).
const (
	InvalidateKeys   = "keys"
	InvalidatePolicy = "policy"
	InvalidateConn   = "conn"
	// InvalidateApproval says that a person decided an approval request
	// (Invalidation.ID): the calls waiting for it, on whichever replica,
	// read it again. It drops no cache.
	InvalidateApproval = "approval"
)

func notify(ctx context.Context, tx pgx.Tx, kind, workspaceID string) error {
	// pg_notify inside the transaction is delivered at commit, and only if the
	// transaction commits: a cache is never dropped for a change that did not
	// happen, nor kept after one that did.
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, InvalidationChannel, kind+":"+workspaceID)
	return err
}

func notifyKeys(ctx context.Context, tx pgx.Tx, workspaceID string) error {
	return notify(ctx, tx, InvalidateKeys, workspaceID)
}

// Invalidation is one notification: what changed in which workspace. An empty
// Kind means "everything may have changed" (the listener reconnected and may
// have missed notifications).
type Invalidation struct {
	Kind        string
	WorkspaceID string
	// ID is the row a kind about one row names (InvalidateApproval).
	ID string
}

// parseInvalidation reads a payload. Workspace ids are UUIDs, which hold no
// ":", so the third part is the row's id.
func parseInvalidation(payload string) Invalidation {
	kind, rest, _ := strings.Cut(payload, ":")
	ws, id, _ := strings.Cut(rest, ":")
	return Invalidation{Kind: kind, WorkspaceID: ws, ID: id}
}

// listenRetry is the longest wait between two attempts to get the listener
// back: short, because caches are not trusted while it is away (every call
// reloads), and a revoke made meanwhile must take effect at once.
const listenRetry = 250 * time.Millisecond

// Listen holds one connection on the invalidation channel and calls fn for
// each notification until ctx ends. state, when set, is told whenever the
// listener connects (true) or loses its connection (false). After a lost
// connection it reconnects within listenRetry of the database answering and
// calls fn with an empty Invalidation, since notifications sent meanwhile
// are lost. It returns when ctx is done.
//
// The connection is checked by a health ping after every second without a
// notification; a ping or a reconnection that times out marks the database
// down (Down) until the listener connects again, and meanwhile every wait
// for a pool connection fails at once, so that the callers' outage rules
// (serve what is cached, refuse the rest) apply within seconds of a hang.
func (db *DB) Listen(ctx context.Context, log *slog.Logger, ready chan<- struct{}, fn func(Invalidation), state func(connected bool)) {
	if state == nil {
		state = func(bool) {}
	}
	backoff := 50 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		err := db.listenOnce(ctx, func() {
			if first {
				first = false
				if ready != nil {
					close(ready)
				}
			} else {
				fn(Invalidation{})
			}
			state(true)
			backoff = 50 * time.Millisecond
		}, fn)
		state(false)
		if ctx.Err() != nil {
			return
		}
		log.Warn("invalidation listener lost its connection; reconnecting", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, listenRetry)
	}
}

// Health ping of the listener's connection: after listenIdle without a
// notification it sends an empty statement, which must come back within
// listenPingTimeout. A database that hangs (a partition that holds every
// byte, a stopped server) answers neither a notification nor the ping, and
// TCP sees nothing wrong while the kernel still acknowledges; the ping is
// what notices it, in at most listenIdle+listenPingTimeout.
const (
	listenIdle        = time.Second
	listenPingTimeout = 2 * time.Second
)

func (db *DB) listenOnce(ctx context.Context, connected func(), fn func(Invalidation)) error {
	// A connection of its own, not one of the pool's: it stays in LISTEN
	// state, and its reconnection must not wait behind a busy pool (nor be
	// taken for the database hanging when the pool is only full).
	pc, err := pgx.ConnectConfig(ctx, db.Pool.Config().ConnConfig)
	if err != nil {
		db.markDownIf(ctx, err)
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = pc.Close(closeCtx)
	}()
	if _, err := pc.Exec(ctx, "LISTEN "+InvalidationChannel); err != nil {
		db.markDownIf(ctx, err)
		return err
	}
	db.down.Store(false)
	connected()
	for {
		waitCtx, cancel := context.WithTimeout(ctx, listenIdle)
		n, err := pc.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			fn(parseInvalidation(n.Payload))
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case waitCtx.Err() == nil:
			return err // the connection broke
		}
		pingCtx, cancel := context.WithTimeout(ctx, listenPingTimeout)
		err = pc.Ping(pingCtx)
		cancel()
		if err != nil {
			db.markDownIf(ctx, err)
			return fmt.Errorf("health ping: %w", err)
		}
	}
}

// markDownIf marks the database down when err is a timeout (it did not
// answer), unless ctx itself ended (a stop). A refusal is not marked: it
// is answered at once anyway, and the listener retries in milliseconds.
func (db *DB) markDownIf(ctx context.Context, err error) {
	var ne net.Error
	timeout := pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
	if ctx.Err() == nil && timeout {
		db.down.Store(true)
	}
}
