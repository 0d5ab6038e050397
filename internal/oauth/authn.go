package oauth

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/lastused"
	"github.com/mcpgate/mcpgate/internal/store"
)

// TokenAuthenticator is the mcpgate.Authenticator of OAuth access tokens,
// presented as an Authorization bearer token. Like the key authenticator it
// caches what it read (by the token's hash, never the token), drops a
// workspace's entries when a grant or membership of it changes on any
// replica (LISTEN/NOTIFY), and batches last-used times off the call path.
type TokenAuthenticator struct {
	db       *store.DB
	srv      *Server
	resource string
	trust    CacheTrust
	now      func() time.Time

	tokens sync.Map // string(hash) -> *cachedToken
	gen    atomic.Uint64

	used *lastused.Recorder
}

type cachedToken struct {
	tok     store.AccessToken
	fetched time.Time
}

// NewAuthenticator returns the access-token authenticator for the server's
// resource and starts its last-used flush; Close stops it.
func (s *Server) NewAuthenticator() *TokenAuthenticator {
	a := &TokenAuthenticator{db: s.db, srv: s, resource: s.resource, trust: s.opts.Trust, now: s.now}
	a.used = lastused.New(lastused.Options{Write: s.db.TouchGrants, Now: s.now, Tick: a.sweep,
		OnError: func(err error, n int) { s.log.Warn("record grant last use", "err", err, "grants", n) }})
	s.tokens = a
	return a
}

// presentedToken returns the bearer token of a request to /mcp when it has
// the shape of an access token; MCP keys (and the connector URL) belong to
// the key authenticator.
func presentedToken(r *http.Request) string {
	if r.PathValue("key") != "" || mcpgate.ConnectorURLKey(r.URL.Path) != "" {
		return ""
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	tok = strings.TrimSpace(tok)
	if !strings.HasPrefix(tok, accessPrefix) {
		return ""
	}
	return tok
}

// Authenticate implements mcpgate.Authenticator.
func (a *TokenAuthenticator) Authenticate(r *http.Request) (*mcpgate.Actor, error) {
	tok := presentedToken(r)
	if tok == "" {
		return nil, nil
	}
	actor, err := a.check(r.Context(), tok)
	if err != nil {
		return nil, err
	}
	a.used.Mark(actor.GrantID)
	return actor, nil
}

// refused is a refused access token; its reason says so in the metrics
// (oauth_unknown, oauth_revoked, oauth_expired, oauth_audience).
func refused(reason string) error { return &mcpgate.AuthError{Reason: "oauth_" + reason} }

func (a *TokenAuthenticator) check(ctx context.Context, tok string) (*mcpgate.Actor, error) {
	hash := mcpgate.HashToken(tok)
	now := a.now()
	cached, _ := a.tokens.Load(string(hash))
	ct, _ := cached.(*cachedToken)
	if ct == nil || !(a.trust.Fresh(ct.fetched) || a.trust.SkipReload(ct.fetched)) {
		gen := a.gen.Load()
		t, err := a.db.FindAccessToken(ctx, hash)
		switch {
		case mcpgate.ErrorCode(err) == mcpgate.ENotFound:
			return nil, refused("unknown")
		case err != nil:
			a.trust.Failed()
			if ct == nil || !a.trust.Stale(ct.fetched) {
				return nil, err
			}
			// The database is away: the token as known before stands in,
			// exactly as a key does (service.cacheTrust).
		default:
			ct = &cachedToken{tok: *t, fetched: now}
			a.tokens.Store(string(hash), ct)
			// A load that overlapped an invalidation may have read the
			// grant before it was revoked: do not keep it.
			if a.gen.Load() != gen {
				a.tokens.CompareAndDelete(string(hash), ct)
			}
		}
	}
	g := &ct.tok.Grant
	switch {
	case g.RevokedAt != nil:
		return nil, refused("revoked")
	case !now.Before(ct.tok.ExpiresAt):
		return nil, refused("expired")
	case g.Resource != a.resource:
		// RFC 8707: a token for another resource (another gateway, or a
		// PUBLIC_URL that changed) is not a token for this one.
		return nil, refused("audience")
	}
	return &mcpgate.Actor{UserID: g.UserID, Email: g.UserEmail, WorkspaceID: g.WorkspaceID, Scope: g.Scope,
		GrantID: g.ID, ClientName: g.ClientName, Source: mcpgate.SourceMCP}, nil
}

// Invalidate drops cached tokens of a workspace (every workspace for ""):
// on a grant change, and on a membership change ("keys"), since removing a
// member deletes their grants.
func (a *TokenAuthenticator) Invalidate(kind, workspaceID string) {
	if kind != store.InvalidateGrants && kind != store.InvalidateKeys && kind != "" {
		return
	}
	a.gen.Add(1)
	a.tokens.Range(func(k, v any) bool {
		if kind == "" || workspaceID == "" || v.(*cachedToken).tok.Grant.WorkspaceID == workspaceID {
			a.tokens.Delete(k)
		}
		return true
	})
}

// Close writes last-used times and stops their flush.
func (a *TokenAuthenticator) Close() { a.used.Close() }

// sweep drops entries that can serve neither as fresh nor through an
// outage, so the cache holds only tokens in use.
func (a *TokenAuthenticator) sweep() {
	a.tokens.Range(func(k, v any) bool {
		if f := v.(*cachedToken).fetched; !a.trust.Fresh(f) && !a.trust.Stale(f) {
			a.tokens.Delete(k)
		}
		return true
	})
}
