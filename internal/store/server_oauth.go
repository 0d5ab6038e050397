package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/vault"
)

// OAuth to upstream servers: the registration found for a server added
// with the credential kind "oauth", the authorization requests under way,
// and the grants (the sealed tokens) of the workspace and of each person.

const upstreamGrantNotFound = "this server is not connected"

// ServerOAuth is how the gateway signs in to one upstream server.
type ServerOAuth struct {
	ServerID    string
	WorkspaceID string
	// Name and URL are the server's, as read with the registration.
	Name, URL string
	PerPerson bool
	Resource  string
	Issuer    string
	// Metadata is the authorization server's metadata as fetched.
	Metadata     json.RawMessage
	Scopes       string
	ClientID     string
	Registration string // "cimd" or "dcr"
	// ClientSecret is set only by OpenServerOAuthClientSecret.
	ClientSecret mcpgate.Secret
}

// PutServerOAuth stores (or replaces) the OAuth registration of the
// workspace's server named name, with its client secret sealed (none: a
// public client). Any grant and request under way for another issuer goes.
func (db *DB) PutServerOAuth(ctx context.Context, sealer Sealer, workspaceID, name string, o ServerOAuth) error {
	if !isUUID(workspaceID) {
		return mcpgate.Errorf(mcpgate.ENotFound, "%s", serverNotFound)
	}
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var serverID string
		if err := tx.QueryRow(ctx, `SELECT id FROM upstream_servers WHERE workspace_id = $1 AND name = $2`,
			workspaceID, name).Scan(&serverID); err != nil {
			return err
		}
		meta := []byte(o.Metadata)
		if len(meta) == 0 {
			meta = []byte("{}")
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO upstream_server_oauth (id, workspace_id, per_person, resource, issuer, metadata, scopes, client_id, registration)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (id) DO UPDATE SET per_person = EXCLUDED.per_person, resource = EXCLUDED.resource,
				issuer = EXCLUDED.issuer, metadata = EXCLUDED.metadata, scopes = EXCLUDED.scopes,
				client_id = EXCLUDED.client_id, registration = EXCLUDED.registration, updated_at = now()`,
			serverID, workspaceID, o.PerPerson, o.Resource, o.Issuer, meta, o.Scopes, o.ClientID, o.Registration); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM upstream_oauth_grants WHERE workspace_id = $1 AND server_id = $2 AND issuer <> $3`,
			workspaceID, serverID, o.Issuer); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM upstream_oauth_client_secrets WHERE workspace_id = $1 AND id = $2`,
			workspaceID, serverID); err != nil {
			return err
		}
		// The servers' cached rows say whether a server signs in with
		// OAuth: every replica reads them again.
		if err := notify(ctx, tx, InvalidatePolicy, workspaceID); err != nil {
			return err
		}
		if o.ClientSecret == "" {
			return nil
		}
		ct, term, err := seal(sealer, []byte(o.ClientSecret.Reveal()), vault.UpstreamClientSecretAAD(workspaceID, serverID), "client secret")
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO upstream_oauth_client_secrets (id, workspace_id, sealed, key_term) VALUES ($1, $2, $3, $4)`,
			serverID, workspaceID, ct, term)
		return err
	})
	return mapError(err, serverNotFound)
}

// FindServerOAuth returns the OAuth registration of the workspace's server
// named name, or nil when the server signs in otherwise (or is gone). The
// client secret is not opened.
func (db *DB) FindServerOAuth(ctx context.Context, workspaceID, name string) (*ServerOAuth, error) {
	return db.findServerOAuth(ctx, workspaceID, "s.name = $2", name)
}

// FindServerOAuthByID is FindServerOAuth by the server's id.
func (db *DB) FindServerOAuthByID(ctx context.Context, workspaceID, serverID string) (*ServerOAuth, error) {
	if !isUUID(serverID) {
		return nil, nil
	}
	return db.findServerOAuth(ctx, workspaceID, "s.id = $2", serverID)
}

