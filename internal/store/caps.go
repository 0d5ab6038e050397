package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
)

// Counted limits (keys and workspaces per person, pending approvals per
// person and workspace) are checked and spent in one transaction that holds
// the advisory lock of what is counted: creations racing on any replicas
// are counted one after another, so at most the limit pass. Counting first
// and creating after, as separate statements, let every racer count the
// same number and pass.

// ErrCapReached is returned by a capped creation that found the limit
// reached; nothing was created.
var ErrCapReached = errors.New("store: limit reached")

// capCounted, when set (tests), runs inside a capped creation between its
// count and its insert, with the lock held.
var capCounted func(key string)

// withinCap counts with count and, when fewer than limit are there (limit
// < 0: no limit), creates with create, in one transaction under the lock
// of key. It returns the count it found, and ErrCapReached when it created
// nothing for the limit.
func (db *DB) withinCap(ctx context.Context, key string, limit int, count func(tx pgx.Tx) (int, error), create func(tx pgx.Tx) error) (int, error) {
	n := 0
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if limit < 0 {
			return create(tx)
		}
		if err := lockKey(ctx, tx, "cap|"+key); err != nil {
			return err
		}
		var err error
		if n, err = count(tx); err != nil {
			return err
		}
		if capCounted != nil {
			capCounted(key)
		}
		if n >= limit {
			return ErrCapReached
		}
		return create(tx)
	})
	return n, err
}

// rowQuerier is what a pool and a transaction share, for statements that
// run in either.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func countOne(ctx context.Context, tx pgx.Tx, sql string, args ...any) (int, error) {
	var n int
	err := tx.QueryRow(ctx, sql, args...).Scan(&n)
	return n, err
}

// CreateKeyWithin is CreateKey unless the key's owner already holds limit
// working (unrevoked, unexpired) MCP keys, in every workspace: then it
// returns their number and ErrCapReached.
func (db *DB) CreateKeyWithin(ctx context.Context, k *mcpgate.APIKey, secretHash []byte, limit int) (int, error) {
	n, err := db.withinCap(ctx, "keys|"+k.UserID, limit, func(tx pgx.Tx) (int, error) {
		return countOne(ctx, tx, `SELECT count(*) FROM api_keys
			WHERE user_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`, k.UserID)
	}, func(tx pgx.Tx) error {
		return insertKey(ctx, tx, k, secretHash)
	})
	return n, capError(err, wsNotFound)
}

// CreateWorkspaceWithin is CreateWorkspace unless the user already owns
// limit non-personal workspaces: then it returns their number and
// ErrCapReached.
func (db *DB) CreateWorkspaceWithin(ctx context.Context, ownerID, name string, limit int) (*mcpgate.Workspace, int, error) {
	var w *mcpgate.Workspace
	n, err := db.withinCap(ctx, "workspaces|"+ownerID, limit, func(tx pgx.Tx) (int, error) {
		return countOne(ctx, tx, `
			SELECT count(*) FROM members m JOIN workspaces w ON w.id = m.workspace_id
			WHERE m.user_id = $1 AND m.role = 'owner' AND NOT w.personal`, ownerID)
	}, func(tx pgx.Tx) (err error) {
		w, err = createWorkspace(ctx, tx, ownerID, name, false)
		return err
	})
	return w, n, capError(err, "user not found")
}

// CreateApprovalWithin is CreateApproval unless the requester already has
// limit requests pending (unexpired at now) in the workspace: then it
// returns their number and ErrCapReached.
func (db *DB) CreateApprovalWithin(ctx context.Context, ap *mcpgate.ApprovalRequest, argsHash string, limit int, now time.Time) (int, error) {
	n, err := db.withinCap(ctx, "approvals|"+ap.WorkspaceID+"|"+ap.RequestedBy, limit, func(tx pgx.Tx) (int, error) {
		return countOne(ctx, tx, pendingApprovalsSQL, ap.WorkspaceID, ap.RequestedBy, now)
	}, func(tx pgx.Tx) error {
		return insertApproval(ctx, tx, ap, argsHash)
	})
	return n, capError(err, wsNotFound)
}

// capError maps a capped creation's error as mapError does, keeping
// ErrCapReached for the caller to word.
func capError(err error, notFound string) error {
	if errors.Is(err, ErrCapReached) {
		return ErrCapReached
	}
	return mapError(err, notFound)
}
