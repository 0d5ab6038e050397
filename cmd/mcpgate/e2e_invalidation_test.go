package main

// Waiting for a change made on one replica to reach the others, without a
// deadline on how fast it must: each replica applies invalidations from
// PostgreSQL's LISTEN/NOTIFY one at a time, in commit order, and logs each
// once its caches dropped what it names ("invalidation applied", at debug).
// A test that made a change sends a fence, a notification that names no
// workspace, and waits for every replica to log it: by then each has applied
// the change's own notification, which committed first.

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// appliedMsg is the log message of an applied invalidation (internal/app).
const appliedMsg = `"msg":"invalidation applied"`

// logWatch is a replica's log writer that wakes the tests waiting for a
// line containing a given text.
type logWatch struct {
	mu      sync.Mutex
	partial []byte // the line being written
	waits   []*logWait
}

type logWait struct {
	match func(line []byte) bool
	done  chan struct{}
}

func (w *logWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := w.partial[:i]
		w.waits = slices.DeleteFunc(w.waits, func(lw *logWait) bool {
			if lw.match(line) {
				close(lw.done)
				return true
			}
			return false
		})
		w.partial = w.partial[:copy(w.partial, w.partial[i+1:])]
	}
	return len(p), nil
}

// await returns a channel closed once a line that match accepts is written
// after this call.
func (w *logWatch) await(match func(line []byte) bool) <-chan struct{} {
	lw := &logWait{match: match, done: make(chan struct{})}
	w.mu.Lock()
	w.waits = append(w.waits, lw)
	w.mu.Unlock()
	return lw.done
}

// appliedWait is how long a replica may take to apply a fence before the
// test gives up: not a measure of speed (nothing asserts how fast), only a
// bound on a listener that is gone.
const appliedWait = time.Minute

// waitApplied returns once each replica in rs (every replica of e when rs is
// empty) has applied every invalidation committed before the call: it sends
// a fence and waits until each has logged it. A listener that reconnects
// meanwhile may miss the fence, but then drops everything it caches after
// the change committed, and logs that instead (an invalidation of every
// kind and workspace); either line ends the wait.
func (e *e2eEnv) waitApplied(t *testing.T, rs ...*e2eReplica) {
	t.Helper()
	if len(rs) == 0 {
		rs = e.replicas
	}
	id := "e2e-fence-" + testutil.RandomHex(8)
	fence := []byte(`"workspace_id":"` + id + `"`)
	flush := []byte(`"kind":"","workspace_id":""`)
	waits := make([]<-chan struct{}, len(rs))
	for i, r := range rs {
		if r.watch == nil {
			t.Fatalf("replica %s has no log watch", r.url)
		}
		waits[i] = r.watch.await(func(line []byte) bool {
			return bytes.Contains(line, []byte(appliedMsg)) && (bytes.Contains(line, fence) || bytes.Contains(line, flush))
		})
	}
	// A fence is a keys invalidation of a workspace that does not exist:
	// it drops nothing.
	payload := store.InvalidateKeys + ":" + id
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.dbConn(t).Exec(ctx, `SELECT pg_notify($1, $2)`, store.InvalidationChannel, payload); err != nil {
		t.Fatalf("send a fence: %v", err)
	}
	for i, w := range waits {
		select {
		case <-w:
		case <-time.After(appliedWait):
			t.Fatalf("replica %s never applied the fence (is its invalidation listener running? the replica must log JSON at debug level)", rs[i].url)
		}
	}
}
