package auth

import (
	"cmp"
	"context"
	"crypto/subtle"
	"log/slog"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/lastused"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/trustcache"
)

// KeysOptions configure the key authenticator.
type KeysOptions struct {
	Store Store
	// Trust decides how long a cached key may be used (the services'
	// CacheTrust); nil: fresh for DefaultTTL, nothing stands in.
	Trust  trustcache.Trust
	Logger *slog.Logger
	// Now is the clock (tests).
	Now func() time.Time
	// BeforeStore, when set (tests), runs between a load's read and its
	// store, to stage a race with an invalidation.
	BeforeStore func()
}

// Keys is the mcpgate.Authenticator of MCP keys, wherever they were
// presented (the connector URL's path, a bearer token, X-API-Key). It
// caches keys (with the hash of their secret, never the secret) and
// batches last-used times off the call path.
type Keys struct {
	db   Store
	now  func() time.Time
	keys *trustcache.Cache[cachedKey] // by key id
	used *lastused.Recorder
}

type cachedKey struct {
	key  mcpgate.APIKey
	hash []byte
}

// NewKeys returns the key authenticator and starts its last-used flush;
// Close stops it.
func NewKeys(o KeysOptions) *Keys {
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &Keys{db: o.Store, now: o.Now,
		keys: trustcache.New[cachedKey](trustcache.Options{Trust: trustOr(o.Trust, o.Now), Now: o.Now, BeforeStore: o.BeforeStore})}
	log := o.Logger
	a.used = lastused.New(lastused.Options{Write: o.Store.TouchKeys, Now: o.Now,
		OnError: func(err error, n int) { log.Warn("record key last use", "err", err, "keys", n) }})
	return a
}

// Authenticate implements mcpgate.Authenticator. Every credential is a
// key's to judge: one that has not a key's shape is refused as malformed.
// Access tokens are claimed earlier by Tokens, which the front door asks
// first.
func (a *Keys) Authenticate(ctx context.Context, p mcpgate.Presented) (*mcpgate.Actor, error) {
	presented := p.Value.Reveal()
	if presented == "" {
		return nil, nil
	}
	actor, err := a.check(ctx, presented)
	if err != nil {
		return nil, err
	}
	a.used.Mark(actor.KeyID)
	return actor, nil
}

func (a *Keys) check(ctx context.Context, presented string) (*mcpgate.Actor, error) {
	id, secret, ok := mcpgate.ParseMCPKey(presented)
	if !ok {
		return nil, &mcpgate.AuthError{Reason: reasonMalformed}
	}
	now := a.now()
	ck, err := a.keys.Get(ctx, id, func(ctx context.Context) (cachedKey, error) {
		k, hash, err := a.db.FindKeyForAuth(ctx, id)
		if err != nil {
			return cachedKey{}, err
		}
		return cachedKey{key: *k, hash: hash}, nil
	})
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
		return nil, &mcpgate.AuthError{Reason: reasonUnknown}
	}
	if err != nil {
		return nil, err
	}
	return verifyKey(ck, secret, now)
}

// verifyKey checks a presented secret and the key's state.
func verifyKey(ck cachedKey, secret string, now time.Time) (*mcpgate.Actor, error) {
	if subtle.ConstantTimeCompare(mcpgate.HashMCPKeySecret(secret), ck.hash) != 1 {
		return nil, &mcpgate.AuthError{Reason: reasonUnknown}
	}
	if ck.key.RevokedAt != nil {
		return nil, &mcpgate.AuthError{Reason: reasonRevoked}
	}
	if ck.key.ExpiresAt != nil && !now.Before(*ck.key.ExpiresAt) {
		return nil, &mcpgate.AuthError{Reason: reasonExpired}
	}
	return &mcpgate.Actor{UserID: ck.key.UserID, Email: ck.key.OwnerEmail, WorkspaceID: ck.key.WorkspaceID,
		Scope: ck.key.Scope, KeyID: ck.key.ID, Source: mcpgate.SourceMCP}, nil
}

// Invalidate drops cached keys of a workspace, or of every workspace when
// workspaceID is "". Only store.InvalidateKeys and "" (notifications may
// have been missed) concern keys.
func (a *Keys) Invalidate(kind, workspaceID string) {
	if kind != store.InvalidateKeys && kind != "" {
		return
	}
	a.keys.Invalidate(func(ck cachedKey) bool { return workspaceID == "" || ck.key.WorkspaceID == workspaceID })
}

// Close writes last-used times and stops their flush.
func (a *Keys) Close() { a.used.Close() }
