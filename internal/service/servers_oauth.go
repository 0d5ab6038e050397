package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/upstream"
	"github.com/mcpgate/mcpgate/internal/upstreamauth"
	"github.com/mcpgate/mcpgate/vault"
)

// OAuth to upstream servers, the service side: adding a server whose
// credential kind is "oauth", the Connect flow in a person's browser, and
// the one hook (UpstreamCredentials.Do) through which every call, relay
// and discovery sends a grant's bearer token, refreshing it ahead of
// expiry and once on a 401.

// Bounds of the Connect flow and of refreshing.
const (
	// connectStateTTL is how long an authorization request may take.
	connectStateTTL = 10 * time.Minute
	// refreshAhead is how long before its expiry an access token is
	// refreshed, so that a call does not set out with one about to lapse.
	refreshAhead = time.Minute
)

// UpstreamCredentialsOptions configure the credential hook.
type UpstreamCredentialsOptions struct {
	DB      *store.DB
	Keyring *vault.Keyring
	Audit   Auditor
	Logger  *slog.Logger
	// Network is the hop's policy; the OAuth requests use it too.
	Network   upstream.Network
	PublicURL string
	Now       func() time.Time
	// BeforeRefresh, for tests, runs under the grant's lock before the
	// authorization server is asked: a test holds one refresh there.
	BeforeRefresh func(ctx context.Context)
}

// UpstreamCredentials resolves the credential of one exchange with an
// upstream server: the headers given, or an OAuth server's bearer token
// from the sealed grant of the workspace or of the caller.
type UpstreamCredentials struct {
	core
	keyring       *vault.Keyring
	client        *upstreamauth.Client
	publicURL     string
	beforeRefresh func(ctx context.Context)
}

// NewUpstreamCredentials returns the credential hook.
func NewUpstreamCredentials(o UpstreamCredentialsOptions) *UpstreamCredentials {
	opts := Options{DB: o.DB, Keyring: o.Keyring, Audit: o.Audit, Logger: o.Logger, Now: o.Now}.withCoreDefaults()
	return &UpstreamCredentials{core: newCore(opts), keyring: o.Keyring, publicURL: o.PublicURL, beforeRefresh: o.BeforeRefresh,
		client: &upstreamauth.Client{Network: o.Network, ClientName: "mcpgate (" + o.PublicURL + ")"}}
}

// CredentialError is a call refused for want of a usable grant: the
// message says who must connect, and where. Callers pass it on as it is.
type CredentialError struct{ Err *mcpgate.Error }

func (e *CredentialError) Error() string { return e.Err.Error() }
func (e *CredentialError) Unwrap() error { return e.Err }

func (c *UpstreamCredentials) serverPage(workspaceID, server string) string {
	return c.publicURL + "/app/w/" + workspaceID + "/servers/" + url.PathEscape(server)
}

// Do runs fn, one exchange with the workspace's server named server, with
// target: as it is for a server that takes headers (or nothing), with the
// OAuth bearer of the right grant for an OAuth server. An answer of 401
// refreshes the grant and runs fn once more.
func (c *UpstreamCredentials) Do(ctx context.Context, a *mcpgate.Actor, server string, target upstream.Target,
	fn func(upstream.Target) error) error {
	if c == nil || len(target.Headers) > 0 {
		return fn(target) // an OAuth server has no headers
	}
	o, err := c.db.FindServerOAuth(ctx, a.WorkspaceID, server)
	if err != nil {
		return err
	}
	if o == nil {
		return fn(target)
	}
	g, err := c.usableGrant(ctx, a, o)
	if err != nil {
		return err
	}
	err = fn(bearer(target, g))
	var hop *upstream.Error
	if errors.As(err, &hop) && hop.Status == 403 {
		return c.stepUp(ctx, a, o, hop, err)
	}
	if !errors.As(err, &hop) || hop.Status != 401 {
		return err
	}
	if moved := c.movedAuthServer(ctx, a, o, hop); moved != nil {
		return moved
	}
	if g, err = c.refresh(ctx, a, o, g); err != nil {
		return err
	}
	return fn(bearer(target, g))
}

// doFor is Do for a caller that read the server's row (cached): a server
// that does not sign in with OAuth needs no lookup of a grant, so its
// calls cost no query here.
func (c *UpstreamCredentials) doFor(ctx context.Context, a *mcpgate.Actor, server string, oauth bool, target upstream.Target,
	fn func(upstream.Target) error) error {
	if !oauth {
		return fn(target)
	}
	return c.Do(ctx, a, server, target, fn)
}

