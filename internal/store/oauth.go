package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
)

// InvalidateGrants is the invalidation kind of OAuth grants: a grant of the
// workspace was revoked, so cached access tokens of it must go.
const InvalidateGrants = "grants"

const (
	clientNotFound = "client not found"
	grantNotFound  = "grant not found"
	codeInvalid    = "the authorization code is invalid, expired or already used"
	tokenInvalid   = "the token is invalid, expired or revoked"
)

// ReuseError is the answer to a single-use secret presented again: a spent
// refresh token (either the client or a thief holds a copy) or an
// authorization code already redeemed. The grant it belongs to has been
// revoked; WorkspaceID says whose caches to drop.
type ReuseError struct {
	// What is "refresh token" or "authorization code".
	What        string
	WorkspaceID string
}

// Error implements error.
func (e *ReuseError) Error() string { return e.What + " reused; its grant is revoked" }

// SaveOAuthClient stores a client: a DCR registration (from the given
// address) or a client ID metadata document just fetched, which replaces
// the cached copy.
func (db *DB) SaveOAuthClient(ctx context.Context, c *mcpgate.OAuthClient, from string) error {
	err := db.Pool.QueryRow(ctx, `
		INSERT INTO oauth_clients (id, kind, name, client_uri, redirect_uris, registered_from)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (id) DO UPDATE SET name = excluded.name, client_uri = excluded.client_uri,
			redirect_uris = excluded.redirect_uris, fetched_at = now()
			WHERE oauth_clients.kind = 'cimd' AND excluded.kind = 'cimd'
		RETURNING created_at`,
		c.ID, c.Kind, c.Name, c.URI, c.RedirectURIs, from).Scan(&c.CreatedAt)
	return mapError(err, "a client with this id exists")
}

// FindOAuthClient returns a client and when its record was last fetched
// (for a metadata document's cache).
func (db *DB) FindOAuthClient(ctx context.Context, id string) (*mcpgate.OAuthClient, time.Time, error) {
	var c mcpgate.OAuthClient
	var fetched time.Time
	err := db.Pool.QueryRow(ctx, `
		SELECT id, kind, name, client_uri, redirect_uris, created_at, fetched_at FROM oauth_clients WHERE id = $1`, id).
		Scan(&c.ID, &c.Kind, &c.Name, &c.URI, &c.RedirectURIs, &c.CreatedAt, &fetched)
	if err != nil {
		return nil, time.Time{}, mapError(err, clientNotFound)
	}
	return &c, fetched, nil
}

// OAuthCode is an authorization code's binding: who consented to what, for
// which client, redirect URI, PKCE challenge and resource.
type OAuthCode struct {
	ClientID    string
	WorkspaceID string
	UserID      string
	// RedirectURI is the authorization request's redirect_uri parameter
	// ("" when it was omitted), which the token request must repeat.
	RedirectURI string
	Challenge   string
	Resource    string
	Scope       mcpgate.Scope
	ExpiresAt   time.Time
}

// CreateOAuthCode stores a code by its hash.
func (db *DB) CreateOAuthCode(ctx context.Context, hash []byte, c OAuthCode) error {
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO oauth_codes (hash, client_id, workspace_id, user_id, redirect_uri, code_challenge, resource, scope, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		hash, c.ClientID, c.WorkspaceID, c.UserID, c.RedirectURI, c.Challenge, c.Resource, c.Scope, c.ExpiresAt)
	return mapError(err, "member not found")
}

// TokenPair is a new access and refresh token, by their hashes.
type TokenPair struct {
	AccessHash, RefreshHash       []byte
	AccessExpires, RefreshExpires time.Time
}

