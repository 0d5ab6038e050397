package vault

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// maxRotateAttempts bounds Rotate's retries after losing a race to add a term.
const maxRotateAttempts = 100

func (k *Keyring) lock(ctx context.Context) error {
	select {
	case k.mu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (k *Keyring) unlock() { <-k.mu }

// Refresh reloads the data keys from the store, so terms added by another
// replica can open and the newest one seals. It first verifies the check
// value again: if the store was rekeyed under another root key, Refresh
// returns ErrWrongRootKey and keeps the current snapshot, whose data keys are
// unchanged by a rekey and still open everything they did.
//
// Concurrent calls share work: a call returns as soon as a load that started
// after it was made has succeeded, so a burst of callers costs one or two
// loads. Only terms not yet held are unwrapped.
func (k *Keyring) Refresh(ctx context.Context) error {
	seen := k.loads.Load()
	if err := k.lock(ctx); err != nil {
		return err
	}
	defer k.unlock()
	if k.lastOK > seen {
		return nil
	}
	_, err := k.refreshLocked(ctx)
	return err
}

// refreshLocked loads the store and publishes a new snapshot. Caller holds mu.
func (k *Keyring) refreshLocked(ctx context.Context) (*snapshot, error) {
	seq := k.loads.Add(1)
	check, keys, err := k.store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("vault: load keys: %w", err)
	}
	if err := verifyCheck(k.root, check); err != nil {
		return nil, err
	}
	s, err := k.buildSnapshot(keys, k.snap.Load())
	if err != nil {
		return nil, err
	}
	k.check = check
	k.snap.Store(s)
	k.lastOK = seq
	return s, nil
}

// Rotate adds a term: it draws a new data key from crypto/rand, stores it
// wrapped under the root key as the highest term plus one, and makes it
// active. It reloads the store first, and if another replica adds the same
// term first (ErrTermExists) it reloads and tries the next one, so the new
// term is always one this call created. Ciphertexts under older terms still
// open; Reseal moves them to the new term.
func (k *Keyring) Rotate(ctx context.Context) (newTerm uint32, err error) {
	return k.rotateIf(ctx, nil)
}

// rotateIf rotates if need, asked after each reload, says the active term
// still needs it. Replicas that decide to rotate for the same reason (age, seal
// count) then add one term between them, not one each.
func (k *Keyring) rotateIf(ctx context.Context, need func(*snapshot) bool) (uint32, error) {
	if err := k.lock(ctx); err != nil {
		return 0, err
	}
	defer k.unlock()
	// Every lost race means another replica added a term, so the replicas as
	// a whole make progress; the bound only guards against a broken store.
	for range maxRotateAttempts {
		s, err := k.refreshLocked(ctx)
		if err != nil {
			return 0, err
		}
		if need != nil && !need(s) {
			return s.active.term, nil
		}
		if s.active.term == math.MaxUint32 {
			return 0, errors.New("vault: rotate: no terms left")
		}
		dk, wk := k.newKey(s.active.term + 1)
		switch err := k.store.InsertKey(ctx, k.check, wk); {
		case err == nil:
			k.snap.Store(s.with(dk))
			return dk.term, nil
		case errors.Is(err, ErrTermExists), errors.Is(err, ErrStale):
			// Another replica rotated, or rekeyed: reload. A rekey makes the
			// reload fail with ErrWrongRootKey.
			continue
		default:
			return 0, fmt.Errorf("vault: store key term %d: %w", dk.term, err)
		}
	}
	return 0, fmt.Errorf("vault: rotate: gave up after %d attempts: %w", maxRotateAttempts, ErrStale)
}

// Rekey re-wraps every data key under newRootKey and stores them with a new
// check value in one store call (one transaction). The data keys themselves do
// not change, so no ciphertext is touched and this keyring keeps serving
// throughout. Afterwards Open refuses the old root key with ErrWrongRootKey
// and accepts the new one. Other replicas still running with the old root key
// keep opening and sealing with the keys they hold, but cannot add terms or
// load new ones until restarted with the new key. Rekey keeps no reference to
// newRootKey.
func (k *Keyring) Rekey(ctx context.Context, newRootKey []byte) error {
	newRoot, err := newRoot(newRootKey)
	if err != nil {
		return err
	}
	if err := k.lock(ctx); err != nil {
		return err
	}
	defer k.unlock()
	for range maxAttempts {
		seq := k.loads.Add(1)
		check, keys, err := k.store.Load(ctx)
		if err != nil {
			return fmt.Errorf("vault: rekey: load keys: %w", err)
		}
		if err := verifyCheck(k.root, check); err != nil {
			return err
		}
		if verifyCheck(newRoot, check) == nil {
			return errors.New("vault: rekey: the new root key is the current one")
		}
		rewrapped := make([]WrappedKey, len(keys))
		for i, wk := range keys {
			raw, err := unwrap(k.root, wk.Wrapped, keyAAD(wk.Term))
			if err != nil {
				return fmt.Errorf("vault: rekey: unwrap data key term %d: %w", wk.Term, err)
			}
			rewrapped[i] = WrappedKey{Term: wk.Term, Wrapped: wrap(newRoot, raw, keyAAD(wk.Term)), CreatedAt: wk.CreatedAt}
			clear(raw)
		}
		nextCheck := newCheck(newRoot)
		switch err := k.store.ReplaceWrappedKeys(ctx, check, nextCheck, rewrapped); {
		case errors.Is(err, ErrStale):
			continue // a term was added or deleted meanwhile: start over
		case err != nil:
			return fmt.Errorf("vault: rekey: store keys: %w", err)
		}
		k.root, k.check = newRoot, nextCheck
		s, err := k.buildSnapshot(rewrapped, k.snap.Load())
		if err != nil {
			return fmt.Errorf("vault: rekey: %w", err) // stored; a restart loads it
		}
		k.snap.Store(s)
		k.lastOK = seq
		return nil
	}
	return fmt.Errorf("vault: rekey: gave up after %d attempts: %w", maxAttempts, ErrStale)
}

// needsRotation reports whether the active term of s has sealed SealCap
// values here or is older than MaxTermAge.
func (k *Keyring) needsRotation(s *snapshot) bool {
	if s.active.seals.Load() >= k.opts.SealCap {
		return true
	}
	return k.opts.MaxTermAge > 0 && k.opts.Now().Sub(s.active.createdAt) >= k.opts.MaxTermAge
}

// Maintain keeps the keyring current until ctx ends, and returns ctx's error.
// Run it once per Keyring, in its own goroutine, for the life of the process.
// It rotates when Seal signals that the active term reached SealCap and when
// the active term is older than MaxTermAge, and otherwise reloads the keys
// every RefreshInterval so that terms added elsewhere become active here.
// Rotation happens here rather than inside Seal so that Seal never does I/O
// or waits on the store. Errors go to onError (which may be nil) and the loop
// carries on; a lasting error leaves the current snapshot serving.
func (k *Keyring) Maintain(ctx context.Context, onError func(error)) error {
	report := func(err error) {
		if err != nil && onError != nil && ctx.Err() == nil {
			onError(err)
		}
	}
	tick := time.NewTicker(k.opts.RefreshInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-k.rotate:
			_, err := k.rotateIf(ctx, k.needsRotation)
			report(err)
		case <-tick.C:
			if k.needsRotation(k.snap.Load()) {
				_, err := k.rotateIf(ctx, k.needsRotation)
				report(err)
			} else {
				report(k.Refresh(ctx))
			}
		}
	}
}

// CanDelete reports whether the data key of term may be deleted, given how
// many stored rows still carry that term (rowsUsingIt, counted by the store).
// It returns ErrActiveTerm for the active term (or any newer one),
// ErrUnknownTerm for a term this keyring does not hold, and ErrTermInUse while
// rows use it or while the term that replaced it is younger than DeleteGrace
// (a replica that has not refreshed yet may still seal with it). The store
// must still delete atomically: in one statement, only if no row references
// the term and a higher term exists.
func (k *Keyring) CanDelete(term uint32, rowsUsingIt int64) error {
	s := k.snap.Load()
	if term >= s.active.term {
		return ErrActiveTerm
	}
	if s.keys[term] == nil {
		return ErrUnknownTerm
	}
	if rowsUsingIt > 0 {
		return ErrTermInUse
	}
	var next *dataKey // the oldest installed term above term: its successor
	for t, dk := range s.keys {
		if t > term && (next == nil || t < next.term) {
			next = dk
		}
	}
	if k.opts.Now().Sub(next.createdAt) < k.opts.DeleteGrace {
		return ErrTermInUse
	}
	return nil
}