// bearer is t with the grant's bearer as its one header (the rest of t,
// such as the capabilities its sessions declare, as it is).
func bearer(t upstream.Target, g *store.OAuthGrant) upstream.Target {
	t.Headers = map[string]mcpgate.Secret{"Authorization": "Bearer " + g.Tokens.AccessToken}
	return t
}

// grantOwner is whose grant a's exchanges with o use: the caller's own on
// a per-person server, the workspace's otherwise. Never the other.
func grantOwner(a *mcpgate.Actor, o *store.ServerOAuth) string {
	if o.PerPerson {
		return a.UserID
	}
	return ""
}

// usableGrant is the grant a's exchange uses, refreshed first when its
// access token is about to expire.
func (c *UpstreamCredentials) usableGrant(ctx context.Context, a *mcpgate.Actor, o *store.ServerOAuth) (*store.OAuthGrant, error) {
	owner := grantOwner(a, o)
	if o.PerPerson && owner == "" {
		return nil, c.notConnected(a, o)
	}
	g, err := c.db.FindOAuthGrant(ctx, c.keyring, a.WorkspaceID, o.ServerID, o.Issuer, owner)
	switch {
	case mcpgate.ErrorCode(err) == mcpgate.ENotFound:
		return nil, c.notConnected(a, o)
	case err != nil:
		return nil, &mcpgate.Error{Code: mcpgate.EUnavailable, RetryAfter: 5, Err: err,
			Message: "the gateway cannot read this server's credential right now; try again in a few seconds"}
	case g.Status == store.GrantReconnect:
		return nil, c.reconnectNeeded(a, o)
	}
	if g.ExpiresAt != nil && g.ExpiresAt.Before(c.now().Add(refreshAhead)) {
		return c.refresh(ctx, a, o, g)
	}
	return g, nil
}

func (c *UpstreamCredentials) notConnected(a *mcpgate.Actor, o *store.ServerOAuth) error {
	page := c.serverPage(a.WorkspaceID, o.Name)
	if o.PerPerson {
		return &CredentialError{Err: mcpgate.Errorf(mcpgate.EUnauthorized, "the server %s needs each member's own account and "+
			"yours is not connected: connect it at %s", o.Name, page)}
	}
	return &CredentialError{Err: mcpgate.Errorf(mcpgate.EUnauthorized, "the server %s is not connected: a workspace admin must "+
		"connect it at %s", o.Name, page)}
}

func (c *UpstreamCredentials) reconnectNeeded(a *mcpgate.Actor, o *store.ServerOAuth) error {
	page := c.serverPage(a.WorkspaceID, o.Name)
	if o.PerPerson {
		return &CredentialError{Err: mcpgate.Errorf(mcpgate.EUnauthorized, "your connection to the server %s was revoked or "+
			"expired: reconnect it at %s", o.Name, page)}
	}
	return &CredentialError{Err: mcpgate.Errorf(mcpgate.EUnauthorized, "the connection to the server %s was revoked or expired: "+
		"a workspace admin must reconnect it at %s", o.Name, page)}
}

// registration reads o's client registration and metadata.
func (c *UpstreamCredentials) registration(ctx context.Context, o *store.ServerOAuth) (*oauthex.AuthServerMeta, upstreamauth.Registration, error) {
	var meta oauthex.AuthServerMeta
	if err := json.Unmarshal(o.Metadata, &meta); err != nil {
		return nil, upstreamauth.Registration{}, fmt.Errorf("server oauth metadata: %w", err)
	}
	if err := c.db.OpenServerOAuthClientSecret(ctx, c.keyring, o); err != nil {
		return nil, upstreamauth.Registration{}, err
	}
	return &meta, upstreamauth.Registration{ClientID: o.ClientID, ClientSecret: o.ClientSecret, Kind: o.Registration}, nil
}

