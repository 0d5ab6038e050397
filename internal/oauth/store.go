package oauth

import (
	"context"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
)

// Store is what the server reads and writes, exactly the methods it calls;
// *store.DB implements it (the wiring passes the database as it). Clients,
// codes and grants are kept by the store, which also tells every replica
// of a revocation (LISTEN/NOTIFY).
type Store interface {
	// SaveOAuthClient stores a client: a registration (from the address
	// given) or a metadata document just fetched.
	SaveOAuthClient(ctx context.Context, c *mcpgate.OAuthClient, from string) error
	// FindOAuthClient returns a client and when its record was last
	// fetched (a metadata document's cache).
	FindOAuthClient(ctx context.Context, id string) (*mcpgate.OAuthClient, time.Time, error)
	// CreateOAuthCode stores an authorization code by its hash.
	CreateOAuthCode(ctx context.Context, hash []byte, c store.OAuthCode) error
	// RedeemOAuthCode spends a code and, if check accepts it, creates its
	// grant with a first token pair; a code seen before is a
	// *store.ReuseError.
	RedeemOAuthCode(ctx context.Context, hash []byte, now time.Time, check func(*store.OAuthCode) error,
		tokens store.TokenPair) (*mcpgate.Grant, error)
	// RotateRefreshToken spends a refresh token of the client and issues
	// the grant's next token pair; a spent one is a *store.ReuseError and
	// revokes the grant. check sees the grant's resource first.
	RotateRefreshToken(ctx context.Context, hash []byte, clientID string, now time.Time,
		check func(resource string) error, next store.TokenPair) (*mcpgate.Grant, error)
	// GrantOfToken returns the grant of an access or refresh token, live
	// or not.
	GrantOfToken(ctx context.Context, hash []byte) (*mcpgate.Grant, error)
	// RevokeGrant revokes a live grant of a workspace and deletes its
	// tokens.
	RevokeGrant(ctx context.Context, workspaceID, id string) error
	// PruneOAuth deletes spent or expired codes, expired tokens, and
	// clients that never got a grant within unusedFor of being stored.
	PruneOAuth(ctx context.Context, unusedFor time.Duration) error
}