func (db *DB) findServerOAuth(ctx context.Context, workspaceID, where, arg string) (*ServerOAuth, error) {
	if !isUUID(workspaceID) {
		return nil, nil
	}
	o := &ServerOAuth{WorkspaceID: workspaceID}
	err := db.Pool.QueryRow(ctx, `SELECT o.id, s.name, s.url, o.per_person, o.resource, o.issuer, o.metadata, o.scopes,
		o.client_id, o.registration
		FROM upstream_server_oauth o JOIN upstream_servers s ON s.id = o.id
		WHERE o.workspace_id = $1 AND s.workspace_id = $1 AND `+where, workspaceID, arg).
		Scan(&o.ServerID, &o.Name, &o.URL, &o.PerPerson, &o.Resource, &o.Issuer, &o.Metadata, &o.Scopes, &o.ClientID, &o.Registration)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, mapError(err, "")
	}
	return o, nil
}

// OpenServerOAuthClientSecret fills in o.ClientSecret ("" for a public
// client).
func (db *DB) OpenServerOAuthClientSecret(ctx context.Context, sealer Sealer, o *ServerOAuth) error {
	var sealed []byte
	err := db.Pool.QueryRow(ctx, `SELECT sealed FROM upstream_oauth_client_secrets WHERE workspace_id = $1 AND id = $2`,
		o.WorkspaceID, o.ServerID).Scan(&sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		o.ClientSecret = ""
		return nil
	}
	if err != nil {
		return mapError(err, "")
	}
	pt, err := sealer.OpenContext(ctx, sealed, vault.UpstreamClientSecretAAD(o.WorkspaceID, o.ServerID))
	if err != nil {
		return fmt.Errorf("open client secret: %w", err)
	}
	o.ClientSecret = mcpgate.Secret(pt)
	clear(pt)
	return nil
}

// SetServerOAuthPerPerson sets whether each member connects their own
// account. Grants of the other kind go: a switch never lets one person's
// grant stand in for the workspace's, or the other way round.
func (db *DB) SetServerOAuthPerPerson(ctx context.Context, workspaceID, serverID string, perPerson bool) error {
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE upstream_server_oauth SET per_person = $3, updated_at = now() WHERE workspace_id = $1 AND id = $2`,
			workspaceID, serverID, perPerson)
		if err == nil && tag.RowsAffected() == 0 {
			err = pgx.ErrNoRows
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM upstream_oauth_grants WHERE workspace_id = $1 AND server_id = $2 AND (user_id IS NULL) = $3`,
			workspaceID, serverID, perPerson)
		return err
	})
	return mapError(err, serverNotFound)
}

