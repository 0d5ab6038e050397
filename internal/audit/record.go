package audit

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"

	"github.com/mcpgate/mcpgate"
)

// scanRecords calls fn with each intact record of r in [off, end), in order,
// and the offset just past it. A damaged stretch (a torn record, or bytes a
// crash left half-written) is skipped: the scan resumes at the next offset
// where an intact record starts, so that one torn write never hides the
// records after it. It returns the end of the last intact record and how
// many damaged stretches it skipped (a torn end counts as one); it stops at
// the first error fn returns, or a read error.
func scanRecords(r io.ReaderAt, off, end int64, fn func(ev mcpgate.AuditEvent, next int64) error) (int64, int, error) {
	rd := &window{r: r, end: end}
	last, damaged := off, 0
	for off < end {
		ev, n, err := rd.record(off)
		if errors.Is(err, errDamaged) {
			damaged++
			if off = rd.resync(off + 1); off >= end {
				break
			}
			continue
		}
		if err != nil {
			return last, damaged, err
		}
		off += n
		last = off
		if err := fn(ev, off); err != nil {
			return last, damaged, err
		}
	}
	return last, damaged, nil
}

var errDamaged = errors.New("damaged record")

// window reads a file through a buffer of about a MiB, so a scan costs a
// read per MiB rather than two per record, and a resync after damage probes
// each offset in memory.
type window struct {
	r    io.ReaderAt
	end  int64
	base int64
	buf  []byte
}

const windowSize = 1 << 20

// bytes returns the n bytes at off, or io.ErrUnexpectedEOF past end.
func (w *window) bytes(off int64, n int) ([]byte, error) {
	if off+int64(n) > w.end {
		return nil, io.ErrUnexpectedEOF
	}
	if off >= w.base && off+int64(n) <= w.base+int64(len(w.buf)) {
		return w.buf[off-w.base : off-w.base+int64(n)], nil
	}
	size := int(min(int64(max(n, windowSize)), w.end-off))
	if cap(w.buf) < size {
		w.buf = make([]byte, size)
	}
	w.buf = w.buf[:size]
	m, err := w.r.ReadAt(w.buf, off)
	w.base, w.buf = off, w.buf[:m]
	if m < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return w.buf[:n], nil
}

// record decodes the record at off and returns it with its length on disk;
// a record that is torn, fails its checksum or is not an event is
// errDamaged.
func (w *window) record(off int64) (mcpgate.AuditEvent, int64, error) {
	var ev mcpgate.AuditEvent
	// The header and the payload's first byte, so that a resync probing
	// garbage rejects most offsets without reading a payload.
	head, err := w.bytes(off, 9)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return ev, 0, errDamaged
	} else if err != nil {
		return ev, 0, err
	}
	n := binary.BigEndian.Uint32(head[:4])
	sum := binary.BigEndian.Uint32(head[4:8])
	if n < 2 || n > maxRecord || head[8] != '{' {
		return ev, 0, errDamaged
	}
	payload, err := w.bytes(off+8, int(n))
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return ev, 0, errDamaged
	} else if err != nil {
		return ev, 0, err
	}
	if crc32.Checksum(payload, crcTable) != sum || json.Unmarshal(payload, &ev) != nil {
		return ev, 0, errDamaged
	}
	return ev, int64(8 + n), nil
}

// resync returns the first offset from off on where an intact record
// starts, or end.
func (w *window) resync(off int64) int64 {
	for ; off+9 < w.end; off++ {
		if _, _, err := w.record(off); err == nil {
			return off
		}
	}
	return w.end
}
