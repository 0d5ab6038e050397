package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// InvalidateRelayAnswer says that a client's answer to a relayed request
// (Invalidation.ID: the SHA-256 of its relay id) was stored by the replica
// the answer reached: the replica whose tool call waits for it takes it
// (TakeRelayAnswer). It drops no cache.
const InvalidateRelayAnswer = "relay"

// InvalidateSessionEnd says that a client ended its session on a server's
// endpoint (Invalidation.ID: the session id's random part): every replica
// answers the id 404 from then on. It drops no cache.
const InvalidateSessionEnd = "session-end"

// InvalidateSessionEndAck says that a replica heard of a session's end
// (Invalidation.ID: the session id's random part, "/" and the replica's
// id): the replica whose DELETE waits for every replica counts it. It
// drops no cache.
const InvalidateSessionEndAck = "session-end-ack"

// NotifySessionEnded tells every replica that a client ended a session.
// Nothing is stored: the replicas remember it (mcp's sessionend.go).
func (db *DB) NotifySessionEnded(ctx context.Context, workspaceID, id string) error {
	_, err := db.Pool.Exec(ctx, `SELECT pg_notify($1, $2)`, InvalidationChannel, InvalidateSessionEnd+":"+workspaceID+":"+id)
	return mapError(err, "")
}

// AckSessionEnded tells every replica that replica heard of the end of
// session id.
func (db *DB) AckSessionEnded(ctx context.Context, workspaceID, id, replica string) error {
	_, err := db.Pool.Exec(ctx, `SELECT pg_notify($1, $2)`, InvalidationChannel,
		InvalidateSessionEndAck+":"+workspaceID+":"+id+"/"+replica)
	return mapError(err, "")
}

// relayAnswerTTL bounds a stored answer nobody took (its call ended, or
// the id was not one this gateway issued): rows older are deleted at each
// write.
const relayAnswerTTL = 5 * time.Minute

// PutRelayAnswer stores the sealed answer of a relayed request under id
// (the SHA-256 of the relay id) and binding (who it was issued to), and
// tells every replica at commit. The first answer for an id and binding
// stays (a relay is answered once); a later one changes nothing. Answers
// older than relayAnswerTTL are deleted in the same transaction.
func (db *DB) PutRelayAnswer(ctx context.Context, workspaceID, id, binding string, sealed []byte) error {
	return pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM relay_answers WHERE created_at < now() - $1::interval`,
			relayAnswerTTL.String()); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO relay_answers (id, binding, workspace_id, answer) VALUES ($1, $2, $3, $4)
			ON CONFLICT DO NOTHING`, id, binding, workspaceID, sealed)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, InvalidationChannel, InvalidateRelayAnswer+":"+workspaceID+":"+id)
		return err
	})
}

// TakeRelayAnswer reads and deletes the answer stored under id and
// binding; ok is false when there is none (yet).
func (db *DB) TakeRelayAnswer(ctx context.Context, id, binding string) (sealed []byte, ok bool, err error) {
	err = db.Pool.QueryRow(ctx, `DELETE FROM relay_answers WHERE id = $1 AND binding = $2 RETURNING answer`,
		id, binding).Scan(&sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, mapError(err, "")
	}
	return sealed, true, nil
}
