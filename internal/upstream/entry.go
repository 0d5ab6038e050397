package upstream

import (
	"context"
	"errors"
	"time"
)

// entry is a key's session, or the one being opened.
type entry struct {
	ready       chan struct{} // closed when s or err is set
	s           *session
	err         error
	abandoned   bool // err came from the opener's own context ending
	fingerprint string
	inflight    int
	lastUsed    time.Time
	idle        *time.Timer
	dead        bool // the connection broke, or the upstream forgot the session
}

// acquire returns key's live session for target, opening one if needed.
// One caller opens while the others of the key wait for it; if the opener
// gives up (its context ends), a waiter tries in its place.
func (p *Pool[K]) acquire(ctx context.Context, key K, target Target) (*entry, *session, error) {
	fp := fingerprint(target)
	for {
		e, opener, err := p.entryFor(key, fp)
		if err != nil {
			return nil, nil, err
		}
		if opener {
			p.open(ctx, key, e, target)
		}
		select {
		case <-e.ready:
		case <-ctx.Done():
			p.release(key, e, false)
			return nil, nil, ctx.Err()
		}
		p.mu.Lock()
		s, err, abandoned := e.s, e.err, e.abandoned
		p.mu.Unlock()
		if err == nil && s != nil {
			return e, s, nil
		}
		if err == nil { // closed while it opened
			p.release(key, e, false)
			return nil, nil, errors.New("upstream pool closed")
		}
		if abandoned && ctx.Err() == nil && !opener {
			continue
		}
		return nil, nil, err
	}
}

// entryFor finds key's usable entry, counting the caller in, or puts a new
// one in place for the caller to open.
func (p *Pool[K]) entryFor(key K, fp string) (*entry, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false, errors.New("upstream pool closed")
	}
	if e, ok := p.sessions[key]; ok && !e.dead && e.fingerprint == fp && (e.s != nil || e.err == nil) {
		e.inflight++
		if e.idle != nil {
			e.idle.Stop()
		}
		return e, false, nil
	} else if ok {
		p.retire(key, e) // another URL or credential, or broken
	}
	e := &entry{ready: make(chan struct{}), fingerprint: fp, inflight: 1}
	p.sessions[key] = e
	return e, true, nil
}

// open connects e's session; on failure it removes e so the next caller
// starts afresh.
func (p *Pool[K]) open(ctx context.Context, key K, e *entry, target Target) {
	cctx, cancel := context.WithTimeout(ctx, p.opts.ConnectTimeout)
	s, err := p.connect(cctx, target)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		err = ctx.Err() // the opener gave up; its waiters try again
	}
	e.s, e.err = s, err
	if err != nil {
		e.abandoned = ctx.Err() != nil
		if p.sessions[key] == e {
			delete(p.sessions, key)
		}
	} else if p.closed {
		e.dead = true
	}
	close(e.ready)
	if s != nil {
		go p.watch(e, s)
	}
}

// watch marks e dead when its connection ends for any reason.
func (p *Pool[K]) watch(e *entry, s *session) {
	_ = s.cs.Wait()
	p.mu.Lock()
	e.dead = true
	p.mu.Unlock()
}

// release counts the caller out; expired marks the session as not to be
// used again (forgotten by the upstream, or possibly broken), so it is
// closed once no call uses it.
func (p *Pool[K]) release(key K, e *entry, expired bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.inflight--
	e.lastUsed = time.Now()
	if expired {
		e.dead = true
	}
	if e.dead || p.closed {
		if p.sessions[key] == e {
			p.retire(key, e)
		} else if e.inflight == 0 {
			p.closeLater(e)
		}
		return
	}
	if e.inflight == 0 && e.s != nil {
		if e.idle == nil {
			e.idle = time.AfterFunc(p.opts.SessionIdle, func() { p.expire(key, e) })
		} else {
			e.idle.Reset(p.opts.SessionIdle)
		}
	}
}

// expire closes key's session when it has stayed idle.
func (p *Pool[K]) expire(key K, e *entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sessions[key] != e || e.inflight > 0 || time.Since(e.lastUsed) < p.opts.SessionIdle {
		return
	}
	p.retire(key, e)
}

// retire takes e out of the map and closes its session once no call uses
// it. p.mu is held.
func (p *Pool[K]) retire(key K, e *entry) {
	delete(p.sessions, key)
	e.dead = true
	if e.idle != nil {
		e.idle.Stop()
	}
	if e.inflight == 0 {
		p.closeLater(e)
	}
}

// closeLater closes e's session outside the lock (closing sends a DELETE
// that may take seconds); Close waits for it. p.mu is held.
func (p *Pool[K]) closeLater(e *entry) {
	if e.s == nil {
		return
	}
	s := e.s
	e.s = nil
	p.closing.Add(1)
	go func() {
		defer p.closing.Done()
		s.close()
	}()
}

// Close closes every session and waits until they are closed. Calls in
// flight fail.
func (p *Pool[K]) Close() error {
	p.mu.Lock()
	p.closed = true
	for key, e := range p.sessions {
		delete(p.sessions, key)
		e.dead = true
		if e.idle != nil {
			e.idle.Stop()
		}
		p.closeLater(e)
	}
	p.mu.Unlock()
	p.closing.Wait()
	return nil
}

// Sessions reports how many sessions the pool holds (for tests and metrics).
func (p *Pool[K]) Sessions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}