// refresh refreshes g under its row lock: one refresh at a time across
// replicas, and one that waited for another's takes the new tokens. A
// refusal (invalid_grant) marks the grant for reconnection and is audited
// (without a token); an authorization server that cannot be reached
// leaves the grant as it is.
func (c *UpstreamCredentials) refresh(ctx context.Context, a *mcpgate.Actor, o *store.ServerOAuth, g *store.OAuthGrant) (*store.OAuthGrant, error) {
	meta, reg, err := c.registration(ctx, o)
	if err != nil {
		return nil, err
	}
	var refused error
	next, err := c.db.RefreshOAuthGrant(ctx, c.keyring, g.ID, g.WorkspaceID, g.Version, func(cur *store.OAuthGrant) (store.RefreshOutcome, error) {
		if c.beforeRefresh != nil {
			c.beforeRefresh(ctx)
		}
		if cur.Tokens.RefreshToken == "" {
			refused = errors.New("the grant has no refresh token")
			return store.RefreshOutcome{Reconnect: true}, nil
		}
		t, err := c.client.Refresh(ctx, meta, reg, cur.Tokens.RefreshToken, o.Resource)
		if upstreamauth.InvalidGrant(err) {
			refused = err
			return store.RefreshOutcome{Reconnect: true}, nil
		}
		if err != nil {
			return store.RefreshOutcome{}, err
		}
		rt := t.RefreshToken
		if rt == "" {
			rt = cur.Tokens.RefreshToken // the server does not rotate them
		}
		return store.RefreshOutcome{Tokens: &store.OAuthTokens{AccessToken: t.AccessToken, RefreshToken: rt, TokenType: t.TokenType,
			Scope: t.Scope}, ExpiresAt: t.ExpiresAt}, nil
	})
	if refused != nil {
		ev := mcpgate.NewAdminEvent(a, mcpgate.ActionServerRefreshFailed, map[string]any{"server": o.Name, "issuer": o.Issuer,
			"grant": grantKind(o)})
		ev.Outcome, ev.Message = mcpgate.OutcomeError, cutText(refused.Error(), maxMessage)
		c.record(ctx, ev)
	}
	if err != nil {
		if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
			return nil, c.notConnected(a, o) // disconnected meanwhile
		}
		return nil, &mcpgate.Error{Code: mcpgate.EUnavailable, RetryAfter: 5, Err: err,
			Message: cutText("the gateway could not renew its access to the server "+o.Name+": "+err.Error(), maxMessage)}
	}
	if next.Status == store.GrantReconnect {
		return nil, c.reconnectNeeded(a, o)
	}
	return next, nil
}

func grantKind(o *store.ServerOAuth) string {
	if o.PerPerson {
		return "person"
	}
	return "workspace"
}

// status is what a sees of o's grant.
func (c *UpstreamCredentials) status(ctx context.Context, a *mcpgate.Actor, o *store.ServerOAuth) (*mcpgate.ServerOAuthStatus, error) {
	st := &mcpgate.ServerOAuthStatus{Issuer: o.Issuer, Registration: o.Registration, PerPerson: o.PerPerson,
		State: mcpgate.OAuthNotConnected, ConnectURL: c.serverPage(a.WorkspaceID, o.Name)}
	owner := grantOwner(a, o)
	if o.PerPerson && owner == "" {
		return st, nil
	}
	g, err := c.db.FindOAuthGrant(ctx, nil, a.WorkspaceID, o.ServerID, o.Issuer, owner)
	switch {
	case mcpgate.ErrorCode(err) == mcpgate.ENotFound:
		return st, nil
	case err != nil:
		return nil, err
	case g.Status == store.GrantReconnect:
		st.State = mcpgate.OAuthReconnectNeeded
	default:
		st.State = mcpgate.OAuthConnected
	}
	at := g.UpdatedAt
	st.ConnectedAt, st.ExpiresAt = &at, g.ExpiresAt
	return st, nil
}

// callbackURL is the redirect URI the gateway registers.
func (c *UpstreamCredentials) callbackURL() string { return c.publicURL + mcpgate.UpstreamCallbackPath }

// documentURL is the gateway's client ID (metadata document URL).
func (c *UpstreamCredentials) documentURL() string {
	return c.publicURL + mcpgate.UpstreamClientDocumentPath
}

// ClientMetadataDocument implements mcpgate.ServerOAuthService.
func (s *Servers) ClientMetadataDocument() map[string]any {
	c := s.creds
	doc := upstreamauth.ClientMetadata(c.client.ClientName, c.documentURL(), c.callbackURL())
	doc["client_id"] = c.documentURL()
	return doc
}

var _ mcpgate.ServerOAuthService = (*Servers)(nil)

