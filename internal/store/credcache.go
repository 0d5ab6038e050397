package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/vault"
)

// CredentialCache keeps workspaces' credentials in their sealed form, so that
// a tool call does not query the database for its credential: it opens the
// cached ciphertext with the keyring (microseconds) instead. Plain text is
// never cached. Entries are dropped by Invalidate, which the gateway calls
// on the replicas' change notifications, and expire after a TTL as a safety
// net. While the database is away, an entry the trust allows stands in.
type CredentialCache struct {
	db    *DB
	trust CacheTrust
	// gen counts invalidations; an entry read before one is not stored, so a
	// fetch racing a change cannot keep the old ciphertext.
	gen     atomic.Uint64
	entries sync.Map // workspace + "\x00" + connector -> *sealedEntry
}

type sealedEntry struct {
	workspace string
	id        string
	ct        []byte
	fetched   time.Time
}

// CacheTrust decides how long a cached entry may be used: Fresh while no
// reload is due, Stale when a reload failed (the database is away) and the
// entry may still stand in.
type CacheTrust interface {
	Fresh(fetched time.Time) bool
	Stale(fetched time.Time) bool
	// SkipReload says not to try the database (it failed a moment ago).
	SkipReload(fetched time.Time) bool
	// Failed records that a reload could not reach the database.
	Failed()
}

// NewCredentialCache returns a cache over the database.
func (db *DB) NewCredentialCache(trust CacheTrust) *CredentialCache {
	return &CredentialCache{db: db, trust: trust}
}

// Open returns a workspace's credential in plain text for one call.
func (c *CredentialCache) Open(ctx context.Context, sealer Sealer, workspaceID, connector string) (mcpgate.Secret, error) {
	key := workspaceID + "\x00" + connector
	var e *sealedEntry
	cached, _ := c.entries.Load(key)
	if old, ok := cached.(*sealedEntry); ok && (c.trust.Fresh(old.fetched) || c.trust.SkipReload(old.fetched)) {
		e = old
	} else {
		gen := c.gen.Load()
		id, ct, err := c.db.sealedCredential(ctx, workspaceID, connector)
		if err != nil {
			if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
				return "", err
			}
			c.trust.Failed()
			if ok && c.trust.Stale(old.fetched) {
				// The database is away: the credential known before stands in.
				return c.open(ctx, sealer, key, workspaceID, old)
			}
			return "", err
		}
		e = &sealedEntry{workspace: workspaceID, id: id, ct: ct, fetched: time.Now()}
		// Store, then check: an invalidation between the read and the
		// store takes the entry back out, so no change is missed.
		c.entries.Store(key, e)
		if c.gen.Load() != gen {
			c.entries.CompareAndDelete(key, e)
		}
	}
	return c.open(ctx, sealer, key, workspaceID, e)
}

func (c *CredentialCache) open(ctx context.Context, sealer Sealer, key, workspaceID string, e *sealedEntry) (mcpgate.Secret, error) {
	pt, err := sealer.OpenContext(ctx, e.ct, vault.CredentialAAD(workspaceID, e.id))
	if err != nil {
		c.entries.Delete(key)
		return "", fmt.Errorf("open credential: %w", err)
	}
	return mcpgate.Secret(pt), nil
}

// Invalidate drops a workspace's cached credentials, or every workspace's
// when workspaceID is "".
func (c *CredentialCache) Invalidate(workspaceID string) {
	c.gen.Add(1)
	c.entries.Range(func(k, v any) bool {
		if workspaceID == "" || v.(*sealedEntry).workspace == workspaceID {
			c.entries.Delete(k)
		}
		return true
	})
}

func (db *DB) sealedCredential(ctx context.Context, workspaceID, connector string) (string, []byte, error) {
	var id string
	var ct []byte
	err := db.Pool.QueryRow(ctx, `SELECT id, ciphertext FROM connections WHERE workspace_id = $1 AND connector = $2`,
		workspaceID, connector).Scan(&id, &ct)
	if err != nil {
		return "", nil, mapError(err, connNotFound)
	}
	return id, ct, nil
}
