package store

import (
	"context"
	"time"
)

// CountAttempt counts one attempt of subject (in the login_failures table,
// pruned like failed logins) and returns the count in the window, this one
// included, and when the window started. Counting and reading are one
// statement, so parallel attempts each see their own place in the count.
func (db *DB) CountAttempt(ctx context.Context, period time.Duration, subject string) (int, time.Time, error) {
	var n int
	var start time.Time
	err := db.Pool.QueryRow(ctx, `
		INSERT INTO login_failures (subject, failures, window_start) VALUES ($1, 1, now())
		ON CONFLICT (subject) DO UPDATE SET
			failures = CASE WHEN login_failures.window_start > now() - make_interval(secs => $2)
				THEN login_failures.failures + 1 ELSE 1 END,
			window_start = CASE WHEN login_failures.window_start > now() - make_interval(secs => $2)
				THEN login_failures.window_start ELSE now() END
		RETURNING failures, window_start`, subject, period.Seconds()).Scan(&n, &start)
	if err != nil {
		return 0, time.Time{}, mapError(err, "")
	}
	return n, start, nil
}

// CountAttempts is CountAttempt for several subjects at once, in one
// statement (one transaction): a request counted against several limits
// (a mail per target address and per person) holds the rows of all of them
// until it is counted, taking them in one order (sorted), so that parallel
// requests are counted one after the other and each sees the same
// position in every count. Separate statements let two requests each be
// first in one count, refusing both where one is within every limit. The
// counts come back in the order of subjects.
func (db *DB) CountAttempts(ctx context.Context, period time.Duration, subjects ...string) ([]int, []time.Time, error) {
	rows, err := db.Pool.Query(ctx, `
		INSERT INTO login_failures (subject, failures, window_start)
		SELECT s, 1, now() FROM unnest($1::text[]) AS s ORDER BY s
		ON CONFLICT (subject) DO UPDATE SET
			failures = CASE WHEN login_failures.window_start > now() - make_interval(secs => $2)
				THEN login_failures.failures + 1 ELSE 1 END,
			window_start = CASE WHEN login_failures.window_start > now() - make_interval(secs => $2)
				THEN login_failures.window_start ELSE now() END
		RETURNING subject, failures, window_start`, subjects, period.Seconds())
	if err != nil {
		return nil, nil, mapError(err, "")
	}
	defer rows.Close()
	counts, starts := make([]int, len(subjects)), make([]time.Time, len(subjects))
	for rows.Next() {
		var subject string
		var n int
		var start time.Time
		if err := rows.Scan(&subject, &n, &start); err != nil {
			return nil, nil, mapError(err, "")
		}
		for i, s := range subjects {
			if s == subject {
				counts[i], starts[i] = n, start
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, mapError(err, "")
	}
	return counts, starts, nil
}
