package audit

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/mcpgate/mcpgate"
)

// A Spool keeps audit events on local disk when they cannot be written to
// the database (at shutdown, and during a long outage), and gives them back
// when it takes them again: a clean stop loses no event it could spool, and
// says exactly how many it could not.
//
// The file holds records: a 4-byte big-endian length, the CRC-32C of the
// payload, and the event as JSON. Appends write at the end of the last
// intact record and fsync once per Append; an Append counts only the whole
// records that reached the disk, and cuts off a torn one (a short write on a
// full disk), so what it reports is what a replay finds. A torn or damaged
// stretch left by a crash is skipped on replay, counted, and never half-read;
// the records after it are replayed.
//
// Each event carries an EventID that the database stores once, so a replay
// may write an event again without harm: progress is recorded after each
// batch only to save work, and a replay that cannot record it (a full disk)
// goes on.
type Spool struct {
	path     string
	maxBytes int64

	mu sync.Mutex
	f  spoolFile
	// size is the end of the last intact record: appends write there, and
	// replays read up to it. Bytes past it (a torn write not yet cut off)
	// are never read and are overwritten by the next append.
	size int64
	// events counts the intact records not yet replayed.
	events int
	// damaged counts the damaged stretches the last scan cut off the end,
	// reported by the next replay.
	damaged int
	// full is set while the last append did not take every event (the
	// bound, or the disk refused).
	full bool
	// saveProgress records how far a replay got; tests replace it.
	saveProgress func(off int64) error
}

// spoolFile is the part of *os.File the spool uses; tests wrap it to inject
// short writes and failing syncs.
type spoolFile interface {
	io.ReaderAt
	WriteAt(b []byte, off int64) (int, error)
	Truncate(size int64) error
	Sync() error
	Close() error
}

// SpoolFile is the spool's name inside its directory.
const SpoolFile = "audit-spool.log"

// maxRecord bounds one record's payload.
const maxRecord = 16 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// OpenSpool opens (creating it if needed) the spool in dir, bounded to
// maxBytes. It fails when dir is not writable: the caller then runs without
// a spool and says so. It reads the file through once, to count the events
// waiting and to cut off a torn end; it needs no free space to open.
func OpenSpool(dir string, maxBytes int64) (*Spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit spool: %w", err)
	}
	path := filepath.Join(dir, SpoolFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit spool: %w", err)
	}
	if err := lockFile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("audit spool %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("audit spool: %w", err)
	}
	s := &Spool{path: path, maxBytes: maxBytes, f: f}
	s.saveProgress = s.writeProgress
	off := s.readProgress()
	if off > st.Size() {
		off = 0
	}
	end, damaged, err := scanRecords(f, off, st.Size(), func(mcpgate.AuditEvent, int64) error { s.events++; return nil })
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("audit spool: %w", err)
	}
	s.size = end
	s.damaged = damaged
	if end < st.Size() {
		// A torn end (the process died in an append): cut it off, so the
		// file holds only whole records. If that fails the bytes stay past
		// size, where nothing reads them.
		_ = f.Truncate(end)
	}
	return s, nil
}

// Path is the spool file's path.
func (s *Spool) Path() string { return s.path }

// Size is the spool file's size in bytes: up to the end of the last intact
// record.
func (s *Spool) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// Events is the number of events in the spool waiting to be replayed.
func (s *Spool) Events() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events
}

// Free is the space left on the spool's disk, in bytes (-1 when unknown):
// what a full disk at start looks like, before any append fails.
func (s *Spool) Free() int64 { return diskFree(filepath.Dir(s.path)) }

// Full reports whether the last Append did not take every event: the spool
// reached its bound or the disk is full. It clears once an Append takes a
// whole batch or a replay empties the spool.
func (s *Spool) Full() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full
}

var errSpoolInUse = errors.New("in use by another gateway with the same DATA_DIR")

// ErrSpoolFull is returned by Append for the events that did not fit.
var ErrSpoolFull = errors.New("audit spool is full")

// Append writes events and fsyncs them. It returns how many are on disk,
// exactly: all of them, or the first n with ErrSpoolFull (the bound) or the
// write's error (a full disk; the whole records written before the disk
// refused are kept and counted, the torn one cut off). Events it did not
// take are the caller's to keep or count as lost.
func (s *Spool) Append(events []mcpgate.AuditEvent) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf, ends, err := s.encode(events)
	n, werr := s.writeRecords(buf, ends)
	switch {
	case werr != nil:
		err = werr
	case err == nil && n < len(events):
		err = ErrSpoolFull
	}
	s.full = n < len(events)
	return n, err
}

