package lastused

import (
	"context"
	"sync"
	"time"
)

// Options configure a Recorder.
type Options struct {
	// Write stores a batch of ids with their last-use times.
	Write func(ctx context.Context, used map[string]time.Time) error
	// OnError is told of a failed write and the batch size; the marks of
	// that batch are dropped (a later use marks them again).
	OnError func(err error, n int)
	// Tick, when set, runs after each periodic flush (a cache sweep).
	Tick func()
	// Every is the flush period (default 2 s).
	Every time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Recorder batches last-use marks.
type Recorder struct {
	opts Options
	mu   sync.Mutex
	used map[string]time.Time
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// New starts a recorder's flush loop; Close stops it.
func New(opts Options) *Recorder {
	if opts.Every <= 0 {
		opts.Every = 2 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.OnError == nil {
		opts.OnError = func(error, int) {}
	}
	r := &Recorder{opts: opts, used: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go r.loop()
	return r
}

// Mark records that id was used now.
func (r *Recorder) Mark(id string) {
	now := r.opts.Now()
	r.mu.Lock()
	r.used[id] = now
	r.mu.Unlock()
}

// Close writes what is marked and stops the loop.
func (r *Recorder) Close() {
	r.once.Do(func() { close(r.stop) })
	<-r.done
}

func (r *Recorder) loop() {
	defer close(r.done)
	t := time.NewTicker(r.opts.Every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			r.flush()
			return
		case <-t.C:
			r.flush()
			if r.opts.Tick != nil {
				r.opts.Tick()
			}
		}
	}
}

// flush writes the marks in one call, off the call path.
func (r *Recorder) flush() {
	r.mu.Lock()
	batch := r.used
	r.used = map[string]time.Time{}
	r.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.opts.Write(ctx, batch); err != nil {
		r.opts.OnError(err, len(batch))
	}
}
