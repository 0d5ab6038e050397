package audit

import (
	"bufio"
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
// the database at shutdown, and gives them back at the next start: a clean
// stop loses no event, whatever the database does.
//
// The file is append-only. Each record is a 4-byte big-endian length, the
// CRC-32C of the payload, and the event as JSON; appends are fsynced in
// groups (one fsync per Append). A record torn by a crash fails its checksum
// and ends the replay there; it is counted, never half-read. Replay records
// how far it got in a second small file after every batch it inserted, so a
// crash during a replay does not insert the same events twice.
type Spool struct {
	path     string
	maxBytes int64

	mu   sync.Mutex
	f    *os.File
	size int64
}

// SpoolFile is the spool's name inside its directory.
const SpoolFile = "audit-spool.log"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// OpenSpool opens (creating it if needed) the spool in dir, bounded to
// maxBytes. It fails when dir is not writable: the caller then runs without
// a spool and says so.
func OpenSpool(dir string, maxBytes int64) (*Spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit spool: %w", err)
	}
	path := filepath.Join(dir, SpoolFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
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
	return &Spool{path: path, maxBytes: maxBytes, f: f, size: st.Size()}, nil
}

// Path is the spool file's path.
func (s *Spool) Path() string { return s.path }

// Size is the spool file's size in bytes.
func (s *Spool) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

var errSpoolInUse = errors.New("in use by another gateway with the same DATA_DIR")

// ErrSpoolFull is returned by Append for the events that did not fit.
var ErrSpoolFull = errors.New("audit spool is full")

// Append writes events and fsyncs them. It returns how many were written:
// all of them, or fewer with ErrSpoolFull (or a write error).
func (s *Spool) Append(events []mcpgate.AuditEvent) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var buf []byte
	n := 0
	for _, ev := range events {
		payload, err := json.Marshal(ev)
		if err != nil {
			return n, fmt.Errorf("audit spool: encode event: %w", err)
		}
		if s.size+int64(len(buf))+8+int64(len(payload)) > s.maxBytes {
			break
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(payload)))
		buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(payload, crcTable))
		buf = append(buf, payload...)
		n++
	}
	if len(buf) > 0 {
		if _, err := s.f.Write(buf); err != nil {
			return 0, fmt.Errorf("audit spool: %w", err)
		}
		if err := s.f.Sync(); err != nil {
			return 0, fmt.Errorf("audit spool: %w", err)
		}
		s.size += int64(len(buf))
	}
	if n < len(events) {
		return n, ErrSpoolFull
	}
	return n, nil
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
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, s.progressPath())
}

// ReplayResult says what a replay did.
type ReplayResult struct {
	// Replayed events were written to the database.
	Replayed int
	// Damaged is 1 when the file ended in a torn or damaged record (a crash
	// while it was written); the replay stopped there.
	Damaged int
}

// Replay writes the spooled events to sink in batches, then empties the
// spool. On an error nothing is lost: what was inserted is remembered, and
// the rest stays for the next replay.
func (s *Spool) Replay(ctx context.Context, sink Sink, batchSize int) (ReplayResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var res ReplayResult
	off := s.readProgress()
	if off > s.size {
		off = 0
	}
	r, err := os.Open(s.path)
	if err != nil {
		return res, fmt.Errorf("audit spool: %w", err)
	}
	defer r.Close()
	if _, err := r.Seek(off, io.SeekStart); err != nil {
		return res, fmt.Errorf("audit spool: %w", err)
	}
	br := bufio.NewReader(r)
	batch := make([]mcpgate.AuditEvent, 0, batchSize)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := sink.InsertAudit(ctx, batch); err != nil {
			return err
		}
		res.Replayed += len(batch)
		batch = batch[:0]
		return s.writeProgress(off)
	}
	for {
		ev, n, err := readRecord(br)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			res.Damaged = 1
			break
		}
		batch = append(batch, ev)
		off += n
		if len(batch) >= batchSize {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	if err := flush(); err != nil {
		return res, err
	}
	// Everything is in the database: start an empty spool.
	if err := s.f.Truncate(0); err != nil {
		return res, fmt.Errorf("audit spool: %w", err)
	}
	s.size = 0
	if err := os.Remove(s.progressPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, fmt.Errorf("audit spool: %w", err)
	}
	return res, s.f.Sync()
}

// readRecord reads one record and returns its event and length on disk. A
// clean end of file is io.EOF; a torn or damaged record is another error.
func readRecord(r *bufio.Reader) (mcpgate.AuditEvent, int64, error) {
	var ev mcpgate.AuditEvent
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return ev, 0, io.EOF
		}
		return ev, 0, errors.New("torn record header")
	}
	n := binary.BigEndian.Uint32(head[:4])
	if n > 16<<20 {
		return ev, 0, errors.New("record too long")
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return ev, 0, errors.New("torn record")
	}
	if crc32.Checksum(payload, crcTable) != binary.BigEndian.Uint32(head[4:]) {
		return ev, 0, errors.New("record checksum mismatch")
	}
	if err := json.Unmarshal(payload, &ev); err != nil {
		return ev, 0, errors.New("record not an event")
	}
	return ev, int64(8 + n), nil
}
