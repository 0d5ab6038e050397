// Package audit writes audit events to the database off the call path: a
// tool call hands its event to a bounded queue and returns; background
// loops write batches, retrying while the database is away, and Close drains
// the queue, so a clean shutdown loses nothing. With a spool, a long outage
// does not fill the queue either: once the database is away and the queue
// half full, batches go to the spool on local disk, and they are written to
// the database as soon as it takes a batch again. Every event gets an id
// when recorded, which the store keeps once, so writing a batch again (a
// retry, a replay) never stores an event twice; the counts of what was
// spooled and what was lost are exact (SpoolStats). It imports only mcpgate.
//
// Imports from this module: mcpgate.
package audit

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate"
)

// Sink stores a batch of events.
type Sink interface {
	InsertAudit(ctx context.Context, events []mcpgate.AuditEvent) error
}

// Options configure a Writer.
type Options struct {
	Sink   Sink
	Logger *slog.Logger
	// QueueSize bounds the events waiting to be written (default 10,000).
	// When full, Record waits: the audit log is not allowed to drop entries.
	QueueSize int
	// BatchSize is the most events written at once (default 500).
	BatchSize int
	// FlushEvery is the longest an event waits for a batch (default 200 ms).
	FlushEvery time.Duration
	// Writers is how many batches may be in flight at once (default 2). One
	// writer is bound by the round trip of each batch; a second fills and
	// sends the next while the first commits. Measured with make bench on 2
	// busy cores: 1 writer 11k rows/s, 2 18k, 4 28k; 2 leaves most of the
	// store's pool of 8 connections to requests while the queue is full.
	// Events carry their own time, so the order batches commit in does not
	// matter.
	Writers int
	// Spool, when set, takes the events the database does not: at shutdown
	// (a clean stop then loses none; they are replayed at the next start),
	// and during an outage once the queue is half full (so the gateway can
	// serve through a long outage without refusing calls for want of room;
	// they are replayed as soon as the database is back).
	Spool *Spool
}

// Writer queues and writes audit events.
type Writer struct {
	opts  Options
	queue chan mcpgate.AuditEvent
	done  chan struct{}
	once  sync.Once
	stop  chan struct{}
	wg    sync.WaitGroup

	spooled atomic.Int64
	lost    atomic.Int64
	// dropped counts events Record gave up on (the queue stayed full until
	// the call's context ended); spooledTotal every event this process put
	// in the spool.
	dropped      atomic.Int64
	spooledTotal atomic.Int64
	// down is set while the database refuses writes; outageSpooled counts
	// the events spooled during the current outage, and replaying is set
	// while a replay of the spool runs.
	down          atomic.Bool
	outageSpooled atomic.Int64
	replaying     atomic.Bool
	replays       sync.WaitGroup
	// pressure wakes a writer waiting to retry the database when the queue
	// reaches half full during an outage, so that it spools at once
	// instead of at the end of its backoff.
	pressure chan struct{}
	// giveUpAt is when, during Close, writes without a spool stop retrying
	// (Unix nanoseconds): one deadline for the whole drain, so that a stop
	// with the database away ends in stopRetry whatever the queue holds,
	// and every event it could not write is counted.
	giveUpAt atomic.Int64
}

// stopRetry is how long Close keeps retrying the database without a spool.
const stopRetry = 10 * time.Second

// New starts a writer.
func New(opts Options) *Writer {
	if opts.QueueSize <= 0 {
		opts.QueueSize = 10000
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 500
	}
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = 200 * time.Millisecond
	}
	if opts.Writers <= 0 {
		opts.Writers = 2
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Writer{opts: opts, queue: make(chan mcpgate.AuditEvent, opts.QueueSize),
		done: make(chan struct{}), stop: make(chan struct{}), pressure: make(chan struct{}, 1)}
	for range opts.Writers {
		w.wg.Go(w.loop)
	}
	if opts.Spool != nil && opts.Spool.Size() > 0 {
		// Left by an earlier run and not written at start: the database
		// refused. The gateway serves meanwhile; the events are written
		// as soon as it takes them.
		w.replays.Go(w.replayLeftover)
	}
	go func() { w.wg.Wait(); close(w.done) }()
	return w
}

// Record queues an event. It returns at once unless the queue is full, in
// which case it waits for room or for ctx to end. It gives the event its
// EventID, which makes every later write of it (a retry, a replay of the
// spool) store it once.
func (w *Writer) Record(ctx context.Context, ev mcpgate.AuditEvent) {
	if ev.CreatedAt.IsZero() {
		ev.CreatedAt = time.Now().UTC()
	}
	if ev.EventID == "" {
		ev.EventID = newEventID()
	}
	select {
	case w.queue <- ev:
		if w.underPressure() {
			select {
			case w.pressure <- struct{}{}:
			default:
			}
		}
	default:
		select {
		case w.queue <- ev:
		case <-ctx.Done():
			w.dropped.Add(1)
			w.opts.Logger.ErrorContext(ctx, "audit queue full; event not recorded", "workspace_id", ev.WorkspaceID, "action", ev.Action)
		}
	}
}

