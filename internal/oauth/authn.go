package oauth

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/lastused"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/trustcache"
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
	now      func() time.Time

	tokens *trustcache.Cache[store.AccessToken] // by string(hash)

	used *lastused.Recorder
}

// NewAuthenticator returns the access-token authenticator for the server's
// resource and starts its last-used flush; Close stops it.
func (s *Server) NewAuthenticator() *TokenAuthenticator {
	a := &TokenAuthenticator{db: s.db, srv: s, resource: s.resource, now: s.now,
		tokens: trustcache.New[store.AccessToken](trustcache.Options{Trust: s.opts.Trust, Now: s.now})}
	// Each flush also sweeps the cache, so that it holds only tokens in use.
	a.used = lastused.New(lastused.Options{Write: s.db.TouchGrants, Now: s.now, Tick: a.tokens.Sweep,
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
	// While the database is away, the token as known before stands in,
	// exactly as a key does (service.cacheTrust).
	t, err := a.tokens.Get(ctx, string(hash), func(ctx context.Context) (store.AccessToken, error) {
		t, err := a.db.FindAccessToken(ctx, hash)
		if err != nil {
			return store.AccessToken{}, err
		}
		return *t, nil
	})
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
		return nil, refused("unknown")
	}
	if err != nil {
		return nil, err
	}
	g := &t.Grant
	switch {
	case g.RevokedAt != nil:
		return nil, refused("revoked")
	case !now.Before(t.ExpiresAt):
		return nil, refused("expired")
	case !a.srv.ownsResource(g.Resource):
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
	a.tokens.Invalidate(func(t store.AccessToken) bool {
		return kind == "" || workspaceID == "" || t.Grant.WorkspaceID == workspaceID
	})
}

// Close writes last-used times and stops their flush.
func (a *TokenAuthenticator) Close() { a.used.Close() }
