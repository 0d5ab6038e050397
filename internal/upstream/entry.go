package upstream

import (
	"context"
	"errors"
	"slices"
	"time"
)

// errPoolClosed is what a caller gets from a pool that has been closed.
var errPoolClosed = errors.New("upstream pool closed")

// entry is one session slot of a key. A slot is held by one caller at a
// time (busy), who alone sends on its session: so every notification that
// arrives on the session while it is held belongs to the holder's request.
// A held slot may have no session yet: its holder opens one into it.
type entry[K comparable] struct {
	ks          *keySessions[K]
	s           *session
	fingerprint string // of the target s was opened for
	busy        bool
	lastUsed    time.Time
	idle        *time.Timer
}

// keySessions is the slots of one key, at most Options.SessionsPerKey, and
// the callers waiting for one of them. Invariant: while a caller waits, no
// slot is idle (a slot given back goes to the first waiter).
type keySessions[K comparable] struct {
	key     K
	entries []*entry[K]
	waiters []chan *entry[K] // each buffered (1): handed a slot, or nil when the pool closes
	// fp is the newest fingerprint asked for: a session of an older one
	// (a rotated credential, a moved URL) is closed once given back.
	fp string
}

// acquire holds a slot of key with a live session to target for the
// caller alone. It takes an idle session of the key for the same URL and
// credential (the most recently used, so that the others may idle out);
// when none is idle, it opens a new one, up to SessionsPerKey; past that,
// it waits under ctx for the next slot given back, and takes that slot's
// session (or opens its own into it when the slot came back empty or for
// another credential). Callers do not wait for one another's opening: with
// sessions used one call at a time, a session being opened serves only its
// opener. fresh skips idle sessions (the retry after a 404, which must not
// land on a session the upstream has forgotten too): it opens a new one,
// closing an idle one in its place when the key is at its bound.
func (p *Pool[K]) acquire(ctx context.Context, key K, target Target, fresh bool) (*entry[K], *session, error) {
	fp := Fingerprint(target)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, errPoolClosed
	}
	ks := p.keys[key]
	if ks == nil {
		ks = &keySessions[K]{key: key}
		p.keys[key] = ks
	}
	ks.fp = fp
	p.sweepLocked(ks)
	var e *entry[K]
	if !fresh {
		e = ks.takeIdle(fp)
	}
	if e == nil && len(ks.entries) < p.boundOf(key) {
		e = &entry[K]{ks: ks, busy: true}
		ks.entries = append(ks.entries, e)
	}
	if e == nil && fresh {
		e = ks.takeIdle("")
	}
	if e == nil {
		ch := make(chan *entry[K], 1)
		ks.waiters = append(ks.waiters, ch)
		p.mu.Unlock()
		select {
		case e = <-ch:
		case <-ctx.Done():
			if p.waiterGaveUp != nil {
				p.waiterGaveUp()
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if i := slices.Index(ks.waiters, ch); i >= 0 {
				ks.waiters = slices.Delete(ks.waiters, i, i+1)
				p.dropIfUnusedLocked(ks)
				return nil, nil, context.Cause(ctx)
			}
			// Handed a slot as the context ended: pass it on.
			if e := <-ch; e != nil {
				p.putLocked(e, false)
			}
			return nil, nil, context.Cause(ctx)
		}
		if e == nil {
			return nil, nil, errPoolClosed
		}
		p.mu.Lock()
		if p.closed {
			p.putLocked(e, false)
			p.mu.Unlock()
			return nil, nil, errPoolClosed
		}
		if ctx.Err() != nil { // handed a slot as the context ended: pass it on
			p.putLocked(e, false)
			p.mu.Unlock()
			return nil, nil, context.Cause(ctx)
		}
	}
	if e.idle != nil {
		e.idle.Stop()
	}
	s := e.s
	if s != nil && (fresh || s.dead.Load() || e.fingerprint != fp) {
		p.closeLater(s)
		e.s, s = nil, nil
	}
	p.mu.Unlock()
	if s != nil {
		return e, s, nil
	}
	s, err := p.open(ctx, target)
	p.mu.Lock()
	if err == nil && p.closed {
		p.putLocked(e, false)
		p.mu.Unlock()
		s.close()
		return nil, nil, errPoolClosed
	}
	if err != nil {
		p.putLocked(e, false) // the empty slot goes to a waiter, who opens its own
		p.mu.Unlock()
		return nil, nil, err
	}
	e.s, e.fingerprint = s, fp
	p.mu.Unlock()
	go p.watch(s)
	return e, s, nil
}