// newEventID returns a random (version 4) UUID.
func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Len is the number of events waiting to be written.
func (w *Writer) Len() int { return len(w.queue) }

// Saturated reports whether the queue is nearly full: the database has been
// away long enough that new events may not fit. Callers that must not act
// unaudited (tool calls) refuse to act while it is.
func (w *Writer) Saturated() bool { return len(w.queue) >= cap(w.queue)*9/10 }

// Close writes every queued event and stops the loop: to the database, or,
// when it cannot take them, to the spool. Events recorded after Close are
// not written. It waits at most until ctx ends, and logs how many events
// were spooled and, if any, lost.
func (w *Writer) Close(ctx context.Context) error {
	w.once.Do(func() {
		w.giveUpAt.Store(time.Now().Add(stopRetry).UnixNano())
		close(w.stop)
	})
	select {
	case <-w.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	w.replays.Wait()
	if w.opts.Spool != nil && !w.down.Load() && w.opts.Spool.Size() > 0 {
		// Spooled during an outage and not yet replayed: the database is
		// back, so write them now rather than leave them on this replica's
		// disk until it starts again.
		w.replay(ctx)
	}
	if n := w.outageSpooled.Load(); n > 0 && w.opts.Spool.Size() > 0 {
		w.opts.Logger.Warn("audit events spooled during the database outage wait in the spool; they are written at the next start",
			"count", n, "path", w.opts.Spool.Path())
	}
	if n := w.spooled.Load(); n > 0 {
		w.opts.Logger.Warn("audit events spooled at shutdown: the database could not take them; they are written at the next start",
			"count", n, "path", w.opts.Spool.Path())
	}
	if n := w.dropped.Load(); n > 0 {
		w.opts.Logger.Error("audit events not recorded: the queue stayed full until their calls ended", "count", n)
	}
	if n := w.lost.Load(); n > 0 {
		w.opts.Logger.Error("audit events lost at shutdown: neither the database nor a spool took them", "count", n)
		return fmt.Errorf("%d audit events could not be written or spooled", n)
	}
	return nil
}

// Spooled is how many events Close put in the spool.
func (w *Writer) Spooled() int64 { return w.spooled.Load() }

// spool puts a batch the database refused at shutdown in the spool.
func (w *Writer) spool(batch []mcpgate.AuditEvent, cause error) {
	n, err := w.opts.Spool.Append(batch)
	w.spooled.Add(int64(n))
	w.spooledTotal.Add(int64(n))
	if lost := len(batch) - n; lost > 0 {
		w.lost.Add(int64(lost))
		w.opts.Logger.Warn("audit batch not spooled at shutdown", "count", lost, "err", cause, "spool_err", err)
	}
}

// underPressure reports whether batches should go to the spool instead of
// waiting for the database: it is away and the queue is half full.
func (w *Writer) underPressure() bool {
	return w.opts.Spool != nil && w.down.Load() && len(w.queue) >= cap(w.queue)/2
}

// spoolInOutage puts a batch in the spool while the database is away and
// returns what the spool did not take (it is full or failing), which goes
// on waiting for the database.
func (w *Writer) spoolInOutage(batch []mcpgate.AuditEvent) []mcpgate.AuditEvent {
	n, err := w.opts.Spool.Append(batch)
	w.spooledTotal.Add(int64(n))
	if w.outageSpooled.Add(int64(n)) == int64(n) && n > 0 {
		w.opts.Logger.Warn("the database is away and the audit queue half full: audit events go to the spool until it is back",
			"path", w.opts.Spool.Path())
	}
	if n < len(batch) {
		w.opts.Logger.Error("audit spool did not take a batch; it waits for the database", "count", len(batch)-n, "err", err)
	}
	return batch[n:]
}

// replay writes the spool to the database.
func (w *Writer) replay(ctx context.Context) {
	res, err := w.opts.Spool.Replay(ctx, w.opts.Sink, w.opts.BatchSize)
	if res.Replayed > 0 || res.Damaged > 0 {
		w.opts.Logger.Info("audit spool replayed", "count", res.Replayed, "damaged_records", res.Damaged,
			"spooled_in_outage", w.outageSpooled.Swap(0))
	}
	if res.ProgressErr != nil {
		w.opts.Logger.Warn("audit spool replay could not record its progress (is the disk full?); harmless: "+
			"a replay repeated from the start writes no event twice", "err", res.ProgressErr)
	}
	if err != nil {
		w.opts.Logger.Warn("audit spool replay stopped; the rest is replayed later", "replayed", res.Replayed, "err", err)
	}
}

// replayLeftover writes what an earlier run left in the spool, retrying
// with backoff while the database refuses, until the spool is empty or the
// writer stops.
func (w *Writer) replayLeftover() {
	backoff := time.Second
	for w.opts.Spool.Size() > 0 {
		if w.replaying.CompareAndSwap(false, true) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			go func() { // a stop ends the attempt; Close replays what it can
				select {
				case <-w.stop:
				case <-ctx.Done():
				}
				cancel()
			}()
			w.replay(ctx)
			cancel()
			w.replaying.Store(false)
		}
		select {
		case <-w.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Minute)
	}
}

