package lastused_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/lastused"
)

type writes struct {
	mu      sync.Mutex
	batches []map[string]time.Time
	fail    bool
}

func (w *writes) write(_ context.Context, used map[string]time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail {
		return errors.New("database away")
	}
	w.batches = append(w.batches, used)
	return nil
}

// Marks are written in one batch, the latest time per id, and once more at
// Close; a failed write is reported with its size.
func TestRecorder(t *testing.T) {
	w := &writes{}
	now := time.Unix(100, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r := lastused.New(lastused.Options{Write: w.write, Every: time.Hour, Now: clock})
	r.Mark("a")
	mu.Lock()
	now = time.Unix(200, 0)
	mu.Unlock()
	r.Mark("a")
	r.Mark("b")
	r.Close()
	if len(w.batches) != 1 || len(w.batches[0]) != 2 || !w.batches[0]["a"].Equal(time.Unix(200, 0)) {
		t.Fatalf("batches = %v, want one with a at 200 and b", w.batches)
	}

	w = &writes{fail: true}
	var failed int
	r = lastused.New(lastused.Options{Write: w.write, Every: time.Hour, OnError: func(_ error, n int) { failed = n }})
	r.Mark("a")
	r.Close()
	if failed != 1 {
		t.Fatalf("OnError saw %d marks, want 1", failed)
	}
}
