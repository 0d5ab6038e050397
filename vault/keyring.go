package vault

import (
	"cmp"
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// Defaults for Options.
const (
	// DefaultSealCap is the default number of seals per term after which
	// rotation is requested: 2^30, a quarter of the 2^32 messages NIST allows
	// under one key with random 96-bit nonces.
	DefaultSealCap = 1 << 30
	// MaxSealCap is the largest SealCap accepted; Seal refuses at twice the
	// cap, which must stay within 2^32.
	MaxSealCap = 1 << 31

	// DefaultMaxTermAge is the default age at which Maintain rotates the
	// active term.
	DefaultMaxTermAge = 90 * 24 * time.Hour
	// DefaultRefreshInterval is how often Maintain reloads keys by default.
	DefaultRefreshInterval = time.Minute
	// DefaultDeleteGrace is how long CanDelete protects a replaced term by
	// default.
	DefaultDeleteGrace = 10 * time.Minute
)

// Options tunes a Keyring. The zero value means every default.
type Options struct {
	// SealCap is the number of seals under one term after which Seal asks
	// Maintain to rotate. Seal itself refuses with ErrTermExhausted at twice
	// SealCap. The count is kept per process (see Seal). Default
	// DefaultSealCap; at most MaxSealCap.
	SealCap uint64
	// MaxTermAge is the age at which Maintain rotates the active term.
	// Default DefaultMaxTermAge; negative disables age-based rotation.
	MaxTermAge time.Duration
	// RefreshInterval is how often Maintain reloads keys from the store, so a
	// term added by another replica becomes active here. Default
	// DefaultRefreshInterval.
	RefreshInterval time.Duration
	// DeleteGrace is how long after a term was replaced CanDelete still
	// refuses to let it go, because a replica that has not refreshed yet may
	// still seal with it. Keep it well above RefreshInterval. Default
	// DefaultDeleteGrace.
	DeleteGrace time.Duration
	// Now returns the current time. Default time.Now; tests replace it.
	Now func() time.Time
}

func (o Options) withDefaults() (Options, error) {
	if o.SealCap == 0 {
		o.SealCap = DefaultSealCap
	}
	if o.SealCap > MaxSealCap {
		return o, fmt.Errorf("vault: SealCap %d exceeds %d", o.SealCap, uint64(MaxSealCap))
	}
	if o.MaxTermAge == 0 {
		o.MaxTermAge = DefaultMaxTermAge
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = DefaultRefreshInterval
	}
	if o.DeleteGrace <= 0 {
		o.DeleteGrace = DefaultDeleteGrace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// dataKey is one installed term. It is shared between successive snapshots,
// so its seal count survives a refresh; a term's key never changes (a rekey
// rewraps it, the key stays), so sharing is safe.
type dataKey struct {
	term      uint32
	aead      cipher.AEAD
	createdAt time.Time
	seals     atomic.Uint64
}

// snapshot is an immutable view of the installed terms. It is never edited
// after it is published; changes build a new one and swap it in.
type snapshot struct {
	active *dataKey            // the highest term
	keys   map[uint32]*dataKey // every installed term, active included
}

// with returns a copy of s with dk installed as the active term.
func (s *snapshot) with(dk *dataKey) *snapshot {
	n := &snapshot{active: dk, keys: make(map[uint32]*dataKey, len(s.keys)+1)}
	for t, k := range s.keys {
		n.keys[t] = k
	}
	n.keys[dk.term] = dk
	return n
}

// Keyring seals and opens credentials. Seal, Open, OpenContext, Reseal,
// ActiveTerm, Terms and CanDelete read an immutable snapshot and never block
// one another; Refresh, Rotate and Rekey are serialised among themselves. A
// Keyring is safe for concurrent use.
type Keyring struct {
	store     KeyStore
	opts      Options
	sealLimit uint64

	snap atomic.Pointer[snapshot]
	// rotate carries Seal's request for a rotation to Maintain. It has room
	// for one request; Seal never blocks on it.
	rotate chan struct{}
	// loads counts store loads started, so Refresh can tell whether a load
	// that began after it was called has already finished.
	loads atomic.Uint64

	// mu serialises every operation that reads the store and swaps the
	// snapshot, so a slow load cannot overwrite a newer snapshot. It is a
	// channel so a waiter can give up when its context ends.
	mu chan struct{}
	// Guarded by mu.
	root   cipher.AEAD // the root key; only wraps and unwraps data keys
	check  []byte      // the stored check value, as last read or written
	lastOK uint64      // sequence number (from loads) of the last good load
}

// Open verifies rootKey against the store's check value and returns a keyring
// holding every stored data key. On a fresh store it creates the check value
// and term 1. A root key that does not open the check value is refused with
// ErrWrongRootKey before any data key is unwrapped. Open keeps no reference to
// rootKey; the caller may clear it.
func Open(ctx context.Context, rootKey []byte, store KeyStore, opts Options) (*Keyring, error) {
	if store == nil {
		return nil, errors.New("vault: nil KeyStore")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	root, err := newRoot(rootKey)
	if err != nil {
		return nil, err
	}
	k := &Keyring{
		store:     store,
		opts:      opts,
		sealLimit: 2 * opts.SealCap,
		rotate:    make(chan struct{}, 1),
		mu:        make(chan struct{}, 1),
		root:      root,
	}
	// Replicas starting together on a fresh store race to initialise it; the
	// loser reloads and verifies the winner's check value.
	for attempt := 0; ; attempt++ {
		err := k.bootstrap(ctx)
		if errors.Is(err, errRetry) && attempt < maxAttempts {
			continue
		}
		if err != nil {
			return nil, err
		}
		return k, nil
	}
}

// maxAttempts bounds the retries after a concurrent change in the store.
const maxAttempts = 5

var errRetry = errors.New("vault: store changed concurrently; retry")

// bootstrap loads the store for Open, initialising it when empty.
func (k *Keyring) bootstrap(ctx context.Context) error {
	check, keys, err := k.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("vault: load keys: %w", err)
	}
	if len(check) == 0 && len(keys) == 0 {
		check = newCheck(k.root)
		dk, wk := k.newKey(1)
		switch err := k.store.Init(ctx, check, wk); {
		case errors.Is(err, ErrCheckExists):
			return errRetry
		case err != nil:
			return fmt.Errorf("vault: initialise key store: %w", err)
		}
		k.check = check
		k.snap.Store(&snapshot{active: dk, keys: map[uint32]*dataKey{1: dk}})
		return nil
	}
	if err := verifyCheck(k.root, check); err != nil {
		return err
	}
	if len(keys) == 0 {
		// A check value without keys: nothing was ever sealed, so add term 1.
		_, wk := k.newKey(1)
		switch err := k.store.InsertKey(ctx, check, wk); {
		case errors.Is(err, ErrTermExists), errors.Is(err, ErrStale):
			return errRetry
		case err != nil:
			return fmt.Errorf("vault: store key term 1: %w", err)
		}
		return errRetry // reload, so the snapshot is built one way only
	}
	s, err := k.buildSnapshot(keys, nil)
	if err != nil {
		return err
	}
	k.check = check
	k.snap.Store(s)
	return nil
}

// newKey draws a data key for term and wraps it under the root key. Caller
// holds mu, or owns k exclusively.
func (k *Keyring) newKey(term uint32) (*dataKey, WrappedKey) {
	raw := make([]byte, KeySize)
	rand.Read(raw)
	defer clear(raw)
	aead, err := newAEAD(raw)
	if err != nil {
		panic("vault: " + err.Error()) // unreachable: the key size is fixed
	}
	created := k.opts.Now().UTC().Truncate(time.Microsecond) // Postgres precision
	dk := &dataKey{term: term, aead: aead, createdAt: created}
	return dk, WrappedKey{Term: term, Wrapped: wrap(k.root, raw, keyAAD(term)), CreatedAt: created}
}

// buildSnapshot unwraps keys under the root key into a snapshot. Terms that
// old already holds are reused, not unwrapped again: a term's key never
// changes, and reuse keeps its seal count. Caller holds mu, or owns k.
func (k *Keyring) buildSnapshot(keys []WrappedKey, old *snapshot) (*snapshot, error) {
	if len(keys) == 0 {
		return nil, errors.New("vault: the key store holds a check value but no data keys")
	}
	s := &snapshot{keys: make(map[uint32]*dataKey, len(keys))}
	for _, wk := range keys {
		if wk.Term == 0 {
			return nil, fmt.Errorf("vault: stored data key with term 0: %w", ErrMalformed)
		}
		if s.keys[wk.Term] != nil {
			return nil, fmt.Errorf("vault: stored data key term %d twice", wk.Term)
		}
		dk := old.lookup(wk.Term)
		if dk == nil {
			raw, err := unwrap(k.root, wk.Wrapped, keyAAD(wk.Term))
			if err == nil && len(raw) != KeySize {
				err = ErrMalformed
			}
			if err != nil {
				clear(raw)
				// The check value opened, so this is damage, not a wrong key.
				return nil, fmt.Errorf("vault: unwrap data key term %d: %w", wk.Term, err)
			}
			aead, err := newAEAD(raw)
			clear(raw)
			if err != nil {
				return nil, fmt.Errorf("vault: data key term %d: %w", wk.Term, err)
			}
			dk = &dataKey{term: wk.Term, aead: aead, createdAt: wk.CreatedAt}
		}
		s.keys[wk.Term] = dk
		if s.active == nil || dk.term > s.active.term {
			s.active = dk
		}
	}
	return s, nil
}

func (s *snapshot) lookup(term uint32) *dataKey {
	if s == nil {
		return nil
	}
	return s.keys[term]
}

// Seal encrypts plaintext under the active term, binding it to aad (use
// CredentialAAD for credentials). Every call draws a fresh random nonce, so
// two seals of the same input differ.
//
// Seal does no I/O and takes no lock. It counts seals per term; once the
// active term reaches SealCap it signals Maintain, which rotates in the
// background, and Seal carries on. Only if nobody rotates and the count
// reaches twice SealCap does Seal refuse with ErrTermExhausted, rather than
// draw nonces past the safe limit. The count is per process and restarts at
// zero, so with several replicas or restarts a term may seal more in total;
// the caps leave room for that, and MaxTermAge bounds it too.
func (k *Keyring) Seal(plaintext, aad []byte) ([]byte, error) {
	return k.sealWith(k.snap.Load().active, plaintext, aad)
}

func (k *Keyring) sealWith(dk *dataKey, plaintext, aad []byte) ([]byte, error) {
	n := dk.seals.Add(1)
	if n >= k.opts.SealCap {
		select {
		case k.rotate <- struct{}{}:
		default: // a request is already pending
		}
	}
	if n > k.sealLimit {
		return nil, ErrTermExhausted
	}
	out := make([]byte, headerSize, Overhead+len(plaintext))
	out[0] = formatVersion
	binary.BigEndian.PutUint32(out[1:5], dk.term)
	rand.Read(out[5:headerSize]) // never fails since Go 1.24
	return dk.aead.Seal(out, out[5:headerSize], plaintext, aad), nil
}

// Open decrypts a ciphertext sealed under any installed term, checking that it
// was sealed with the same aad. It does no I/O: a term created by another
// replica and not yet loaded gives ErrUnknownTerm (OpenContext refreshes and
// retries). Errors are ErrMalformed, ErrUnknownTerm or ErrDecrypt.
func (k *Keyring) Open(ciphertext, aad []byte) ([]byte, error) {
	return k.snap.Load().open(ciphertext, aad)
}

func (s *snapshot) open(ciphertext, aad []byte) ([]byte, error) {
	term, err := TermOf(ciphertext)
	if err != nil {
		return nil, err
	}
	dk := s.keys[term]
	if dk == nil {
		return nil, ErrUnknownTerm
	}
	pt, err := dk.aead.Open(nil, ciphertext[5:headerSize], ciphertext[headerSize:], aad)
	if err != nil {
		return nil, ErrDecrypt
	}
	return pt, nil
}

// OpenContext is Open for callers that can wait on the store. If the
// ciphertext names a term newer than the active one, another replica rotated:
// OpenContext reloads the keys once (concurrent callers share one load) and
// retries. An unknown term at or below the active term was deleted or never
// existed, and fails at once with no I/O, since terms only grow.
func (k *Keyring) OpenContext(ctx context.Context, ciphertext, aad []byte) ([]byte, error) {
	s := k.snap.Load()
	pt, err := s.open(ciphertext, aad)
	if !errors.Is(err, ErrUnknownTerm) {
		return pt, err
	}
	if term, _ := TermOf(ciphertext); term <= s.active.term {
		return nil, err
	}
	if rerr := k.Refresh(ctx); rerr != nil {
		return nil, fmt.Errorf("%w (refresh: %w)", ErrUnknownTerm, rerr)
	}
	return k.Open(ciphertext, aad)
}

// Reseal moves a ciphertext to the active term: it opens it and, if it was
// sealed under an older term, seals the plaintext again under the active term
// with the same aad and returns changed = true. A ciphertext already under the
// active term (or a newer one) comes back unchanged. The rotation job calls it
// for each row and stores the result in the row's own short transaction;
// running it twice on a row is harmless, so the job can resume anywhere.
func (k *Keyring) Reseal(ctx context.Context, ciphertext, aad []byte) (_ []byte, changed bool, err error) {
	pt, err := k.OpenContext(ctx, ciphertext, aad)
	if err != nil {
		return nil, false, err
	}
	defer clear(pt)
	active := k.snap.Load().active
	if term, _ := TermOf(ciphertext); term >= active.term {
		return ciphertext, false, nil
	}
	out, err := k.sealWith(active, pt, aad)
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// ActiveTerm returns the term Seal uses.
func (k *Keyring) ActiveTerm() uint32 { return k.snap.Load().active.term }

// TermInfo describes one installed term.
type TermInfo struct {
	Term      uint32
	CreatedAt time.Time
	// Active reports whether Seal uses this term.
	Active bool
	// Seals counts the seals this process made under the term since it
	// loaded it.
	Seals uint64
}

// Terms lists the installed terms in ascending order.
func (k *Keyring) Terms() []TermInfo {
	s := k.snap.Load()
	out := make([]TermInfo, 0, len(s.keys))
	for _, dk := range s.keys {
		out = append(out, TermInfo{Term: dk.term, CreatedAt: dk.createdAt, Active: dk == s.active, Seals: dk.seals.Load()})
	}
	slices.SortFunc(out, func(a, b TermInfo) int { return cmp.Compare(a.Term, b.Term) })
	return out
}