// encode encodes the events that fit under maxBytes, and where each record
// ends in buf.
func (s *Spool) encode(events []mcpgate.AuditEvent) (buf []byte, ends []int, err error) {
	for _, ev := range events {
		payload, err := json.Marshal(ev)
		if err != nil {
			return buf, ends, fmt.Errorf("audit spool: encode event: %w", err)
		}
		if s.size+int64(len(buf))+8+int64(len(payload)) > s.maxBytes {
			return buf, ends, ErrSpoolFull
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(payload)))
		buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(payload, crcTable))
		buf = append(buf, payload...)
		ends = append(ends, len(buf))
	}
	return buf, ends, nil
}

// writeRecords writes buf at the end of the spool and fsyncs it, and
// returns how many whole records reached the disk. Each record is its own
// write: when the disk fills, os.File.WriteAt reports an error without the
// bytes its last system call did write, so only a write that succeeded is
// known to hold its record, and the failed one is cut off whatever part of
// it landed.
func (s *Spool) writeRecords(buf []byte, ends []int) (int, error) {
	whole, kept := 0, 0
	var werr error
	for _, end := range ends {
		if _, werr = s.f.WriteAt(buf[kept:end], s.size+int64(kept)); werr != nil {
			_ = s.f.Truncate(s.size + int64(kept)) // if this fails, nothing reads past size
			break
		}
		whole, kept = whole+1, end
	}
	if whole > 0 {
		if err := s.f.Sync(); err != nil {
			// What reached the disk is unknown: count none of it, and cut
			// it off so that a later replay does not find it either.
			_ = s.f.Truncate(s.size)
			return 0, fmt.Errorf("audit spool: %w", err)
		}
	}
	s.size += int64(kept)
	s.events += whole
	if werr != nil {
		return whole, fmt.Errorf("audit spool: %w", werr)
	}
	return whole, nil
}

// Close closes the file.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.f.Close()
}

func (s *Spool) progressPath() string { return s.path + ".done" }

// readProgress returns the offset up to which events were already replayed.
func (s *Spool) readProgress() int64 {
	b, err := os.ReadFile(s.progressPath())
	if err != nil {
		return 0
	}
	off, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || off < 0 {
		return 0
	}
	return off
}

func (s *Spool) writeProgress(off int64) error {
	tmp := s.progressPath() + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(strconv.FormatInt(off, 10)); err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, s.progressPath())
}

// ReplayResult says what a replay did.
type ReplayResult struct {
	// Replayed events were written to the database (events it already
	// held are ignored there, so a replay repeated after a crash writes
	// none twice).
	Replayed int
	// Damaged is the number of torn or damaged stretches of the file (a
	// crash while it was written) that were skipped; the intact records
	// around them were replayed.
	Damaged int
	// ProgressErr, when set, is why the replay could not record how far it
	// got (a full disk): harmless, since a replay repeated from the start
	// writes nothing twice.
	ProgressErr error
}

// Replay writes the spooled events to sink in batches, then empties the
// spool. On an error nothing is lost: what was inserted is remembered (or
// would be ignored by the database when written again), and the rest stays
// for the next replay. It needs no free disk space.
func (s *Spool) Replay(ctx context.Context, sink Sink, batchSize int) (ReplayResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := ReplayResult{Damaged: s.damaged}
	off := s.readProgress()
	if off > s.size {
		off = 0
	}
	batch := make([]mcpgate.AuditEvent, 0, batchSize)
	flush := func(next int64) error {
		if len(batch) == 0 {
			return nil
		}
		if err := sink.InsertAudit(ctx, batch); err != nil {
			return err
		}
		res.Replayed += len(batch)
		s.events -= len(batch)
		batch = batch[:0]
		if err := s.saveProgress(next); err != nil && res.ProgressErr == nil {
			res.ProgressErr = err
		}
		return nil
	}
	_, damaged, err := scanRecords(s.f, off, s.size, func(ev mcpgate.AuditEvent, next int64) error {
		batch = append(batch, ev)
		if len(batch) < batchSize {
			return nil
		}
		return flush(next)
	})
	res.Damaged = max(res.Damaged, damaged)
	if err == nil {
		err = flush(s.size)
	}
	if err != nil {
		return res, err
	}
	return res, s.reset()
}

// reset empties the spool once everything in it is in the database. The
// progress file goes first: an offset left behind would skip the first
// records appended after this.
func (s *Spool) reset() error {
	if err := os.Remove(s.progressPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("audit spool: %w", err)
	}
	if err := s.f.Truncate(0); err != nil {
		return fmt.Errorf("audit spool: %w", err)
	}
	s.size, s.events, s.damaged, s.full = 0, 0, 0, false
	return s.f.Sync()
}
