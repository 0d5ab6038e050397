package store

import (
	"context"
	"fmt"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/trustcache"
	"github.com/mcpgate/mcpgate/vault"
)

// CredentialCache keeps workspaces' credentials in their sealed form, so that
// a tool call does not query the database for its credential: it opens the
// cached ciphertext with the keyring (microseconds) instead. Plain text is
// never cached. Entries are dropped by Invalidate, which the gateway calls
// on the replicas' change notifications, and expire after a TTL as a safety
// net. While the database is away, an entry the trust allows stands in.
type CredentialCache struct {
	db      *DB
	entries *trustcache.Cache[sealedCredential] // workspace + "\x00" + connector
}

type sealedCredential struct {
	workspace string
	id        string
	ct        []byte
}

// NewCredentialCache returns a cache over the database.
func (db *DB) NewCredentialCache(trust trustcache.Trust) *CredentialCache {
	return &CredentialCache{db: db, entries: trustcache.New[sealedCredential](trustcache.Options{Trust: trust})}
}

// Open returns a workspace's credential in plain text for one call.
func (c *CredentialCache) Open(ctx context.Context, sealer Sealer, workspaceID, connector string) (mcpgate.Secret, error) {
	key := workspaceID + "\x00" + connector
	e, err := c.entries.Get(ctx, key, func(ctx context.Context) (sealedCredential, error) {
		id, ct, err := c.db.sealedCredential(ctx, workspaceID, connector)
		return sealedCredential{workspace: workspaceID, id: id, ct: ct}, err
	})
	if err != nil {
		return "", err
	}
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
	c.entries.Invalidate(func(e sealedCredential) bool { return workspaceID == "" || e.workspace == workspaceID })
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