// SessionBounder is a key that bounds its own sessions: SessionBound is
// how many it may hold at once, 0 for the pool's SessionsPerKey. A key
// whose upstream keeps state per session (one downstream client's) holds
// one, so that all its requests meet that state, one at a time.
type SessionBounder interface {
	SessionBound() int
}

func (p *Pool[K]) boundOf(key K) int {
	if b, ok := any(key).(SessionBounder); ok {
		if n := b.SessionBound(); n > 0 {
			return n
		}
	}
	return p.opts.SessionsPerKey
}

// takeIdle takes the most recently used idle slot whose session was opened
// for fp ("": any), or returns nil. p.mu is held.
func (ks *keySessions[K]) takeIdle(fp string) *entry[K] {
	var best *entry[K]
	for _, e := range ks.entries {
		if !e.busy && (fp == "" || e.fingerprint == fp) && (best == nil || e.lastUsed.After(best.lastUsed)) {
			best = e
		}
	}
	if best != nil {
		best.busy = true
	}
	return best
}

// sweepLocked closes the idle sessions of ks that have ended or were opened
// for another URL or credential than the newest asked for. p.mu is held.
func (p *Pool[K]) sweepLocked(ks *keySessions[K]) {
	ks.entries = slices.DeleteFunc(ks.entries, func(e *entry[K]) bool {
		if e.busy || (e.s != nil && !e.s.dead.Load() && e.fingerprint == ks.fp) {
			return false
		}
		p.dropLocked(e)
		return true
	})
}

// open connects a new session under ctx, bounded by ConnectTimeout.
func (p *Pool[K]) open(ctx context.Context, target Target) (*session, error) {
	cctx, cancel := context.WithTimeout(ctx, p.opts.ConnectTimeout)
	defer cancel()
	s, err := p.connect(cctx, target)
	if err != nil && ctx.Err() != nil {
		return nil, context.Cause(ctx) // the caller gave up, or the pool closed
	}
	return s, err
}

// watch marks s dead when its connection ends for any reason; the slot
// holding it opens a new one when next taken.
func (p *Pool[K]) watch(s *session) {
	_ = s.cs.Wait()
	s.dead.Store(true)
}

// release gives the caller's slot back. broken marks its session as not to
// be used again (forgotten by the upstream, or possibly broken), which
// closes it.
func (p *Pool[K]) release(e *entry[K], broken bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.putLocked(e, broken)
}

// putLocked gives e back: to the first waiter of its key, held still; else
// idle, closed after SessionIdle; a slot left without a session is freed.
// p.mu is held.
func (p *Pool[K]) putLocked(e *entry[K], broken bool) {
	ks := e.ks
	e.lastUsed = time.Now()
	if e.s != nil && (broken || p.closed || e.s.dead.Load() || e.fingerprint != ks.fp) {
		p.closeLater(e.s)
		e.s = nil
	}
	if p.closed {
		e.busy = false
		return // Close has emptied the map and woken the waiters
	}
	if len(ks.waiters) > 0 {
		ch := ks.waiters[0]
		ks.waiters = slices.Delete(ks.waiters, 0, 1)
		ch <- e
		return
	}
	e.busy = false
	if e.s == nil {
		ks.entries = slices.DeleteFunc(ks.entries, func(x *entry[K]) bool { return x == e })
		p.dropIfUnusedLocked(ks)
		return
	}
	if e.idle == nil {
		e.idle = time.AfterFunc(p.opts.SessionIdle, func() { p.expire(e) })
	} else {
		e.idle.Reset(p.opts.SessionIdle)
	}
}