// addServerByKind adds an OAuth server (done true); any other kind is
// left to AddServer (done false), an unknown one refused.
func (s *Servers) addServerByKind(ctx context.Context, a *mcpgate.Actor, in mcpgate.ServerInput) (done bool, _ *mcpgate.Server, _ error) {
	switch in.Credential {
	case "", mcpgate.CredentialNone, mcpgate.CredentialHeaders:
		if in.PerPerson {
			return true, nil, mcpgate.Errorf(mcpgate.EInvalid, "per_person is for servers whose credential is oauth")
		}
		if in.OAuthClientID != "" || in.OAuthClientSecret != "" {
			return true, nil, mcpgate.Errorf(mcpgate.EInvalid, "oauth_client_id and oauth_client_secret are for servers whose credential is oauth")
		}
		return false, nil, nil
	case mcpgate.CredentialOAuth:
	default:
		return true, nil, mcpgate.Errorf(mcpgate.EInvalid, "credential must be none, headers or oauth")
	}
	srv, err := s.addOAuthServer(ctx, a, in)
	return true, srv, err
}

// addOAuthServer adds a server that answers 401 with protected-resource
// metadata: the metadata is fetched, the gateway registered at the
// authorization server, and the server stored with no tools until it is
// connected (its tools are discovered with the first grant).
func (s *Servers) addOAuthServer(ctx context.Context, a *mcpgate.Actor, in mcpgate.ServerInput) (*mcpgate.Server, error) {
	if s.creds == nil || s.pool == nil {
		return nil, mcpgate.Errorf(mcpgate.EUnavailable, "this gateway cannot reach upstream servers")
	}
	if err := s.checkName(in.Name); err != nil {
		return nil, err
	}
	if err := s.checkURL(in.URL); err != nil {
		return nil, err
	}
	if len(in.Headers) > 0 {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "a server whose credential is oauth takes no headers")
	}
	if len(in.Aliases) > 0 {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "give aliases once the server is connected and its tools are known")
	}
	if err := checkManualClient(in); err != nil {
		return nil, err
	}
	if _, err := s.db.FindServer(ctx, a.WorkspaceID, in.Name); err == nil {
		return nil, errServerExists(in.Name)
	} else if mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		return nil, err
	}
	fail := func(err error) (*mcpgate.Server, error) {
		err = mcpgate.WrapError(mcpgate.EUpstream, err, cutText("the gateway could not use this server: "+authMessage(err), maxMessage))
		ev := mcpgate.NewAdminEvent(a, mcpgate.ActionServerDiscoveryFailed, map[string]any{"server": in.Name,
			"url": auditURL(in.URL), "credential": mcpgate.CredentialOAuth})
		ev.Outcome, ev.Message = mcpgate.OutcomeError, mcpgate.ErrorMessage(err)
		s.record(ctx, ev)
		return nil, err
	}
	d, err := s.creds.client.Discover(ctx, in.URL)
	if err != nil {
		return fail(err)
	}
	reg := &upstreamauth.Registration{ClientID: in.OAuthClientID, ClientSecret: in.OAuthClientSecret, Kind: registrationManual}
	if in.OAuthClientID == "" {
		if reg, err = s.creds.client.Register(ctx, &d.Metadata, s.creds.documentURL(), s.creds.callbackURL()); err != nil {
			return fail(err)
		}
	}
	err = s.db.ChangeServer(ctx, s.keyring, a.WorkspaceID, in.Name, func(st *store.ServerState) (*store.ServerWrite, error) {
		if st.Server != nil {
			return nil, errServerExists(in.Name)
		}
		srv := store.UpstreamServer{Server: mcpgate.Server{Name: in.Name, URL: in.URL, Enabled: true, Health: mcpgate.HealthOK}}
		return &store.ServerWrite{Server: srv, ActorID: a.UserID}, nil
	})
	if err != nil {
		return nil, err
	}
	o := store.ServerOAuth{PerPerson: in.PerPerson, Resource: d.Resource, Issuer: d.Issuer, Metadata: d.MetadataRaw,
		Scopes: d.Scopes, ClientID: reg.ClientID, ClientSecret: reg.ClientSecret, Registration: reg.Kind}
	if err := s.db.PutServerOAuth(ctx, s.keyring, a.WorkspaceID, in.Name, o); err != nil {
		if delErr := s.db.DeleteServer(ctx, a.WorkspaceID, in.Name); delErr != nil {
			s.log.WarnContext(ctx, "remove a half-added oauth server", "server", in.Name, "err", delErr)
		}
		return nil, err
	}
	s.changed(a.WorkspaceID)
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerAdded, map[string]any{"server": in.Name, "url": auditURL(in.URL),
		"credential": mcpgate.CredentialOAuth, "issuer": d.Issuer, "registration": reg.Kind, "per_person": in.PerPerson}))
	return s.Server(ctx, a, in.Name)
}

