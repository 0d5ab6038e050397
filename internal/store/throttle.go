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
