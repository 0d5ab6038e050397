package auth

import (
	"cmp"
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/lastused"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/trustcache"
)

// AccessTokenPrefix starts every OAuth access token: it tells one from an
// MCP key at a glance, so that the right authenticator claims it, and
// makes leaked ones easy to scan for. The authorization server
// (internal/oauth) issues tokens with it.
const AccessTokenPrefix = "mcpat_"

// TokensOptions configure the access-token authenticator.
type TokensOptions struct {
	Store Store
	// OwnsResource reports whether a grant's resource is this gateway's
	// (oauth.OwnsResource of PUBLIC_URL): a token for another resource (RFC
	// 8707: another gateway on the same database, or a PUBLIC_URL that
	// changed) is refused. Nil owns nothing: every token is refused.
	OwnsResource func(grantResource string) bool
	// Trust decides how long a cached token may be used (the services'
	// CacheTrust, so that tokens follow the same revocation and outage
	// guarantees as keys); nil: fresh for DefaultTTL, nothing stands in.
	Trust  trustcache.Trust
	Logger *slog.Logger
	// Now is the clock (tests).
	Now func() time.Time
}

// Tokens is the mcpgate.Authenticator of OAuth access tokens, presented as
// an Authorization bearer token. Like Keys it caches what it read (by the
// token's hash, never the token), drops a workspace's entries when a grant
// or membership of it changes on any replica (LISTEN/NOTIFY), and batches
// last-used times off the call path.
type Tokens struct {
	db     Store
	owns   func(string) bool
	now    func() time.Time
	tokens *trustcache.Cache[store.AccessToken] // by string(hash)
	used   *lastused.Recorder
}

// NewTokens returns the access-token authenticator and starts its
// last-used flush; Close stops it.
func NewTokens(o TokensOptions) *Tokens {
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &Tokens{db: o.Store, owns: o.OwnsResource, now: o.Now,
		tokens: trustcache.New[store.AccessToken](trustcache.Options{Trust: trustOr(o.Trust, o.Now), Now: o.Now})}
	log := o.Logger
	// Each flush also sweeps the cache, so that it holds only tokens in use.
	a.used = lastused.New(lastused.Options{Write: o.Store.TouchGrants, Now: o.Now, Tick: a.tokens.Sweep,
		OnError: func(err error, n int) { log.Warn("record grant last use", "err", err, "grants", n) }})
	return a
}

// Authenticate implements mcpgate.Authenticator. It claims only bearer
// tokens with the shape of an access token; MCP keys, and whatever came
// in the connector URL or X-API-Key, are the key authenticator's.
func (a *Tokens) Authenticate(ctx context.Context, p mcpgate.Presented) (*mcpgate.Actor, error) {
	tok := p.Value.Reveal()
	if !p.Bearer || !strings.HasPrefix(tok, AccessTokenPrefix) {
		return nil, nil
	}
	actor, err := a.check(ctx, tok)
	if err != nil {
		return nil, err
	}
	a.used.Mark(actor.GrantID)
	return actor, nil
}

// refused is a refused access token; its reason says so in the metrics
// (oauth_unknown, oauth_revoked, oauth_expired, oauth_audience).
func refused(reason string) error { return &mcpgate.AuthError{Reason: "oauth_" + reason} }

func (a *Tokens) check(ctx context.Context, tok string) (*mcpgate.Actor, error) {
	hash := mcpgate.HashToken(tok)
	now := a.now()
	// While the database is away, the token as known before stands in,
	// exactly as a key does.
	t, err := a.tokens.Get(ctx, string(hash), func(ctx context.Context) (store.AccessToken, error) {
		t, err := a.db.FindAccessToken(ctx, hash)
		if err != nil {
			return store.AccessToken{}, err
		}
		return *t, nil
	})
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
		return nil, refused(reasonUnknown)
	}
	if err != nil {
		return nil, err
	}
	g := &t.Grant
	switch {
	case g.RevokedAt != nil:
		return nil, refused(reasonRevoked)
	case !now.Before(t.ExpiresAt):
		return nil, refused(reasonExpired)
	case a.owns == nil || !a.owns(g.Resource):
		return nil, refused("audience")
	}
	return &mcpgate.Actor{UserID: g.UserID, Email: g.UserEmail, WorkspaceID: g.WorkspaceID, Scope: g.Scope,
		GrantID: g.ID, ClientName: g.ClientName, Resource: g.Resource, Source: mcpgate.SourceMCP}, nil
}

// Invalidate drops cached tokens of a workspace (every workspace for ""):
// on a grant change, and on a membership change (store.InvalidateKeys),
// since removing a member deletes their grants.
func (a *Tokens) Invalidate(kind, workspaceID string) {
	if kind != store.InvalidateGrants && kind != store.InvalidateKeys && kind != "" {
		return
	}
	a.tokens.Invalidate(func(t store.AccessToken) bool {
		return kind == "" || workspaceID == "" || t.Grant.WorkspaceID == workspaceID
	})
}

// Close writes last-used times and stops their flush.
func (a *Tokens) Close() { a.used.Close() }