// updateOAuth applies what of upd is an OAuth server's (per_person) and
// refuses what such a server cannot take (its grant was given for its
// URL, and it has no headers). A server is returned when nothing else of
// upd is left for UpdateServer.
func (s *Servers) updateOAuth(ctx context.Context, a *mcpgate.Actor, name string, upd mcpgate.ServerUpdate) (*mcpgate.Server, error) {
	if upd.URL == nil && upd.Headers == nil && upd.PerPerson == nil {
		return nil, nil
	}
	o, err := s.db.FindServerOAuth(ctx, a.WorkspaceID, name)
	switch {
	case err != nil:
		return nil, err
	case o == nil && upd.PerPerson != nil:
		if _, err := s.db.FindServer(ctx, a.WorkspaceID, name); err != nil {
			return nil, err
		}
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "per_person is for servers whose credential is oauth")
	case o == nil:
		return nil, nil
	case upd.URL != nil || upd.Headers != nil:
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "the server %s signs in with OAuth: its URL and credential cannot be changed "+
			"(remove it and add it again)", name)
	}
	if *upd.PerPerson != o.PerPerson {
		if err := s.db.SetServerOAuthPerPerson(ctx, a.WorkspaceID, o.ServerID, *upd.PerPerson); err != nil {
			return nil, err
		}
		s.changed(a.WorkspaceID)
		s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerUpdated, map[string]any{"server": name, "per_person": *upd.PerPerson}))
	}
	if upd.Aliases != nil || upd.Enabled != nil || upd.SessionScope != nil || upd.AllowSampling != nil || upd.AllowRoots != nil ||
		upd.ElicitationURLHosts != nil {
		return nil, nil // the rest is UpdateServer's
	}
	return s.Server(ctx, a, name)
}

// fillCredential sets the views' credential kind and, for OAuth servers,
// the state of the grant the viewer's calls use.
func (s *Servers) fillCredential(ctx context.Context, a *mcpgate.Actor, views []mcpgate.Server) error {
	for i := range views {
		v := &views[i]
		v.Credential = mcpgate.CredentialNone
		if len(v.Headers) > 0 {
			v.Credential = mcpgate.CredentialHeaders
			continue
		}
		if s.creds == nil {
			continue
		}
		o, err := s.db.FindServerOAuth(ctx, a.WorkspaceID, v.Name)
		if err != nil {
			return err
		}
		if o == nil {
			continue
		}
		v.Credential = mcpgate.CredentialOAuth
		if v.OAuth, err = s.creds.status(ctx, a, o); err != nil {
			return err
		}
	}
	return nil
}

func (s *Servers) fillOneCredential(ctx context.Context, a *mcpgate.Actor, v *mcpgate.Server) error {
	views := []mcpgate.Server{*v}
	err := s.fillCredential(ctx, a, views)
	*v = views[0]
	return err
}

// oauthServer is the workspace's OAuth server named name.
func (s *Servers) oauthServer(ctx context.Context, a *mcpgate.Actor, name string) (*store.ServerOAuth, error) {
	if s.creds == nil {
		return nil, mcpgate.Errorf(mcpgate.EUnavailable, "this gateway cannot reach upstream servers")
	}
	if _, err := s.db.FindServer(ctx, a.WorkspaceID, name); err != nil {
		return nil, err
	}
	o, err := s.db.FindServerOAuth(ctx, a.WorkspaceID, name)
	if err != nil {
		return nil, err
	}
	if o == nil {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "the server %s does not sign in with OAuth", name)
	}
	return o, nil
}

// mayConnect is the rule of who connects which grant: the workspace's is
// an admin's to connect (under the two-factor policy), a person's their own.
func (s *Servers) mayConnect(ctx context.Context, a *mcpgate.Actor, o *store.ServerOAuth) error {
	if o.PerPerson {
		if a.UserID == "" {
			return mcpgate.Errorf(mcpgate.EForbidden, "only a signed-in member connects their own account")
		}
		return nil
	}
	return s.requireAdminChange(ctx, a)
}