// RedeemOAuthCode spends a code (whatever happens next: a code is tried
// once) and, if check accepts its binding, creates its grant with a first
// token pair. A code seen before is a *ReuseError, and the grant it was
// redeemed for is revoked (RFC 6749 §4.1.2). An unknown or expired code is
// ENotFound.
func (db *DB) RedeemOAuthCode(ctx context.Context, hash []byte, now time.Time, check func(*OAuthCode) error,
	tokens TokenPair) (*mcpgate.Grant, error) {
	var c OAuthCode
	var usedBefore *time.Time
	var grantID *string
	err := db.Pool.QueryRow(ctx, `
		WITH old AS (SELECT hash, used_at, grant_id::text FROM oauth_codes WHERE hash = $1 FOR UPDATE)
		UPDATE oauth_codes c SET used_at = coalesce(c.used_at, now()) FROM old WHERE c.hash = old.hash
		RETURNING c.client_id, c.workspace_id, c.user_id, c.redirect_uri, c.code_challenge, c.resource, c.scope,
			c.expires_at, old.used_at, old.grant_id`, hash).
		Scan(&c.ClientID, &c.WorkspaceID, &c.UserID, &c.RedirectURI, &c.Challenge, &c.Resource, &c.Scope,
			&c.ExpiresAt, &usedBefore, &grantID)
	if err != nil {
		return nil, mapError(err, codeInvalid)
	}
	if usedBefore != nil {
		if grantID != nil {
			if err := db.revokeGrant(ctx, c.WorkspaceID, *grantID); err != nil && mcpgate.ErrorCode(err) != mcpgate.ENotFound {
				return nil, err
			}
		}
		return nil, &ReuseError{What: "authorization code", WorkspaceID: c.WorkspaceID}
	}
	if !now.Before(c.ExpiresAt) {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "%s", codeInvalid)
	}
	if err := check(&c); err != nil {
		return nil, err
	}
	var g mcpgate.Grant
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `
			INSERT INTO oauth_grants (workspace_id, user_id, client_id, scope, resource) VALUES ($1, $2, $3, $4, $5)
			RETURNING id`, c.WorkspaceID, c.UserID, c.ClientID, c.Scope, c.Resource).Scan(&g.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE oauth_codes SET grant_id = $2 WHERE hash = $1`, hash, g.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE oauth_clients SET used_at = now() WHERE id = $1 AND used_at IS NULL`, c.ClientID); err != nil {
			return err
		}
		return insertTokens(ctx, tx, g.ID, tokens)
	})
	if err != nil {
		return nil, mapError(err, "member not found")
	}
	return db.findGrant(ctx, c.WorkspaceID, g.ID)
}

