package reseal

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/vault"
)

// Defaults for Options.
const (
	// DefaultBatch is how many credentials one batch re-seals.
	DefaultBatch = 100
	// DefaultSettle covers a replica that has not loaded the new term yet
	// (it reloads every vault.DefaultRefreshInterval) and keeps sealing
	// new credentials under the old one meanwhile.
	DefaultSettle = vault.DefaultRefreshInterval + 30*time.Second
	// DefaultPoll is how often Watch looks at the keyring's active term.
	// Reading it is an atomic load, no I/O.
	DefaultPoll = time.Second
	// DefaultInterval is how often Watch sweeps even when the term did not
	// change, for credentials written late under an old term by a replica
	// that refreshed after the settle period, and for a pass that failed.
	DefaultInterval = 10 * time.Minute
	// DefaultWatchPause is Watch's pause between batches: the gateway
	// re-seals while it serves, so it leaves the database room.
	DefaultWatchPause = 100 * time.Millisecond
)

// lockedWait is how long Run waits when the only rows left are locked by a
// write in flight or by another run: both finish in a moment.
const lockedWait = 200 * time.Millisecond

// Options tunes Run and Watch. The zero value means every default.
type Options struct {
	// Batch is how many credentials ResealOld handles between two pauses.
	Batch int
	// Pause is the pause between batches, to spare a busy database.
	Pause time.Duration
	// Settle: once no credential is left under an older term, Run keeps
	// sweeping until the active term is this old, so that credentials
	// saved meanwhile by replicas still sealing with the previous term are
	// moved too. Zero means no settling (Run returns at once); Watch
	// defaults it to DefaultSettle.
	Settle time.Duration
	// Progress, when set, is called after each batch that moved or skipped
	// rows, and when Run starts waiting for the term to settle.
	Progress func(Report)

	// Poll is how often Watch checks the active term (default DefaultPoll).
	Poll time.Duration
	// Interval is how often Watch sweeps anyway, and the longest it waits
	// before retrying a failed pass (default DefaultInterval).
	Interval time.Duration
}

func (o Options) withDefaults() Options {
	if o.Batch < 1 {
		o.Batch = DefaultBatch
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	return o
}

// Report says how far a run got.
type Report struct {
	// Term is the active term the rows were moved to (the newest one seen:
	// Run follows terms added while it runs).
	Term uint32
	// Moved counts the rows this run re-sealed.
	Moved int
	// Left counts the rows still under an older term, Failed ones
	// included, as of the last batch.
	Left int64
	// Failed lists the rows whose secret did not open (damaged, or sealed
	// under a deleted term): a connection's id, or "totp_factors:<id>" for
	// a TOTP secret. They were left as they are; a later run tries them
	// again.
	Failed []string
	// Settling, in a progress report, is how much longer Run sweeps for
	// rows written under the previous term before it returns.
	Settling time.Duration
}

// Run re-seals every credential under a term older than the keyring's
// active one, in batches of o.Batch rows with o.Pause between them, and
// returns once none is left (then waits for the term to settle, see
// Options.Settle). Before each batch it reloads the keys, so that a term
// added meanwhile (another replica rotated) becomes the target.
//
// Rows that do not open are skipped and listed in Report.Failed; Run does
// not fail because of them. It returns an error only when the database or
// the key store does, or ctx ends; the report then says what was done, and
// running it again finishes the job.
func Run(ctx context.Context, db *store.DB, k *vault.Keyring, o Options) (Report, error) {
	o = o.withDefaults()
	var rep Report
	for {
		if err := k.Refresh(ctx); err != nil {
			return rep, err
		}
		n, bad, err := db.ResealOld(ctx, k, o.Batch, rep.Failed)
		rep.Moved += n
		rep.Failed = append(rep.Failed, bad...)
		if err != nil {
			return rep, err
		}
		rep.Term = k.ActiveTerm()
		if rep.Left, err = db.CountSealedBelow(ctx, rep.Term); err != nil {
			return rep, err
		}
		wait := o.Pause
		switch {
		case n > 0 || len(bad) > 0:
			report(o, rep)
		case rep.Left > int64(len(rep.Failed)):
			// ResealOld found nothing it could lock, yet rows are left:
			// another run or a credential being saved holds them.
			wait = max(wait, lockedWait)
		default:
			until := time.Until(termCreated(k, rep.Term).Add(o.Settle))
			if until <= 0 {
				return rep, nil
			}
			rep.Settling = until
			report(o, rep)
			rep.Settling = 0
			// Sweep every 2s, and at once when the term changes again.
			same := func() bool { return k.ActiveTerm() == rep.Term }
			if err := sleepWhile(ctx, min(until, 2*time.Second), o.Poll, same); err != nil {
				return rep, err
			}
			continue
		}
		if err := sleepWhile(ctx, wait, wait, nil); err != nil {
			return rep, err
		}
	}
}

func report(o Options, rep Report) {
	if o.Progress != nil {
		rep.Failed = slices.Clone(rep.Failed)
		o.Progress(rep)
	}
}

// sleepWhile waits d, or until ctx ends (returning its error), or until
// cond, checked every poll, turns false. A nil cond is always true.
func sleepWhile(ctx context.Context, d, poll time.Duration, cond func() bool) error {
	if d <= 0 {
		return ctx.Err()
	}
	end := time.NewTimer(d)
	defer end.Stop()
	check := time.NewTicker(max(poll, time.Millisecond))
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end.C:
			return nil
		case <-check.C:
			if cond != nil && !cond() {
				return nil
			}
		}
	}
}