// Connect implements mcpgate.ServerOAuthService.
func (s *Servers) Connect(ctx context.Context, a *mcpgate.Actor, name, sessionID string) (*mcpgate.ServerConnect, error) {
	o, err := s.oauthServer(ctx, a, name)
	if err != nil {
		return nil, err
	}
	if err := s.mayConnect(ctx, a, o); err != nil {
		return nil, err
	}
	if sessionID == "" {
		return nil, mcpgate.Errorf(mcpgate.EForbidden, "connect a server from the dashboard, signed in")
	}
	var meta oauthex.AuthServerMeta
	if err := json.Unmarshal(o.Metadata, &meta); err != nil {
		return nil, fmt.Errorf("server oauth metadata: %w", err)
	}
	verifier, challenge := upstreamauth.PKCE()
	state := upstreamauth.RandomToken()
	if err := s.db.CreateOAuthState(ctx, s.keyring, state, store.OAuthState{WorkspaceID: a.WorkspaceID, ServerID: o.ServerID,
		UserID: a.UserID, SessionID: sessionID, ForPerson: o.PerPerson, Issuer: o.Issuer, Verifier: mcpgate.Secret(verifier),
		ExpiresAt: s.now().Add(connectStateTTL)}); err != nil {
		return nil, err
	}
	return &mcpgate.ServerConnect{AuthorizeURL: upstreamauth.AuthorizeURL(&meta, o.ClientID, s.creds.callbackURL(), state,
		challenge, o.Resource, o.Scopes)}, nil
}

// FinishConnect implements mcpgate.ServerOAuthService: the state is
// consumed first (single use, this person and session only), then the
// code exchanged and the tokens sealed; a workspace grant an admin made is
// followed by a discovery of the server's tools.
func (s *Servers) FinishConnect(ctx context.Context, u *mcpgate.User, sessionID, state, code, issuer, errCode string) (*mcpgate.ServerConnected, error) {
	if u == nil {
		return nil, mcpgate.Errorf(mcpgate.EUnauthorized, "sign in to the dashboard, then connect the server again from its page")
	}
	st, err := s.db.TakeOAuthState(ctx, s.keyring, state, u.ID, sessionID, s.now())
	if err != nil {
		return nil, err
	}
	ws, err := s.db.FindMembership(ctx, st.WorkspaceID, u.ID)
	if err != nil {
		return nil, err
	}
	a := &mcpgate.Actor{UserID: u.ID, Email: u.Email, WorkspaceID: ws.ID, Role: ws.Role, Scope: mcpgate.ScopeFull, Source: mcpgate.SourceDashboard}
	o, err := s.db.FindServerOAuthByID(ctx, st.WorkspaceID, st.ServerID)
	if err != nil {
		return nil, err
	}
	if o == nil || o.Issuer != st.Issuer || o.PerPerson != st.ForPerson {
		return nil, mcpgate.Errorf(mcpgate.EConflict, "the server changed while you were signing in; connect it again")
	}
	done := &mcpgate.ServerConnected{WorkspaceID: ws.ID, Server: o.Name}
	if errCode != "" {
		return done, mcpgate.Errorf(mcpgate.EForbidden, "the authorization server did not grant access (%s)", cutText(errCode, 64))
	}
	if issuer != "" && issuer != o.Issuer {
		// RFC 9207: the answer came from another authorization server.
		return done, mcpgate.Errorf(mcpgate.EInvalid, "the answer names another authorization server than the server's; connect it again")
	}
	if err := s.mayConnect(ctx, a, o); err != nil {
		return done, err
	}
	meta, reg, err := s.creds.registration(ctx, o)
	if err != nil {
		return done, err
	}
	if issuer == "" && meta.AuthorizationResponseIssParameterSupported {
		// RFC 9207 §2.4: a server that says it names itself in its answers
		// and did not: the answer may not be its own.
		return done, mcpgate.Errorf(mcpgate.EInvalid, "the answer does not name the authorization server, which says it always does; connect it again")
	}
	t, err := s.creds.client.Exchange(ctx, meta, reg, code, st.Verifier.Reveal(), s.creds.callbackURL(), o.Resource)
	if err != nil {
		return done, mcpgate.WrapError(mcpgate.EUpstream, err, cutText("the authorization server refused the sign-in: "+err.Error(), maxMessage))
	}
	if err := s.db.PutOAuthGrant(ctx, s.keyring, store.OAuthGrant{WorkspaceID: a.WorkspaceID, ServerID: o.ServerID, Issuer: o.Issuer,
		UserID: grantOwner(a, o), Tokens: store.OAuthTokens{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken,
			TokenType: t.TokenType, Scope: t.Scope}, ExpiresAt: t.ExpiresAt, ConnectedBy: a.UserID}); err != nil {
		return done, err
	}
	s.changed(a.WorkspaceID)
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerConnected, map[string]any{"server": o.Name, "issuer": o.Issuer,
		"grant": grantKind(o)}))
	if a.CanAdmin() {
		if _, err := s.DiscoverServer(ctx, a, o.Name); err != nil {
			// Connected all the same: the server page shows the failure.
			s.log.WarnContext(ctx, "discover a connected oauth server", "server", o.Name, "workspace_id", a.WorkspaceID, "err", err)
		}
	}
	return done, nil
}