func insertTokens(ctx context.Context, tx pgx.Tx, grantID string, t TokenPair) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO oauth_tokens (hash, grant_id, kind, expires_at)
		VALUES ($1, $2, 'access', $3), ($4, $2, 'refresh', $5)`,
		t.AccessHash, grantID, t.AccessExpires, t.RefreshHash, t.RefreshExpires)
	return err
}

// RotateRefreshToken spends a refresh token of the client and issues the
// grant's next token pair. A spent token is a *ReuseError and revokes the
// grant; an unknown, expired or revoked one, or another client's, is
// ENotFound. check sees the grant's resource first: its error is returned
// with nothing changed (a token of another issuer neither rotates nor
// counts as reused).
func (db *DB) RotateRefreshToken(ctx context.Context, hash []byte, clientID string, now time.Time,
	check func(resource string) error, next TokenPair) (*mcpgate.Grant, error) {
	var g *mcpgate.Grant
	var reused *ReuseError
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var grantID, wsID, owner, resource string
		var expires time.Time
		var used, revoked *time.Time
		err := tx.QueryRow(ctx, `
			SELECT g.id, g.workspace_id, g.client_id, g.resource, t.expires_at, t.used_at, g.revoked_at
			FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
			WHERE t.hash = $1 AND t.kind = 'refresh' FOR UPDATE OF t, g`, hash).
			Scan(&grantID, &wsID, &owner, &resource, &expires, &used, &revoked)
		if err != nil {
			return err
		}
		if revoked != nil || owner != clientID || !now.Before(expires) {
			return pgx.ErrNoRows
		}
		if err := check(resource); err != nil {
			return err
		}
		if used != nil {
			reused = &ReuseError{What: "refresh token", WorkspaceID: wsID}
			return revokeGrantTx(ctx, tx, wsID, grantID)
		}
		if _, err := tx.Exec(ctx, `UPDATE oauth_tokens SET used_at = now() WHERE hash = $1`, hash); err != nil {
			return err
		}
		if err := insertTokens(ctx, tx, grantID, next); err != nil {
			return err
		}
		g = &mcpgate.Grant{ID: grantID, WorkspaceID: wsID}
		return nil
	})
	if err != nil {
		return nil, mapError(err, tokenInvalid)
	}
	if reused != nil {
		return nil, reused
	}
	return db.findGrant(ctx, g.WorkspaceID, g.ID)
}

// AccessToken is what the MCP endpoint needs to know of an access token.
type AccessToken struct {
	Grant     mcpgate.Grant
	ExpiresAt time.Time
}

// FindAccessToken returns an access token by its hash with its grant,
// whatever their state; the caller checks expiry, revocation and audience.
func (db *DB) FindAccessToken(ctx context.Context, hash []byte) (*AccessToken, error) {
	var t AccessToken
	err := scanGrant(db.Pool.QueryRow(ctx, `
		SELECT `+grantColumns+`, t.expires_at FROM oauth_tokens t
		JOIN oauth_grants g ON g.id = t.grant_id JOIN oauth_clients c ON c.id = g.client_id JOIN users u ON u.id = g.user_id
		WHERE t.hash = $1 AND t.kind = 'access'`, hash), &t.Grant, &t.ExpiresAt)
	if err != nil {
		return nil, mapError(err, tokenInvalid)
	}
	return &t, nil
}

// GrantOfToken returns the grant of an access or refresh token, live or not.
func (db *DB) GrantOfToken(ctx context.Context, hash []byte) (*mcpgate.Grant, error) {
	var g mcpgate.Grant
	err := scanGrant(db.Pool.QueryRow(ctx, `
		SELECT `+grantColumns+` FROM oauth_tokens t
		JOIN oauth_grants g ON g.id = t.grant_id JOIN oauth_clients c ON c.id = g.client_id JOIN users u ON u.id = g.user_id
		WHERE t.hash = $1`, hash), &g)
	if err != nil {
		return nil, mapError(err, tokenInvalid)
	}
	return &g, nil
}

const grantColumns = `g.id, g.workspace_id, g.user_id, u.email, g.client_id, c.name, c.kind, g.scope, g.resource,
	g.created_at, g.last_used_at, g.revoked_at`

func scanGrant(r pgx.Row, g *mcpgate.Grant, extra ...any) error {
	return r.Scan(append([]any{&g.ID, &g.WorkspaceID, &g.UserID, &g.UserEmail, &g.ClientID, &g.ClientName, &g.ClientKind,
		&g.Scope, &g.Resource, &g.CreatedAt, &g.LastUsedAt, &g.RevokedAt}, extra...)...)
}

func (db *DB) findGrant(ctx context.Context, workspaceID, id string) (*mcpgate.Grant, error) {
	if !isUUID(id) {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "%s", grantNotFound)
	}
	var g mcpgate.Grant
	err := scanGrant(db.Pool.QueryRow(ctx, `
		SELECT `+grantColumns+` FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id JOIN users u ON u.id = g.user_id
		WHERE g.workspace_id = $1 AND g.id = $2`, workspaceID, id), &g)
	if err != nil {
		return nil, mapError(err, grantNotFound)
	}
	return &g, nil
}

// FindGrant returns one grant of a workspace.
func (db *DB) FindGrant(ctx context.Context, workspaceID, id string) (*mcpgate.Grant, error) {
	return db.findGrant(ctx, workspaceID, id)
}

// ListGrants lists a workspace's live grants, newest first; with userID
// set, only that user's.
func (db *DB) ListGrants(ctx context.Context, workspaceID, userID string) ([]mcpgate.Grant, error) {
	return listRows(ctx, db, func(r pgx.Row, g *mcpgate.Grant) error { return scanGrant(r, g) }, `
		SELECT `+grantColumns+` FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id JOIN users u ON u.id = g.user_id
		WHERE g.workspace_id = $1 AND ($2 = '' OR g.user_id::text = $2) AND g.revoked_at IS NULL
		ORDER BY g.created_at DESC`, workspaceID, userID)
}

// RevokeGrant revokes a live grant of a workspace and deletes its tokens;
// every replica drops it from its cache when the transaction commits.
func (db *DB) RevokeGrant(ctx context.Context, workspaceID, id string) error {
	return db.revokeGrant(ctx, workspaceID, id)
}

func (db *DB) revokeGrant(ctx context.Context, workspaceID, id string) error {
	if !isUUID(id) {
		return mcpgate.Errorf(mcpgate.ENotFound, "%s", grantNotFound)
	}
	return mapError(db.inTx(ctx, func(tx pgx.Tx) error { return revokeGrantTx(ctx, tx, workspaceID, id) }), grantNotFound)
}

func revokeGrantTx(ctx context.Context, tx pgx.Tx, workspaceID, id string) error {
	tag, err := tx.Exec(ctx, `UPDATE oauth_grants SET revoked_at = now() WHERE workspace_id = $1 AND id = $2 AND revoked_at IS NULL`,
		workspaceID, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return pgx.ErrNoRows
	}
	if _, err := tx.Exec(ctx, `DELETE FROM oauth_tokens WHERE grant_id = $1`, id); err != nil {
		return err
	}
	return notify(ctx, tx, InvalidateGrants, workspaceID)
}

// TouchGrants records last use for a batch of grants, off the call path.
func (db *DB) TouchGrants(ctx context.Context, used map[string]time.Time) error {
	return db.touchLastUsed(ctx, "oauth_grants", "uuid", used)
}

// PruneOAuth deletes what no longer matters: spent or expired codes, expired
// tokens, and clients (registered, or known by a metadata document) that
// never got a grant within unusedFor of being stored.
func (db *DB) PruneOAuth(ctx context.Context, unusedFor time.Duration) error {
	_, err := db.Pool.Exec(ctx, `
		WITH c AS (DELETE FROM oauth_codes WHERE expires_at < now() - interval '1 hour'),
		     t AS (DELETE FROM oauth_tokens WHERE expires_at < now())
		DELETE FROM oauth_clients WHERE used_at IS NULL AND created_at < now() - make_interval(secs => $1)
			AND NOT EXISTS (SELECT 1 FROM oauth_codes oc WHERE oc.client_id = oauth_clients.id AND oc.expires_at >= now() - interval '1 hour')`,
		unusedFor.Seconds())
	return mapError(err, "")
}