// forgotten closes the idle sessions of e's key that were open when the
// request the upstream answered 404 began: an upstream that forgot one
// session (it restarted, or expires idle sessions, and these were idle
// longer) has most likely forgotten those too, and a call on one would
// fail the same way. Being wrong costs one initialize. p.mu is not held.
func (p *Pool[K]) forgotten(e *entry[K], began time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.ks.entries = slices.DeleteFunc(e.ks.entries, func(x *entry[K]) bool {
		if x.busy || x.s == nil || !x.s.opened.Before(began) {
			return false
		}
		p.dropLocked(x)
		return true
	})
	p.dropIfUnusedLocked(e.ks)
}

// expire closes e's session when it has stayed idle.
func (p *Pool[K]) expire(e *entry[K]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ks := e.ks
	if e.busy || !slices.Contains(ks.entries, e) || time.Since(e.lastUsed) < p.opts.SessionIdle {
		return
	}
	ks.entries = slices.DeleteFunc(ks.entries, func(x *entry[K]) bool { return x == e })
	p.dropLocked(e)
	p.dropIfUnusedLocked(ks)
}

// dropLocked closes an idle slot's session; the caller takes the slot out
// of its key. p.mu is held.
func (p *Pool[K]) dropLocked(e *entry[K]) {
	if e.idle != nil {
		e.idle.Stop()
	}
	if e.s != nil {
		p.closeLater(e.s)
		e.s = nil
	}
}

// dropIfUnusedLocked forgets a key with no slot and no waiter. p.mu is held.
func (p *Pool[K]) dropIfUnusedLocked(ks *keySessions[K]) {
	if len(ks.entries) == 0 && len(ks.waiters) == 0 && p.keys[ks.key] == ks {
		delete(p.keys, ks.key)
	}
}

// closeLater closes s outside the lock (closing sends a DELETE that may
// take seconds); Close waits for it. p.mu is held.
func (p *Pool[K]) closeLater(s *session) {
	p.closing.Add(1)
	go func() {
		defer p.closing.Done()
		s.close()
	}()
}

// Close closes every session and waits until they are closed. Calls in
// flight fail, and callers waiting for a session get an error.
func (p *Pool[K]) Close() error {
	p.mu.Lock()
	p.closed = true
	for key, ks := range p.keys {
		for _, e := range ks.entries {
			if e.busy && e.s != nil {
				// The upstream may still be running the call, and answer
				// the DELETE only once it ends: not waited for.
				e.s.state.setCloseContext(p.stopped)
			}
			p.dropLocked(e)
		}
		for _, ch := range ks.waiters {
			ch <- nil
		}
		ks.waiters = nil
		delete(p.keys, key)
	}
	p.mu.Unlock()
	p.stop() // after closed is set: a call it ends hands its slot to no one
	p.closing.Wait()
	return nil
}

// Sessions reports how many sessions the pool holds, open or being opened,
// over all keys (for tests and metrics).
func (p *Pool[K]) Sessions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ks := range p.keys {
		n += len(ks.entries)
	}
	return n
}

// Forget closes key's sessions: the idle ones now, the ones in use when
// their call gives them back (the downstream session they served has
// ended). Callers waiting for one of them open their own.
func (p *Pool[K]) Forget(key K) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ks := p.keys[key]
	if ks == nil {
		return
	}
	ks.entries = slices.DeleteFunc(ks.entries, func(e *entry[K]) bool {
		if e.busy {
			if e.s != nil {
				e.s.dead.Store(true) // closed when given back
			}
			return false
		}
		p.dropLocked(e)
		return true
	})
	p.dropIfUnusedLocked(ks)
}