// Disconnect implements mcpgate.ServerOAuthService.
func (s *Servers) Disconnect(ctx context.Context, a *mcpgate.Actor, name string) error {
	o, err := s.oauthServer(ctx, a, name)
	if err != nil {
		return err
	}
	if err := s.mayConnect(ctx, a, o); err != nil {
		return err
	}
	g, err := s.db.DeleteOAuthGrant(ctx, s.keyring, a.WorkspaceID, o.ServerID, o.Issuer, grantOwner(a, o))
	if err != nil {
		return err
	}
	s.changed(a.WorkspaceID)
	args := map[string]any{"server": o.Name, "issuer": o.Issuer, "grant": grantKind(o)}
	// The refresh token first: revoking it ends the grant at most servers;
	// the access token after, for those that keep it apart.
	if meta, reg, err := s.creds.registration(ctx, o); err == nil && meta.RevocationEndpoint != "" {
		revokeErr := s.creds.client.Revoke(ctx, meta, reg, g.Tokens.RefreshToken, "refresh_token")
		if revokeErr == nil {
			revokeErr = s.creds.client.Revoke(ctx, meta, reg, g.Tokens.AccessToken, "access_token")
		}
		args["revoked"] = revokeErr == nil
		if revokeErr != nil {
			s.log.WarnContext(ctx, "revoke an upstream grant", "server", o.Name, "workspace_id", a.WorkspaceID, "err", revokeErr)
		}
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerDisconnected, args))
	return nil
}

// revokeGrantsOf asks the authorization server to revoke every grant of
// an OAuth server about to be removed (the workspace's and each member's),
// best effort: the removal deletes them here whatever it answers.
func (s *Servers) revokeGrantsOf(ctx context.Context, a *mcpgate.Actor, name string) {
	if s.creds == nil {
		return
	}
	o, err := s.db.FindServerOAuth(ctx, a.WorkspaceID, name)
	if err != nil || o == nil {
		return
	}
	meta, reg, err := s.creds.registration(ctx, o)
	if err != nil || meta.RevocationEndpoint == "" {
		return
	}
	grants, err := s.db.FindOAuthGrantsOfServer(ctx, s.keyring, a.WorkspaceID, o.ServerID)
	if err != nil {
		s.log.WarnContext(ctx, "read the grants of a removed oauth server", "server", name, "err", err)
		return
	}
	for _, g := range grants {
		if err := s.creds.client.Revoke(ctx, meta, reg, g.Tokens.RefreshToken, "refresh_token"); err != nil {
			s.log.WarnContext(ctx, "revoke an upstream grant", "server", name, "workspace_id", a.WorkspaceID, "err", err)
		}
	}
}

// upstreamCredentials is the tool service's credential hook: the wired
// one, or one for servers that take headers only.
func (s *Tools) upstreamCredentials() *UpstreamCredentials { return s.opts.UpstreamCredentials }

// authMessage is what the admin is told of a failed discovery or
// registration: the sign-in client's own reason (its messages name what
// the server or its authorization server did, never a token or secret),
// where a coded error does not say more.
func authMessage(err error) string {
	if ae := (*upstreamauth.Error)(nil); errors.As(err, &ae) && mcpgate.ErrorCode(err) == mcpgate.EInternal {
		return ae.Message
	}
	return mcpgate.ErrorMessage(err)
}

// registrationManual is a client an admin registered by hand.
const registrationManual = "manual"

