package password

import (
	"context"
	"errors"
	"runtime"
	"time"

	"golang.org/x/sync/semaphore"
)

// ErrBusy is returned when a hash could not start in time because the
// memory budget for hashing was taken: the caller should ask the client to
// retry shortly (503 with Retry-After), not fail as if the server broke.
var ErrBusy = errors.New("password hashing is at capacity")

// Limiter bounds the memory that concurrent argon2 hashes may take. Each
// hash takes Params.Memory KiB (64 MiB by default) for its whole run, so an
// unbounded number of concurrent sign-ups or logins is an unauthenticated
// way to exhaust the server's memory. A hash waits, first come first served,
// up to the limiter's wait for its share of the budget, then gives up with
// ErrBusy.
type Limiter struct {
	budget int64 // KiB
	wait   time.Duration
	sem    *semaphore.Weighted
}

// NewLimiter returns a limiter letting at most budgetKiB of hashing memory
// be in use, and hashes queue for up to wait.
func NewLimiter(budgetKiB int64, wait time.Duration) *Limiter {
	return &Limiter{budget: budgetKiB, wait: wait, sem: semaphore.NewWeighted(budgetKiB)}
}

// Budget returns the limiter's memory budget in bytes.
func (l *Limiter) Budget() int64 { return l.budget << 10 }

// DefaultLimiter is the process's limiter, shared by Hash and Verify. Being
// one per process is the point: the memory it protects is the process's.
// Hashing is CPU-bound and each default hash uses two cores (Threads), so
// more hashes at once than half the cores add memory, not throughput: the
// budget is that many default hashes (at least 2, at most 8: 128 to 512
// MiB). A hash waits up to 5 s for its turn.
var DefaultLimiter = NewLimiter(int64(min(max(runtime.GOMAXPROCS(0)/int(Default.Threads), 2), 8))*int64(Default.Memory),
	5*time.Second)

// RetryAfter is how long a client refused with ErrBusy should wait, in
// seconds.
const RetryAfter = 5

// do runs fn with memKiB of the budget held.
func (l *Limiter) do(ctx context.Context, memKiB uint32, fn func()) error {
	w := min(int64(memKiB), l.budget)
	ctx, cancel := context.WithTimeout(ctx, l.wait)
	defer cancel()
	if err := l.sem.Acquire(ctx, w); err != nil {
		return ErrBusy
	}
	defer l.sem.Release(w)
	fn()
	return nil
}
