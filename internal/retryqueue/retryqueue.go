// Package retryqueue runs work from a bounded queue in the background: each
// item is tried, and tried again after a growing wait, until the work says
// it is done (delivered, or refused for good) or it runs out of attempts.
// Close lets the workers finish what is queued without more waiting
// between attempts (one more try at most for an item being retried). The
// outgoing mail uses it, so that no request waits on a mail server; it
// holds items in memory only (the approval webhooks, which must outlive a
// crash, wait in the database instead).
//
// Imports from this module: none.
package retryqueue

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrFull is Send's answer when the queue holds its size already.
var ErrFull = errors.New("queue full")

// ErrClosed is Send's answer after Close.
var ErrClosed = errors.New("queue closed")

// Options size a queue. Zero values take the defaults.
type Options struct {
	Size     int           // items that may wait (default 256)
	Workers  int           // items tried at once (default 1)
	Attempts int           // tries per item (default 5)
	Backoff  time.Duration // wait after the first failed try, doubled after each (default 2 s)
}

// Try tries item for the attempt-th time (from 1); last says no try will
// follow. It reports whether the item is done: true stops its retries.
type Try[T any] func(item T, attempt int, last bool) (done bool)

// Queue is a running queue; Close stops it.
type Queue[T any] struct {
	opts  Options
	try   Try[T]
	queue chan T
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// New starts the queue's workers.
func New[T any](o Options, try Try[T]) *Queue[T] {
	if o.Size <= 0 {
		o.Size = 256
	}
	o.Workers = max(o.Workers, 1)
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = 2 * time.Second
	}
	q := &Queue[T]{opts: o, try: try, queue: make(chan T, o.Size), stop: make(chan struct{})}
	for range o.Workers {
		q.wg.Add(1)
		go q.run()
	}
	return q
}

// Send queues item. It does not wait for it to be tried.
func (q *Queue[T]) Send(item T) error {
	select {
	case <-q.stop:
		return ErrClosed
	default:
	}
	select {
	case q.queue <- item:
		return nil
	default:
		return ErrFull
	}
}

// Close stops the queue once what is queued has been tried, or when ctx
// ends.
func (q *Queue[T]) Close(ctx context.Context) {
	q.once.Do(func() { close(q.stop) })
	done := make(chan struct{})
	go func() { q.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (q *Queue[T]) run() {
	defer q.wg.Done()
	for {
		select {
		case item := <-q.queue:
			q.retry(item)
		case <-q.stop:
			for {
				select {
				case item := <-q.queue:
					q.retry(item)
				default:
					return
				}
			}
		}
	}
}

// retry tries item until it is done or out of attempts, waiting longer
// after each failed try; once the queue is closing it waits no more and
// tries at most once again.
func (q *Queue[T]) retry(item T) {
	wait := q.opts.Backoff
	for n := 1; ; n++ {
		last := n >= q.opts.Attempts
		if q.try(item, n, last) || last {
			return
		}
		select {
		case <-time.After(wait):
		case <-q.stop:
			n = max(n, q.opts.Attempts-1) // shutting down: one more try at most
		}
		wait *= 2
	}
}