// WidenServerOAuthScopes adds scopes (space-separated) to those the
// server's next authorization requests ask for, keeping the ones it has.
// It returns the scopes as they stand.
func (db *DB) WidenServerOAuthScopes(ctx context.Context, workspaceID, serverID, scopes string) (string, error) {
	var out string
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var have string
		if err := tx.QueryRow(ctx, `SELECT scopes FROM upstream_server_oauth WHERE workspace_id = $1 AND id = $2 FOR UPDATE`,
			workspaceID, serverID).Scan(&have); err != nil {
			return err
		}
		list := strings.Fields(have)
		for _, sc := range strings.Fields(scopes) {
			if !slices.Contains(list, sc) {
				list = append(list, sc)
			}
		}
		out = strings.Join(list, " ")
		if out == have {
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE upstream_server_oauth SET scopes = $3, updated_at = now() WHERE workspace_id = $1 AND id = $2`,
			workspaceID, serverID, out)
		return err
	})
	return out, mapError(err, serverNotFound)
}

// OAuthState is an authorization request under way.
type OAuthState struct {
	WorkspaceID string
	ServerID    string
	UserID      string
	SessionID   string
	ForPerson   bool
	Issuer      string
	Verifier    mcpgate.Secret
	ExpiresAt   time.Time
}

// StateHash is the key an authorization request's state is kept under.
func StateHash(state string) []byte {
	sum := sha256.Sum256([]byte(state))
	return sum[:]
}

// CreateOAuthState records an authorization request under state (only
// its hash is kept), with the verifier sealed. Requests past their expiry
// are removed on the way.
func (db *DB) CreateOAuthState(ctx context.Context, sealer Sealer, state string, st OAuthState) error {
	h := StateHash(state)
	ct, err := sealer.Seal([]byte(st.Verifier.Reveal()), vault.UpstreamStateAAD(st.WorkspaceID, hex.EncodeToString(h)))
	if err != nil {
		return fmt.Errorf("seal verifier: %w", err)
	}
	if _, err := db.Pool.Exec(ctx, `DELETE FROM upstream_oauth_states WHERE expires_at < now()`); err != nil {
		return mapError(err, "")
	}
	_, err = db.Pool.Exec(ctx, `INSERT INTO upstream_oauth_states (state_hash, workspace_id, server_id, user_id, session_id,
		for_person, issuer, verifier, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		h, st.WorkspaceID, st.ServerID, st.UserID, st.SessionID, st.ForPerson, st.Issuer, ct, st.ExpiresAt)
	return mapError(err, serverNotFound)
}

// TakeOAuthState consumes the authorization request under state, if it
// was made by userID in sessionID and has not expired: a state is used
// once, and a state from another person or session is refused (and left
// for its own).
func (db *DB) TakeOAuthState(ctx context.Context, sealer Sealer, state, userID, sessionID string, now time.Time) (*OAuthState, error) {
	const refused = "this sign-in link is not valid: it expired, was already used, or was started in another session; start again from the server's page"
	if !isUUID(userID) || sessionID == "" {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "%s", refused)
	}
	h := StateHash(state)
	st := &OAuthState{UserID: userID, SessionID: sessionID}
	var sealed []byte
	err := db.Pool.QueryRow(ctx, `DELETE FROM upstream_oauth_states
		WHERE state_hash = $1 AND user_id = $2 AND session_id = $3 AND expires_at > $4
		RETURNING workspace_id, server_id, for_person, issuer, verifier, expires_at`, h, userID, sessionID, now).
		Scan(&st.WorkspaceID, &st.ServerID, &st.ForPerson, &st.Issuer, &sealed, &st.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "%s", refused)
	}
	if err != nil {
		return nil, mapError(err, "")
	}
	pt, err := sealer.OpenContext(ctx, sealed, vault.UpstreamStateAAD(st.WorkspaceID, hex.EncodeToString(h)))
	if err != nil {
		return nil, fmt.Errorf("open verifier: %w", err)
	}
	st.Verifier = mcpgate.Secret(pt)
	return st, nil
}

// OAuthTokens are a grant's tokens in plain text, for one exchange.
type OAuthTokens struct {
	AccessToken  mcpgate.Secret `json:"access_token"`
	RefreshToken mcpgate.Secret `json:"refresh_token,omitempty"`
	TokenType    string         `json:"token_type,omitempty"`
	Scope        string         `json:"scope,omitempty"`
}

// OAuthGrant is one connection: the workspace's (UserID "") or a person's.
type OAuthGrant struct {
	ID          string
	WorkspaceID string
	ServerID    string
	Issuer      string
	UserID      string
	Tokens      OAuthTokens
	ExpiresAt   *time.Time
	Status      string // "ok" or "reconnect"
	Version     int64
	ConnectedBy string
	UpdatedAt   time.Time
}

// GrantOK and GrantReconnect are the grant states.
const (
	GrantOK        = "ok"
	GrantReconnect = "reconnect"
)

// seal seals tokens for the grant row id.
func sealTokens(sealer Sealer, owner, id string, t OAuthTokens) ([]byte, int64, error) {
	plain := map[string]string{"access_token": t.AccessToken.Reveal(), "refresh_token": t.RefreshToken.Reveal(),
		"token_type": t.TokenType, "scope": t.Scope}
	pt, err := json.Marshal(plain)
	if err != nil {
		return nil, 0, err
	}
	ct, term, err := seal(sealer, pt, vault.UpstreamGrantAAD(owner, id), "grant")
	clear(pt)
	return ct, term, err
}

func openTokens(ctx context.Context, sealer Sealer, owner, id string, sealed []byte) (OAuthTokens, error) {
	pt, err := sealer.OpenContext(ctx, sealed, vault.UpstreamGrantAAD(owner, id))
	if err != nil {
		return OAuthTokens{}, fmt.Errorf("open grant: %w", err)
	}
	defer clear(pt)
	var plain map[string]string
	if err := json.Unmarshal(pt, &plain); err != nil {
		return OAuthTokens{}, errors.New("open grant: the sealed value is not a JSON object")
	}
	return OAuthTokens{AccessToken: mcpgate.Secret(plain["access_token"]), RefreshToken: mcpgate.Secret(plain["refresh_token"]),
		TokenType: plain["token_type"], Scope: plain["scope"]}, nil
}

