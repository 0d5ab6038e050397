package vault_test

import (
	"bytes"
	"context"
	"slices"
	"sync"

	"github.com/mcpgate/mcpgate/vault"
)

// memStore is an in-memory vault.KeyStore that follows the contract the
// Postgres store implements: one mutex stands for the lock on the check row.
type memStore struct {
	mu    sync.Mutex
	check []byte
	keys  map[uint32]vault.WrappedKey

	loads int
	// beforeLoad, if set, runs (outside mu) at the start of every Load.
	beforeLoad func()
	// beforeReplace, if set, runs (outside mu) at the start of
	// ReplaceWrappedKeys.
	beforeReplace func()
}

func newMemStore() *memStore { return &memStore{keys: map[uint32]vault.WrappedKey{}} }

func (m *memStore) Load(ctx context.Context) ([]byte, []vault.WrappedKey, error) {
	if f := m.hook(); f != nil {
		f()
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loads++
	keys := make([]vault.WrappedKey, 0, len(m.keys))
	for _, k := range m.keys {
		keys = append(keys, cloneKey(k))
	}
	return bytes.Clone(m.check), keys, nil
}

func (m *memStore) hook() func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.beforeLoad
}

func (m *memStore) Init(ctx context.Context, check []byte, first vault.WrappedKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.check != nil {
		return vault.ErrCheckExists
	}
	if _, ok := m.keys[first.Term]; ok {
		return vault.ErrTermExists
	}
	m.check = bytes.Clone(check)
	m.keys[first.Term] = cloneKey(first)
	return nil
}

func (m *memStore) InsertKey(ctx context.Context, check []byte, key vault.WrappedKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.check == nil || !bytes.Equal(m.check, check) {
		return vault.ErrStale
	}
	for t := range m.keys {
		if t >= key.Term {
			return vault.ErrTermExists
		}
	}
	m.keys[key.Term] = cloneKey(key)
	return nil
}

func (m *memStore) ReplaceWrappedKeys(ctx context.Context, oldCheck, newCheck []byte, keys []vault.WrappedKey) error {
	if m.beforeReplace != nil {
		m.beforeReplace()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !bytes.Equal(m.check, oldCheck) || len(keys) != len(m.keys) {
		return vault.ErrStale
	}
	for _, k := range keys {
		if _, ok := m.keys[k.Term]; !ok {
			return vault.ErrStale
		}
	}
	for _, k := range keys {
		old := m.keys[k.Term]
		old.Wrapped = bytes.Clone(k.Wrapped)
		m.keys[k.Term] = old
	}
	m.check = bytes.Clone(newCheck)
	return nil
}

// deleteTerm is what the store's delete does, for tests of deleted terms.
func (m *memStore) deleteTerm(term uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.keys, term)
}

// loadCount returns how many Loads ran.
func (m *memStore) loadCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.loads
}

// terms returns the stored terms in order.
func (m *memStore) terms() []uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ts []uint32
	for t := range m.keys {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}

// allBytes returns every byte the store holds, check value first and then
// keys by term, for plaintext searches and before/after comparisons.
func (m *memStore) allBytes() []byte {
	b := []byte{}
	for _, t := range m.terms() {
		m.mu.Lock()
		b = append(b, m.keys[t].Wrapped...)
		m.mu.Unlock()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return append(bytes.Clone(m.check), b...)
}

func cloneKey(k vault.WrappedKey) vault.WrappedKey {
	k.Wrapped = bytes.Clone(k.Wrapped)
	return k
}
