package retryqueue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/internal/retryqueue"
)

// TestQueue_RetriesWithBackoff: a failing item is tried Attempts times,
// after waits of Backoff, 2×Backoff, …; one that succeeds stops there.
func TestQueue_RetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		tries := map[string][]time.Duration{}
		start := time.Now()
		q := retryqueue.New(retryqueue.Options{Attempts: 4, Backoff: time.Second}, func(item string, n int, last bool) bool {
			mu.Lock()
			defer mu.Unlock()
			tries[item] = append(tries[item], time.Since(start))
			if last != (n == 4) {
				t.Errorf("%s attempt %d: last = %v", item, n, last)
			}
			return item == "ok" || (item == "second" && n == 2)
		})
		for _, item := range []string{"ok", "second", "never"} {
			if err := q.Send(item); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Minute)
		q.Close(context.Background())
		want := map[string][]time.Duration{
			"ok": {0},
			// One worker: "second" starts once "ok" is done, "never" once
			// "second" is.
			"second": {0, time.Second},
			"never":  {time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second},
		}
		for item, w := range want {
			if got := tries[item]; len(got) != len(w) || !equal(got, w) {
				t.Errorf("%s tried at %v, want %v", item, got, w)
			}
		}
	})
}

// TestQueue_CloseStopsWaiting: Close waits no more between attempts: an
// item being retried gets one more try at once, and what is queued is
// tried; Send after Close is refused.
func TestQueue_CloseStopsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var tries []int
		q := retryqueue.New(retryqueue.Options{Attempts: 10, Backoff: time.Hour}, func(item int, n int, last bool) bool {
			mu.Lock()
			defer mu.Unlock()
			tries = append(tries, item*100+n)
			return false
		})
		_ = q.Send(1)
		synctest.Wait() // item 1 tried once, now waiting an hour
		_ = q.Send(2)
		start := time.Now()
		q.Close(context.Background())
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %v of fake time, want no wait", d)
		}
		// Item 1: its first try, then its last (the 10th) at once; item 2:
		// tried after the stop, and once more at most, without waiting.
		if len(tries) != 4 || tries[0] != 101 || tries[1] != 110 || tries[2] != 201 || tries[3] != 210 {
			t.Errorf("tries = %v, want [101 110 201 210]", tries)
		}
		if err := q.Send(3); !errors.Is(err, retryqueue.ErrClosed) {
			t.Errorf("Send after Close err = %v, want ErrClosed", err)
		}
	})
}

// TestQueue_Full: Send refuses an item the queue has no room for.
func TestQueue_Full(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		q := retryqueue.New(retryqueue.Options{Size: 1}, func(int, int, bool) bool { <-release; return true })
		_ = q.Send(1) // taken by the worker, which holds it
		synctest.Wait()
		if err := q.Send(2); err != nil {
			t.Fatalf("second item: %v", err)
		}
		if err := q.Send(3); !errors.Is(err, retryqueue.ErrFull) {
			t.Errorf("third item err = %v, want ErrFull", err)
		}
		close(release)
		q.Close(context.Background())
	})
}

func equal(a, b []time.Duration) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