// PutOAuthGrant stores the tokens of a connection made now, replacing any
// grant of the same workspace, server, issuer and person (a reconnect).
func (db *DB) PutOAuthGrant(ctx context.Context, sealer Sealer, g OAuthGrant) error {
	if !isUUID(g.WorkspaceID) || !isUUID(g.ServerID) {
		return mcpgate.Errorf(mcpgate.ENotFound, "%s", serverNotFound)
	}
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM upstream_oauth_grants WHERE workspace_id = $1 AND server_id = $2 AND issuer = $3
			AND user_id IS NOT DISTINCT FROM $4`, g.WorkspaceID, g.ServerID, g.Issuer, nullIfEmpty(g.UserID)); err != nil {
			return err
		}
		var id string
		if err := tx.QueryRow(ctx, `SELECT gen_random_uuid()::text`).Scan(&id); err != nil {
			return err
		}
		owner := vault.UpstreamGrantOwner(g.WorkspaceID, g.ServerID, g.Issuer, g.UserID)
		ct, term, err := sealTokens(sealer, owner, id, g.Tokens)
		if err != nil {
			return err
		}
		var stored string
		err = tx.QueryRow(ctx, `INSERT INTO upstream_oauth_grants (id, workspace_id, server_id, issuer, issuer_hash, user_id, sealed,
			key_term, expires_at, connected_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING aad_owner`,
			id, g.WorkspaceID, g.ServerID, g.Issuer, vault.IssuerHash(g.Issuer), nullIfEmpty(g.UserID), ct, term, g.ExpiresAt,
			nullIfEmpty(g.ConnectedBy)).Scan(&stored)
		if err == nil && stored != owner {
			err = fmt.Errorf("put grant: the stored owner %q is not the sealed one", stored)
		}
		return err
	})
	return mapError(err, serverNotFound)
}

const upstreamGrantColumns = `id, workspace_id, server_id, issuer, coalesce(user_id::text, ''), aad_owner, sealed, expires_at, status,
	version, coalesce(connected_by::text, ''), updated_at`

func scanUpstreamGrant(ctx context.Context, sealer Sealer, r pgx.Row) (*OAuthGrant, error) {
	g := &OAuthGrant{}
	var owner string
	var sealed []byte
	if err := r.Scan(&g.ID, &g.WorkspaceID, &g.ServerID, &g.Issuer, &g.UserID, &owner, &sealed, &g.ExpiresAt, &g.Status,
		&g.Version, &g.ConnectedBy, &g.UpdatedAt); err != nil {
		return nil, err
	}
	if sealer == nil {
		return g, nil
	}
	t, err := openTokens(ctx, sealer, owner, g.ID, sealed)
	if err != nil {
		return nil, err
	}
	g.Tokens = t
	return g, nil
}

// FindOAuthGrant returns the grant of the workspace (userID "") or of one
// person for a server and issuer, with its tokens opened (sealer nil: the
// state only). No grant: ENotFound.
func (db *DB) FindOAuthGrant(ctx context.Context, sealer Sealer, workspaceID, serverID, issuer, userID string) (*OAuthGrant, error) {
	if !isUUID(workspaceID) || !isUUID(serverID) {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "%s", upstreamGrantNotFound)
	}
	g, err := scanUpstreamGrant(ctx, sealer, db.Pool.QueryRow(ctx, `SELECT `+upstreamGrantColumns+` FROM upstream_oauth_grants
		WHERE workspace_id = $1 AND server_id = $2 AND issuer = $3 AND user_id IS NOT DISTINCT FROM $4`,
		workspaceID, serverID, issuer, nullIfEmpty(userID)))
	if err != nil {
		return nil, mapError(err, upstreamGrantNotFound)
	}
	return g, nil
}

// RefreshOutcome is what a refresh run under the grant's lock decided.
type RefreshOutcome struct {
	// Tokens and ExpiresAt replace the grant's when Tokens is set.
	Tokens    *OAuthTokens
	ExpiresAt *time.Time
	// Reconnect marks the grant as needing a person to connect again.
	Reconnect bool
}

// RefreshOAuthGrant runs refresh on the grant under its row lock, one
// refresh at a time across replicas: a replica that waited for another's
// refresh finds the version moved and gets the new tokens without asking
// the authorization server again. The rotated tokens are stored in the
// same transaction. refresh's error is returned after its outcome (a
// Reconnect mark) is stored.
func (db *DB) RefreshOAuthGrant(ctx context.Context, sealer Sealer, grantID, workspaceID string, seenVersion int64,
	refresh func(*OAuthGrant) (RefreshOutcome, error)) (*OAuthGrant, error) {
	if !isUUID(workspaceID) || !isUUID(grantID) {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "%s", upstreamGrantNotFound)
	}
	var out *OAuthGrant
	var refreshErr error
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		g, err := scanUpstreamGrant(ctx, sealer, tx.QueryRow(ctx, `SELECT `+upstreamGrantColumns+` FROM upstream_oauth_grants
			WHERE id = $1 AND workspace_id = $2 FOR UPDATE`, grantID, workspaceID))
		if err != nil {
			return err
		}
		out = g
		if g.Version != seenVersion || g.Status != GrantOK {
			return nil // refreshed (or marked) meanwhile
		}
		res, err := refresh(g)
		refreshErr = err
		switch {
		case res.Reconnect:
			g.Status = GrantReconnect
			_, err := tx.Exec(ctx, `UPDATE upstream_oauth_grants SET status = 'reconnect', version = version + 1, updated_at = now()
				WHERE id = $1`, g.ID)
			g.Version++
			return err
		case res.Tokens == nil:
			return nil
		}
		owner := vault.UpstreamGrantOwner(g.WorkspaceID, g.ServerID, g.Issuer, g.UserID)
		ct, term, err := sealTokens(sealer, owner, g.ID, *res.Tokens)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE upstream_oauth_grants SET sealed = $2, key_term = $3, expires_at = $4,
			version = version + 1, updated_at = now() WHERE id = $1`, g.ID, ct, term, res.ExpiresAt); err != nil {
			return err
		}
		g.Tokens, g.ExpiresAt = *res.Tokens, res.ExpiresAt
		g.Version++
		return nil
	})
	if err != nil {
		return nil, mapError(err, upstreamGrantNotFound)
	}
	return out, refreshErr
}

