package store

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// InvalidationChannel is the LISTEN/NOTIFY channel on which every replica
// hears that cached keys or tool policies of a workspace changed.
const InvalidationChannel = "mcpgate_invalidate"

// Invalidation kinds carried in a notification's payload ("<kind>:<workspace>").
const (
	InvalidateKeys   = "keys"
	InvalidatePolicy = "policy"
	InvalidateConn   = "conn"
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

func (db *DB) listenOnce(ctx context.Context, connected func(), fn func(Invalidation)) error {
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection is left in LISTEN state, so it must not go back to the
	// pool: Hijack takes it out, and it is closed below.
	pc := conn.Hijack()
	defer pc.Close(context.WithoutCancel(ctx))
	if _, err := pc.Exec(ctx, "LISTEN "+InvalidationChannel); err != nil {
		return err
	}
	connected()
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		kind, ws, _ := strings.Cut(n.Payload, ":")
		fn(Invalidation{Kind: kind, WorkspaceID: ws})
	}
}
