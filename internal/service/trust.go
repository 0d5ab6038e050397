package service

import (
	"sync/atomic"
	"time"
)

// cacheTrust decides, for every cache of the services (keys, policies,
// sealed credentials), how long an entry may be used.
//
// While the invalidation listener is connected, an entry is fresh for the
// TTL: a change anywhere reaches it as a notification within milliseconds,
// and the TTL is only a safety net. While the listener is down,
// notifications may be missed, so nothing cached is fresh: every use reloads
// from the database, and a revoke made on another replica is honoured at
// once (issue: revocation never lags a lost listener).
//
// When a reload fails because the database cannot be reached, an entry
// fetched within the outage grace stands in: calls go on working through an
// outage on what was known, and no revoke can be made meanwhile (the API
// needs the database too). The one change that can be missed is a revoke
// committed in the instant before the outage whose notification never
// reached this replica: such a key works until the database answers again,
// at most the grace (OUTAGE_GRACE, 10 minutes by default; 0 turns serving
// through outages off).
type cacheTrust struct {
	ttl, grace time.Duration
	now        func() time.Time
	listening  atomic.Bool
	// failedAt is when a reload last failed to reach the database (Unix
	// nanoseconds); for a second after it, loads do not wait on the
	// database again but use what stands in.
	failedAt atomic.Int64
}

// retryAfterFailure is how long loads skip a database that just failed.
const retryAfterFailure = time.Second

// Fresh reports whether an entry fetched then may be used without a reload.
func (t *cacheTrust) Fresh(fetched time.Time) bool {
	return t.listening.Load() && t.now().Sub(fetched) < t.ttl
}

// Revalidate reports whether an entry past its TTL may be answered while
// one reload runs: while the listener is connected, within a second TTL.
// The TTL is only a safety net then (a change arrives as a notification,
// which drops the entry), so answering it a reload's time longer changes
// nothing a notification would have told; and a busy key's callers never
// wait on its reload, which on a slow network stalled every call at each
// TTL (issue #25). With the listener down nothing is fresh and nothing is
// revalidated in the background: every use reloads, and waits for it.
func (t *cacheTrust) Revalidate(fetched time.Time) bool {
	return t.listening.Load() && t.now().Sub(fetched) < 2*t.ttl
}

// Stale reports whether an entry fetched then may stand in for a reload that
// could not reach the database.
func (t *cacheTrust) Stale(fetched time.Time) bool {
	return t.grace > 0 && t.now().Sub(fetched) < t.grace
}

// Failed records that a reload could not reach the database.
func (t *cacheTrust) Failed() { t.failedAt.Store(t.now().UnixNano()) }

// SkipReload reports whether a reload should not even be tried: the
// database failed a moment ago and an entry may stand in.
func (t *cacheTrust) SkipReload(fetched time.Time) bool {
	return t.Stale(fetched) && t.now().Sub(time.Unix(0, t.failedAt.Load())) < retryAfterFailure
}