// checkManualClient checks a client registered by hand: an id and secret
// of sane size, as printable text (they go into form fields and headers).
func checkManualClient(in mcpgate.ServerInput) error {
	id, secret := in.OAuthClientID, in.OAuthClientSecret.Reveal()
	if id == "" && secret != "" {
		return mcpgate.Errorf(mcpgate.EInvalid, "a client secret needs its client id")
	}
	for name, v := range map[string]string{"client id": id, "client secret": secret} {
		if len(v) > 512 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return mcpgate.Errorf(mcpgate.EInvalid, "the %s must be at most 512 printable characters", name)
		}
	}
	return nil
}

// stepUp answers a call the server refused (403) for want of scope
// (insufficient_scope, RFC 6750 §3.1): the scopes it names join those the
// next authorization asks for, and the caller is told that the grant must
// be given again, wider, by whoever connects it. The grant stands for the
// calls it covers. Any other 403 is the call's error as it is.
func (c *UpstreamCredentials) stepUp(ctx context.Context, a *mcpgate.Actor, o *store.ServerOAuth, hop *upstream.Error, err error) error {
	challenges, _ := oauthex.ParseWWWAuthenticate([]string{hop.WWWAuthenticate})
	scope := ""
	for _, ch := range challenges {
		if ch.Scheme == "bearer" && ch.Params["error"] == "insufficient_scope" {
			scope = ch.Params["scope"]
		}
	}
	if strings.TrimSpace(scope) == "" {
		return err
	}
	scopes, werr := c.db.WidenServerOAuthScopes(ctx, a.WorkspaceID, o.ServerID, scope)
	if werr != nil {
		return werr
	}
	who := "an admin must connect it again"
	if o.PerPerson {
		who = "connect your account again"
	}
	return &CredentialError{Err: mcpgate.Errorf(mcpgate.EForbidden,
		"the server %s needs more access than it was granted (scopes %q): %s at %s to grant it", o.Name,
		cutText(scopes, 200), who, c.serverPage(a.WorkspaceID, o.Name))}
}

// movedAuthServer checks, on a 401, whether the server now sends its
// clients to another authorization server than the one its grant is from
// (its challenge's resource metadata names another): then the gateway
// discovers it again and registers at the new one (the old issuer's
// grants go with the old registration), and the caller is told who must
// connect again; a client an admin registered by hand cannot follow, and
// the server must be added again with one of the new server's. nil: the
// same authorization server (or none said), for the refresh to mend.
func (c *UpstreamCredentials) movedAuthServer(ctx context.Context, a *mcpgate.Actor, o *store.ServerOAuth, hop *upstream.Error) error {
	prm := upstreamauth.ChallengeResourceMetadata(hop.WWWAuthenticate)
	if prm == "" {
		return nil
	}
	issuer, err := c.client.ResourceAuthServer(ctx, prm)
	if err != nil || strings.TrimSuffix(issuer, "/") == strings.TrimSuffix(o.Issuer, "/") {
		return nil
	}
	fail := func(err error) error {
		return mcpgate.WrapError(mcpgate.EUpstream, err, cutText("the server "+o.Name+" now signs in at "+issuer+
			", and the gateway could not register there: "+authMessage(err), maxMessage))
	}
	if o.Registration == registrationManual {
		return mcpgate.Errorf(mcpgate.EUpstream, "the server %s now signs in at %s, where the client an admin registered by hand "+
			"is not known: add the server again with a client registered there", o.Name, issuer)
	}
	d, err := c.client.Discover(ctx, o.URL)
	if err != nil {
		return fail(err)
	}
	reg, err := c.client.Register(ctx, &d.Metadata, c.documentURL(), c.callbackURL())
	if err != nil {
		return fail(err)
	}
	next := store.ServerOAuth{PerPerson: o.PerPerson, Resource: d.Resource, Issuer: d.Issuer, Metadata: d.MetadataRaw,
		Scopes: d.Scopes, ClientID: reg.ClientID, ClientSecret: reg.ClientSecret, Registration: reg.Kind}
	if err := c.db.PutServerOAuth(ctx, c.keyring, a.WorkspaceID, o.Name, next); err != nil {
		return err
	}
	c.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerIssuerChanged, map[string]any{"server": o.Name,
		"issuer": o.Issuer, "new_issuer": d.Issuer, "registration": reg.Kind}))
	who := "an admin must connect it again"
	if o.PerPerson {
		who = "connect your account again"
	}
	return &CredentialError{Err: mcpgate.Errorf(mcpgate.EForbidden, "the server %s now signs in at another authorization server (%s); "+
		"the gateway registered there: %s at %s", o.Name, d.Issuer, who, c.serverPage(a.WorkspaceID, o.Name))}
}
