package auth

import (
	"context"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/trustcache"
)

// Store is what the authenticators read and write; *store.DB implements
// it.
type Store interface {
	// FindKeyForAuth returns a key by id with the hash of its secret,
	// revoked or expired ones included (the authenticator says why it
	// refuses them).
	FindKeyForAuth(ctx context.Context, id string) (*mcpgate.APIKey, []byte, error)
	// TouchKeys records keys' last-use times.
	TouchKeys(ctx context.Context, used map[string]time.Time) error
	// FindAccessToken returns an access token by its hash, with its grant.
	FindAccessToken(ctx context.Context, hash []byte) (*store.AccessToken, error)
	// TouchGrants records grants' last-use times.
	TouchGrants(ctx context.Context, used map[string]time.Time) error
}

// DefaultTTL is how long the default Trust (no Options.Trust: tests) holds
// an entry fresh.
const DefaultTTL = 30 * time.Second

// ttlTrust is the default trust: a TTL, and nothing stands in.
type ttlTrust struct {
	ttl time.Duration
	now func() time.Time
}

func (t ttlTrust) Fresh(fetched time.Time) bool { return t.now().Sub(fetched) < t.ttl }
func (ttlTrust) Stale(time.Time) bool           { return false }
func (ttlTrust) Failed()                        {}
func (ttlTrust) SkipReload(time.Time) bool      { return false }
func (ttlTrust) Revalidate(time.Time) bool      { return false }

// trustOr returns t, or the default trust on the clock now.
func trustOr(t trustcache.Trust, now func() time.Time) trustcache.Trust {
	if t != nil {
		return t
	}
	return ttlTrust{ttl: DefaultTTL, now: now}
}

// Auth failure reasons, for metrics and logs only, never responses.
const (
	reasonMalformed = "malformed"
	reasonUnknown   = "unknown"
	reasonRevoked   = "revoked"
	reasonExpired   = "expired"
)