// SpoolStats are the spool's exact counts, read by /metrics.
type SpoolStats struct {
	// Events and Bytes wait in the spool to be written to the database.
	Events int
	Bytes  int64
	// Spooled is every event this process put in the spool; Lost every
	// event it could neither write nor spool (at a stop without room, or
	// dropped by Record when the queue stayed full).
	Spooled, Lost int64
	// Full is set while the spool refuses events: its last append did not
	// fit (the disk is full or the bound reached).
	Full bool
	// FreeBytes is the space left on the spool's disk (-1: unknown).
	FreeBytes int64
}

// SpoolStats returns the spool's counts (zero without a spool).
func (w *Writer) SpoolStats() SpoolStats {
	st := SpoolStats{Spooled: w.spooledTotal.Load(), Lost: w.lost.Load() + w.dropped.Load(), FreeBytes: -1}
	if sp := w.opts.Spool; sp != nil {
		st.Events, st.Bytes, st.Full, st.FreeBytes = sp.Events(), sp.Size(), sp.Full(), sp.Free()
	}
	return st
}

// replaySoon starts a replay in the background when the spool holds events
// and none runs: the database has just taken a batch.
func (w *Writer) replaySoon() {
	if w.opts.Spool == nil || w.opts.Spool.Size() == 0 || !w.replaying.CompareAndSwap(false, true) {
		return
	}
	w.replays.Go(func() {
		defer w.replaying.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		w.replay(ctx)
	})
}

func (w *Writer) loop() {
	batch := make([]mcpgate.AuditEvent, 0, w.opts.BatchSize)
	tick := time.NewTicker(w.opts.FlushEvery)
	defer tick.Stop()
	for {
		select {
		case ev := <-w.queue:
			batch = append(batch, ev)
			if len(batch) < w.opts.BatchSize {
				continue
			}
		case <-tick.C:
		case <-w.stop:
			// Drain what is queued, then write it all.
			for {
				select {
				case ev := <-w.queue:
					batch = append(batch, ev)
					if len(batch) >= w.opts.BatchSize {
						w.write(batch, true)
						batch = batch[:0]
					}
					continue
				default:
				}
				break
			}
			w.write(batch, true)
			return
		}
		if len(batch) > 0 {
			w.write(batch, false)
			batch = batch[:0]
		}
	}
}

// write stores a batch, retrying with backoff while the database is away.
// While stopping it gives up at giveUpAt (about 10 s after Close), so that
// shutdown ends; with a spool it spools after one failed attempt.
func (w *Writer) write(batch []mcpgate.AuditEvent, stopping bool) {
	if len(batch) == 0 {
		return
	}
	backoff := 100 * time.Millisecond
	// spoolRefused: the spool did not take all of this batch (it is full or
	// failing), so the rest waits for the database with the usual backoff,
	// without offering it to the spool again or being woken by the queue.
	spoolRefused := false
	for {
		if !stopping && !spoolRefused && w.underPressure() {
			if batch = w.spoolInOutage(batch); len(batch) == 0 {
				return
			}
			spoolRefused = true
		}
		timeout := 10 * time.Second
		switch {
		case stopping && w.opts.Spool != nil:
			timeout = 2 * time.Second // the spool takes what the database does not
		case stopping:
			// One attempt even past the deadline: the database may be back.
			timeout = min(timeout, max(time.Until(w.stopDeadline()), 500*time.Millisecond))
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := w.opts.Sink.InsertAudit(ctx, batch)
		cancel()
		if err == nil {
			w.down.Store(false)
			w.replaySoon()
			return
		}
		w.down.Store(true)
		if !stopping && !spoolRefused && w.underPressure() {
			continue // to the spool
		}
		if stopping && w.opts.Spool != nil {
			w.spool(batch, err)
			return
		}
		if stopping && !time.Now().Before(w.stopDeadline()) {
			w.lost.Add(int64(len(batch)))
			w.opts.Logger.Warn("audit batch not written at shutdown: database unavailable", "count", len(batch), "err", err)
			return
		}
		w.opts.Logger.Warn("audit write failed; retrying", "count", len(batch), "err", err, "backoff", backoff)
		wait := time.After(backoff)
		if stopping {
			select {
			case <-wait:
			case <-time.After(time.Until(w.stopDeadline())):
			}
		} else {
			pressure := w.pressure
			if spoolRefused {
				pressure = nil
			}
			select {
			case <-wait:
			case <-pressure:
			case <-w.stop:
				stopping = true
			}
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (w *Writer) stopDeadline() time.Time { return time.Unix(0, w.giveUpAt.Load()) }