// termCreated returns when term was created, or the zero time if the
// keyring does not hold it (then there is nothing to wait for).
func termCreated(k *vault.Keyring, term uint32) time.Time {
	for _, t := range k.Terms() {
		if t.Term == term {
			return t.CreatedAt
		}
	}
	return time.Time{}
}

// Watch runs Run in the background until ctx ends, and then returns
// ctx's error: once at start-up (for rows left by an interrupted rotation),
// whenever the keyring's active term changes, every o.Interval, and after a
// failed pass with a back-off that grows from o.Poll to o.Interval. Unset
// o.Settle defaults to DefaultSettle and o.Pause to DefaultWatchPause. It
// logs how many rows each pass moved and the ids of the connections that did
// not open (when that list changes), never key material. Every replica may
// run it at once.
func Watch(ctx context.Context, db *store.DB, k *vault.Keyring, log *slog.Logger, o Options) error {
	o = o.withDefaults()
	if o.Settle == 0 {
		o.Settle = DefaultSettle
	}
	if o.Pause == 0 {
		o.Pause = DefaultWatchPause
	}
	var (
		done       uint32    // the active term at the end of the last pass; 0: none yet
		next       time.Time // when to sweep even if the term stays done
		backoff    = o.Poll
		logged     int // rows of the current pass already logged
		lastFailed []string
	)
	// note logs a pass's outcome once it has nothing left to move (when it
	// starts settling, which may last minutes, and when it ends): the rows
	// moved since the last note, and the rows that did not open if that list
	// changed since the last complete pass.
	note := func(rep Report, complete bool) {
		if rep.Moved > logged {
			log.Info("credentials re-sealed", "term", rep.Term, "moved", rep.Moved-logged, "left", rep.Left)
			logged = rep.Moved
		}
		if !complete {
			return
		}
		slices.Sort(rep.Failed)
		if !slices.Equal(rep.Failed, lastFailed) {
			lastFailed = rep.Failed
			if len(rep.Failed) > 0 {
				log.Error("credentials that do not open were not re-sealed; ask their workspaces to store them again",
					"term", rep.Term, "count", len(rep.Failed), "connection_ids", rep.Failed)
			}
		}
	}
	progress := o.Progress
	o.Progress = func(rep Report) {
		if rep.Settling > 0 {
			note(rep, true)
		}
		if progress != nil {
			progress(rep)
		}
	}
	tick := time.NewTicker(o.Poll)
	defer tick.Stop()
	for {
		if k.ActiveTerm() != done || !time.Now().Before(next) {
			logged = 0
			rep, err := Run(ctx, db, k, o)
			if ctx.Err() != nil {
				return ctx.Err() // shutting down: what was done stays done
			}
			note(rep, err == nil)
			if err != nil {
				// Retried after the back-off, not at the next poll: the
				// term it failed on counts as seen.
				log.Warn("re-seal credentials", "err", err, "retry_in", backoff)
				done, next = k.ActiveTerm(), time.Now().Add(backoff)
				backoff = min(2*backoff, o.Interval)
			} else {
				// rep.Term, not ActiveTerm(): a term added since Run's last
				// look must still trigger a pass.
				done, next, backoff = rep.Term, time.Now().Add(o.Interval), o.Poll
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
