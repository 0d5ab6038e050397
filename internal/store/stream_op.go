package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// InvalidateStreamOp says that a replica stored a subscription operation
// for the replica holding a client session's standalone stream
// (Invalidation.ID: the session's binding): that replica claims it
// (ClaimStreamOps). It drops no cache.
const InvalidateStreamOp = "stream-op"

// InvalidateStreamOpAnswered says that the replica holding the stream
// answered an operation (Invalidation.ID: the operation's id): the replica
// waiting for it takes the answer (TakeStreamOpAnswer). It drops no cache.
const InvalidateStreamOpAnswered = "stream-op-answered"

// streamOpTTL bounds a row left behind (its writer went away): rows older
// are deleted at each write.
const streamOpTTL = 5 * time.Minute

// streamOp is a claimed operation: its id and its sealed content.
type streamOp struct {
	ID        string
	Operation []byte
}

// ClaimStreamOps claims the operations waiting for binding's stream and
// calls each with them, in the order they were stored (once all are
// claimed: each may take a while); each is claimed once, by one replica.
func (db *DB) ClaimStreamOps(ctx context.Context, binding string, each func(id string, operation []byte)) error {
	rows, err := db.Pool.Query(ctx, `WITH claimed AS (
			UPDATE stream_ops SET claimed = true WHERE binding = $1 AND NOT claimed RETURNING id, seq, operation)
		SELECT id, operation FROM claimed ORDER BY seq`, binding)
	if err != nil {
		return mapError(err, "")
	}
	ops, err := pgx.CollectRows(rows, pgx.RowToStructByPos[streamOp])
	if err != nil {
		return mapError(err, "")
	}
	for _, op := range ops {
		each(op.ID, op.Operation)
	}
	return nil
}

// PutStreamOp stores a sealed operation under id for the replica holding
// binding's stream and tells every replica at commit; rows older than
// streamOpTTL are deleted in the same transaction.
func (db *DB) PutStreamOp(ctx context.Context, workspaceID, id, binding string, operation []byte) error {
	return mapError(pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM stream_ops WHERE created_at < now() - $1::interval`, streamOpTTL.String()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO stream_ops (id, binding, workspace_id, operation) VALUES ($1, $2, $3, $4)`,
			id, binding, workspaceID, operation); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, InvalidationChannel, InvalidateStreamOp+":"+workspaceID+":"+binding)
		return err
	}), "")
}

// AnswerStreamOp stores the sealed answer of a claimed operation and tells
// every replica at commit.
func (db *DB) AnswerStreamOp(ctx context.Context, workspaceID, id string, answer []byte) error {
	return mapError(pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE stream_ops SET answer = $2 WHERE id = $1 AND claimed`, id, answer)
		if err != nil || tag.RowsAffected() == 0 {
			return err // its writer withdrew it, or the sweep took it: nobody waits
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, InvalidationChannel, InvalidateStreamOpAnswered+":"+workspaceID+":"+id)
		return err
	}), "")
}

// TakeStreamOpAnswer reads and deletes the answer of operation id; ok is
// false while there is none (yet).
func (db *DB) TakeStreamOpAnswer(ctx context.Context, id string) (answer []byte, ok bool, err error) {
	err = db.Pool.QueryRow(ctx, `DELETE FROM stream_ops WHERE id = $1 AND answer IS NOT NULL RETURNING answer`, id).Scan(&answer)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, mapError(err, "")
	}
	return answer, true, nil
}

// WithdrawStreamOp deletes operation id unless a replica claimed it;
// withdrawn is false when one did (its answer is coming).
func (db *DB) WithdrawStreamOp(ctx context.Context, id string) (withdrawn bool, err error) {
	tag, err := db.Pool.Exec(ctx, `DELETE FROM stream_ops WHERE id = $1 AND NOT claimed`, id)
	if err != nil {
		return false, mapError(err, "")
	}
	return tag.RowsAffected() > 0, nil
}
