package service

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/lastused"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/trustcache"
)

// KeyAuthenticator is the mcpgate.Authenticator of MCP keys, presented in
// the connector URL's path, as an Authorization bearer token, or in
// X-API-Key. It caches keys (with the hash of their secret, never the
// secret) and batches last-used times off the call path.
type KeyAuthenticator struct {
	db  *store.DB
	log *slog.Logger
	now func() time.Time

	keys *trustcache.Cache[cachedKey] // by key id

	used *lastused.Recorder
}

type cachedKey struct {
	key  mcpgate.APIKey
	hash []byte
}

// Auth failure reasons, for metrics and logs only, never responses.
const (
	reasonMalformed = "malformed"
	reasonUnknown   = "unknown"
	reasonRevoked   = "revoked"
	reasonExpired   = "expired"
)

// NewKeyAuthenticator returns the key authenticator of the service's
// database and starts its last-used flush; Close stops it.
func (s *Service) NewKeyAuthenticator() *KeyAuthenticator {
	a := &KeyAuthenticator{db: s.db, log: s.log, now: s.now,
		keys: trustcache.New[cachedKey](trustcache.Options{Trust: s.trust, Now: s.now, BeforeStore: s.beforeCache})}
	a.used = lastused.New(lastused.Options{Write: s.db.TouchKeys, Now: s.now,
		OnError: func(err error, n int) { s.log.Warn("record key last use", "err", err, "keys", n) }})
	return a
}

// PresentedKey returns the key a request presents: the connector URL's path
// segment, an Authorization bearer token, or X-API-Key; "" for none.
func PresentedKey(r *http.Request) string {
	if k := r.PathValue("key"); k != "" {
		return k
	}
	if k := mcpgate.ConnectorURLKey(r.URL.Path); k != "" {
		return k
	}
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return ""
	}
	return strings.TrimSpace(r.Header.Get("X-API-Key"))
}

// Authenticate implements mcpgate.Authenticator.
func (a *KeyAuthenticator) Authenticate(r *http.Request) (*mcpgate.Actor, error) {
	presented := PresentedKey(r)
	if presented == "" {
		return nil, nil
	}
	actor, err := a.check(r.Context(), presented)
	if err != nil {
		return nil, err
	}
	a.used.Mark(actor.KeyID)
	return actor, nil
}

func (a *KeyAuthenticator) check(ctx context.Context, presented string) (*mcpgate.Actor, error) {
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
	return a.verify(ck, secret, now)
}

// verify checks a presented secret and the key's state.
func (a *KeyAuthenticator) verify(ck cachedKey, secret string, now time.Time) (*mcpgate.Actor, error) {
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
// workspaceID is "". Only "keys" and "" concern keys.
func (a *KeyAuthenticator) Invalidate(kind, workspaceID string) {
	if kind != InvalidateKeys && kind != "" {
		return
	}
	a.keys.Invalidate(func(ck cachedKey) bool { return workspaceID == "" || ck.key.WorkspaceID == workspaceID })
}

// Close writes last-used times and stops their flush.
func (a *KeyAuthenticator) Close() { a.used.Close() }
