package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// auditMaintenanceLock is the advisory lock that lets one replica at a time
// maintain the audit log's partitions; the others skip the round.
const auditMaintenanceLock = 0x6d637067_61756469 // "mcpgaudi"

// AuditPartitionsAhead is how many days of partitions maintenance keeps
// ready beyond today, so that inserts do not wait for one to be added.
const AuditPartitionsAhead = 3

// AuditMaintenance is what one maintenance round did.
type AuditMaintenance struct {
	Skipped           bool // another replica holds the lock
	PartitionsAdded   int
	PartitionsDropped int
	RowsDeleted       int64 // from the pre-partitioning partition only
	HoursDeleted      int64 // rollup rows
}

// MaintainAudit adds the audit log's partitions for today and the next
// AuditPartitionsAhead days and, when retention > 0, removes what is older
// than now - retention:
//   - a daily partition whose whole day is older is detached CONCURRENTLY
//     (no lock that blocks reads or inserts) and dropped: no DELETE, no bloat;
//   - the partition that holds the rows from before partitioning is emptied
//     of old rows in small batches through its created_at index, and dropped
//     once all of it is older;
//   - rollup hours older than the cutoff are deleted (a small table: one row
//     per workspace, hour, actor and source).
//
// Rows are therefore kept at least retention and at most a day longer. Only
// one replica maintains at a time (a session advisory lock); another finds
// it taken and skips.
func (db *DB) MaintainAudit(ctx context.Context, now time.Time, retention time.Duration) (AuditMaintenance, error) {
	var res AuditMaintenance
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return res, mapError(err, "")
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(auditMaintenanceLock)).Scan(&locked); err != nil {
		return res, mapError(err, "")
	}
	if !locked {
		res.Skipped = true
		return res, nil
	}
	defer func() {
		// A lock left behind would stop every replica's maintenance until this
		// connection closed; if the unlock fails, close it.
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(auditMaintenanceLock)); err != nil {
			_ = conn.Conn().Close(context.Background())
		}
	}()

	today := now.UTC().Truncate(24 * time.Hour)
	for i := range AuditPartitionsAhead + 1 {
		var added bool
		day := today.AddDate(0, 0, i).Format(time.DateOnly)
		if err := conn.QueryRow(ctx, `SELECT audit_log_add_partition($1::date)`, day).Scan(&added); err != nil {
			return res, fmt.Errorf("add audit partition %s: %w", day, mapError(err, ""))
		}
		if added {
			res.PartitionsAdded++
		}
	}
	if retention <= 0 {
		return res, nil
	}
	cutoff := now.Add(-retention)

	rows, err := conn.Query(ctx, `
		SELECT c.relname, i.inhdetachpending FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'audit_log'::regclass ORDER BY c.relname`)
	if err != nil {
		return res, mapError(err, "")
	}
	type part struct {
		name    string
		pending bool
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (part, error) {
		var p part
		return p, r.Scan(&p.name, &p.pending)
	})
	if err != nil {
		return res, mapError(err, "")
	}
	for _, p := range parts {
		end, legacy, ok := auditPartitionEnd(p.name)
		if !ok {
			continue // not ours: leave it alone
		}
		if !end.After(cutoff) {
			// FINALIZE completes a CONCURRENTLY detach that was interrupted
			// (a replica died between its two transactions).
			detach := `ALTER TABLE audit_log DETACH PARTITION ` + pgx.Identifier{p.name}.Sanitize() + ` CONCURRENTLY`
			if p.pending {
				detach = `ALTER TABLE audit_log DETACH PARTITION ` + pgx.Identifier{p.name}.Sanitize() + ` FINALIZE`
			}
			if _, err := conn.Exec(ctx, detach); err != nil {
				return res, fmt.Errorf("detach audit partition %s: %w", p.name, mapError(err, ""))
			}
			if _, err := conn.Exec(ctx, `DROP TABLE `+pgx.Identifier{p.name}.Sanitize()); err != nil {
				return res, fmt.Errorf("drop audit partition %s: %w", p.name, mapError(err, ""))
			}
			res.PartitionsDropped++
			continue
		}
		if legacy {
			n, err := deleteOldLegacyRows(ctx, conn.Conn(), p.name, cutoff)
			res.RowsDeleted += n
			if err != nil {
				return res, err
			}
		}
	}
	for {
		// Batches keep each transaction short, however many hours are due.
		tag, err := conn.Exec(ctx, `
			DELETE FROM audit_hourly WHERE ctid = ANY (ARRAY(
				SELECT ctid FROM audit_hourly WHERE hour < date_trunc('hour', $1::timestamptz, 'UTC') LIMIT 10000))`, cutoff)
		if err != nil {
			return res, fmt.Errorf("delete old audit rollup: %w", mapError(err, ""))
		}
		res.HoursDeleted += tag.RowsAffected()
		if tag.RowsAffected() < 10000 {
			break
		}
	}
	return res, nil
}

// deleteOldLegacyRows deletes the rows older than cutoff from the partition
// that predates partitioning, 5,000 at a time. Its space is reused by no one
// (nothing is inserted there any more) and returns to the system when the
// partition is dropped, a retention period after the upgrade.
func deleteOldLegacyRows(ctx context.Context, conn *pgx.Conn, name string, cutoff time.Time) (int64, error) {
	t := pgx.Identifier{name}.Sanitize()
	var total int64
	for {
		tag, err := conn.Exec(ctx, `DELETE FROM `+t+` WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM `+t+` WHERE created_at < $1 LIMIT 5000))`, cutoff)
		if err != nil {
			return total, fmt.Errorf("delete old audit rows from %s: %w", name, mapError(err, ""))
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 5000 {
			return total, nil
		}
	}
}

// auditPartitionEnd reads the end of a partition's range from its name:
// audit_log_pYYYYMMDD covers that day, audit_log_before_YYYYMMDD everything
// before that day (legacy: the rows from before partitioning).
func auditPartitionEnd(name string) (end time.Time, legacy bool, ok bool) {
	if d, found := strings.CutPrefix(name, "audit_log_p"); found {
		t, err := time.Parse("20060102", d)
		return t.AddDate(0, 0, 1), false, err == nil
	}
	if d, found := strings.CutPrefix(name, "audit_log_before_"); found {
		t, err := time.Parse("20060102", d)
		return t, true, err == nil
	}
	return time.Time{}, false, false
}

// RunAuditMaintenance runs MaintainAudit now and then every interval until
// ctx ends, logging what it removed and any failure (the next round tries
// again). retention 0 keeps everything; partitions are still added ahead.
func (db *DB) RunAuditMaintenance(ctx context.Context, log *slog.Logger, retention, interval time.Duration) {
	// Attaching and dropping day partitions of a large log may take longer
	// than a request's statement; this job is off the request path.
	ctx = WithoutQueryTimeout(ctx)
	if interval <= 0 {
		interval = time.Hour
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		res, err := db.MaintainAudit(ctx, time.Now(), retention)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("audit log maintenance", "err", err)
		case res.PartitionsDropped > 0 || res.RowsDeleted > 0 || res.HoursDeleted > 0:
			log.Info("audit log retention applied", "partitions_dropped", res.PartitionsDropped,
				"rows_deleted", res.RowsDeleted, "rollup_hours_deleted", res.HoursDeleted, "retention", retention.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