// DeleteOAuthGrant removes a grant and returns it with its tokens opened
// (for revocation at the authorization server).
func (db *DB) DeleteOAuthGrant(ctx context.Context, sealer Sealer, workspaceID, serverID, issuer, userID string) (*OAuthGrant, error) {
	if !isUUID(workspaceID) || !isUUID(serverID) {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "%s", upstreamGrantNotFound)
	}
	g, err := scanUpstreamGrant(ctx, sealer, db.Pool.QueryRow(ctx, `DELETE FROM upstream_oauth_grants
		WHERE workspace_id = $1 AND server_id = $2 AND issuer = $3 AND user_id IS NOT DISTINCT FROM $4 RETURNING `+upstreamGrantColumns,
		workspaceID, serverID, issuer, nullIfEmpty(userID)))
	if err != nil {
		return nil, mapError(err, upstreamGrantNotFound)
	}
	return g, nil
}

// FindOAuthGrantsOfServer returns every grant of a server (the
// workspace's and each person's), with their tokens opened: what a removal
// revokes at the authorization server.
func (db *DB) FindOAuthGrantsOfServer(ctx context.Context, sealer Sealer, workspaceID, serverID string) ([]*OAuthGrant, error) {
	if !isUUID(workspaceID) || !isUUID(serverID) {
		return nil, nil
	}
	rows, err := db.Pool.Query(ctx, `SELECT `+upstreamGrantColumns+` FROM upstream_oauth_grants
		WHERE workspace_id = $1 AND server_id = $2 ORDER BY created_at`, workspaceID, serverID)
	if err != nil {
		return nil, mapError(err, "")
	}
	defer rows.Close()
	var out []*OAuthGrant
	for rows.Next() {
		g, err := scanUpstreamGrant(ctx, sealer, rows)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, mapError(rows.Err(), "")
}
