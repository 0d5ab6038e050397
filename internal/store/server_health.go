package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
)

// The health of upstream servers and the monitor's checks, shared by every
// replica: a server goes down once (one write, one invalidation), and each
// check is claimed by one replica in the statement that finds it due.

// ServerCheck is one server a replica claimed to check.
type ServerCheck struct {
	WorkspaceID, ServerID, Name string
	// Down is whether the server was down when claimed: a probe, not a
	// re-discovery of a server that is up.
	Down bool
}

// CheckIntervals say when a claimed server is due again: Down after a
// probe of a server that is down, Up plus up to Jitter after a
// re-discovery of one that is up.
type CheckIntervals struct {
	Down, Up, Jitter time.Duration
}

const nextCheckSQL = `$1::timestamptz + CASE WHEN s.health = 'error' THEN $2::bigint * interval '1 millisecond'
	ELSE ($3::bigint + floor(random() * $4::bigint)) * interval '1 millisecond' END`

func (iv CheckIntervals) args() []any {
	return []any{iv.Down.Milliseconds(), iv.Up.Milliseconds(), iv.Jitter.Milliseconds()}
}

// ClaimServerChecks claims up to limit enabled servers whose check is due
// at now, moving each one's next check forward in the same statement: rows
// another replica is claiming are skipped, and a claimed row is no longer
// due, so two replicas never check one server at once.
func (db *DB) ClaimServerChecks(ctx context.Context, now time.Time, iv CheckIntervals, limit int) ([]ServerCheck, error) {
	args := append([]any{now}, iv.args()...)
	return listRows(ctx, db, scanCheck, `
		UPDATE upstream_servers s SET checked_at = $1, next_check_at = `+nextCheckSQL+`
		FROM (SELECT id FROM upstream_servers WHERE enabled AND next_check_at <= $1
			ORDER BY next_check_at LIMIT $5 FOR UPDATE SKIP LOCKED) due
		WHERE s.id = due.id
		RETURNING s.workspace_id, s.id, s.name, s.health = 'error'`, append(args, limit)...)
}

// ClaimServerCheck claims the check of one server of a workspace now,
// however far its next check is, unless a check of it was claimed less
// than minGap ago (by any replica): what a server's own notice of a
// change asks for. It returns nil when there is nothing to claim.
func (db *DB) ClaimServerCheck(ctx context.Context, workspaceID, name string, now time.Time, minGap time.Duration, iv CheckIntervals) (*ServerCheck, error) {
	if !isUUID(workspaceID) {
		return nil, nil
	}
	args := append([]any{now}, iv.args()...)
	args = append(args, workspaceID, name, minGap.Milliseconds())
	var c ServerCheck
	err := scanCheck(db.Pool.QueryRow(ctx, `
		UPDATE upstream_servers s SET checked_at = $1, next_check_at = `+nextCheckSQL+`
		WHERE s.workspace_id = $5 AND s.name = $6 AND s.enabled
			AND (s.checked_at IS NULL OR s.checked_at <= $1::timestamptz - $7::bigint * interval '1 millisecond')
		RETURNING s.workspace_id, s.id, s.name, s.health = 'error'`, args...), &c)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, mapError(err, "")
	}
	return &c, nil
}

func scanCheck(r pgx.Row, c *ServerCheck) error {
	return r.Scan(&c.WorkspaceID, &c.ServerID, &c.Name, &c.Down)
}

// MarkServerDown records that a server is down since at, for reason (a
// text with no credential in it), and when it is probed next. Only the
// transition from up writes health and drops every replica's tool sets
// (InvalidatePolicy, as any change of the catalog): it reports whether it
// was that. A server already down keeps its down_since; only its reason
// is brought up to date.
func (db *DB) MarkServerDown(ctx context.Context, workspaceID, name, reason string, at, nextCheck time.Time) (bool, error) {
	if !isUUID(workspaceID) {
		return false, mcpgate.Errorf(mcpgate.ENotFound, "%s", serverNotFound)
	}
	var wentDown bool
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE upstream_servers SET health = 'error', last_error = $3, down_since = $4,
				next_check_at = $5
			WHERE workspace_id = $1 AND name = $2 AND health = 'ok'`, workspaceID, name, reason, at, nextCheck)
		if err != nil {
			return err
		}
		if wentDown = tag.RowsAffected() == 1; wentDown {
			return notify(ctx, tx, InvalidatePolicy, workspaceID)
		}
		tag, err = tx.Exec(ctx, `UPDATE upstream_servers SET last_error = $3 WHERE workspace_id = $1 AND name = $2`,
			workspaceID, name, reason)
		if err == nil && tag.RowsAffected() == 0 {
			err = pgx.ErrNoRows
		}
		return err
	})
	return wentDown, mapError(err, serverNotFound)
}

// ServerTarget is a server as a notice from a session is matched to: where
// it is and its sealed credential.
type ServerTarget struct {
	WorkspaceID, Name string
	Headers           SealedHeaders
}

// FindServerTargetsByURL returns every enabled server, of any workspace,
// registered at url, with its sealed credential: a notice that came on a
// session with url is matched to the one whose credential the session
// carries, never to a server that merely shares the URL.
func (db *DB) FindServerTargetsByURL(ctx context.Context, url string) ([]ServerTarget, error) {
	return listRows(ctx, db, func(r pgx.Row, t *ServerTarget) error {
		return r.Scan(&t.WorkspaceID, &t.Name, &t.Headers.ServerID, &t.Headers.Sealed)
	}, `SELECT s.workspace_id, s.name, s.id, h.sealed FROM upstream_servers s
		LEFT JOIN upstream_server_headers h ON h.id = s.id AND h.workspace_id = s.workspace_id
		WHERE s.url = $1 AND s.enabled ORDER BY s.workspace_id, s.name`, url)
}
