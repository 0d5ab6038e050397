package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// InvalidateReplicas is the notification kind sent when a replica joins or
// leaves, so that the others count the live replicas again at once.
const InvalidateReplicas = "replicas"

// HeartbeatReplica records that replica id is serving and returns how many
// replicas were seen within ttl, itself included. The first heartbeat of an
// id tells the other replicas (they count again); rows of replicas unseen
// for ten times ttl are removed.
func (db *DB) HeartbeatReplica(ctx context.Context, id string, ttl time.Duration) (int, error) {
	var live int
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		var joined bool
		// xmax is 0 on a row this statement inserted, set on one it updated.
		if err := tx.QueryRow(ctx, `INSERT INTO replicas (id) VALUES ($1)
			ON CONFLICT (id) DO UPDATE SET seen_at = now()
			RETURNING xmax = 0`, id).Scan(&joined); err != nil {
			return err
		}
		if joined {
			if err := notify(ctx, tx, InvalidateReplicas, ""); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM replicas WHERE seen_at < now() - make_interval(secs => $1)`, (10 * ttl).Seconds()); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM replicas WHERE seen_at >= now() - make_interval(secs => $1)`, ttl.Seconds()).Scan(&live)
	})
	if err != nil {
		return 0, fmt.Errorf("replica heartbeat: %w", err)
	}
	return live, nil
}

// LiveReplicas returns how many replicas were seen within ttl.
func (db *DB) LiveReplicas(ctx context.Context, ttl time.Duration) (int, error) {
	var live int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM replicas WHERE seen_at >= now() - make_interval(secs => $1)`, ttl.Seconds()).Scan(&live); err != nil {
		return 0, fmt.Errorf("count replicas: %w", err)
	}
	return live, nil
}

// LeaveReplica removes replica id (a clean stop) and tells the others.
func (db *DB) LeaveReplica(ctx context.Context, id string) error {
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, id); err != nil {
			return err
		}
		return notify(ctx, tx, InvalidateReplicas, "")
	})
	if err != nil {
		return fmt.Errorf("replica leave: %w", err)
	}
	return nil
}
