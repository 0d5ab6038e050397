package oauth

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
)

// verifierShape is a PKCE code verifier (RFC 7636 §4.1).
var verifierShape = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// readForm parses a form-encoded token or revocation request and returns
// the client id it names (form field, or the user of HTTP Basic, which some
// clients send with an empty password).
func readForm(w http.ResponseWriter, r *http.Request) (string, *oauthError) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return "", errInvalidRequest("the body must be application/x-www-form-urlencoded")
	}
	if err := r.ParseForm(); err != nil {
		return "", errInvalidRequest("the form could not be read")
	}
	clientID := r.PostForm.Get("client_id")
	if user, _, ok := r.BasicAuth(); ok {
		if u, err := url.QueryUnescape(user); err == nil && u != "" {
			if clientID != "" && clientID != u {
				return "", errInvalidRequest("client_id differs from the client authentication")
			}
			clientID = u
		}
	}
	return clientID, nil
}

// tokenResponse is the token endpoint's success answer (RFC 6749 §5.1).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

func (s *Server) newPair() (access, refresh string, p store.TokenPair) {
	access, refresh = newSecret(accessPrefix), newSecret(refreshPrefix)
	now := s.now()
	return access, refresh, store.TokenPair{AccessHash: mcpgate.HashToken(access), RefreshHash: mcpgate.HashToken(refresh),
		AccessExpires: now.Add(accessTTL), RefreshExpires: now.Add(refreshTTL)}
}

func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	clientID, oerr := readForm(w, r)
	if oerr != nil {
		s.writeOAuthError(w, r, oerr)
		return
	}
	if clientID == "" {
		s.writeOAuthError(w, r, &oauthError{Code: "invalid_client", Description: "client_id is required", status: http.StatusUnauthorized})
		return
	}
	// The resource asked for must be one of this server's (RFC 8707 §2.2),
	// and, below, the one the code or grant is for; left out, it is theirs.
	requested := r.PostForm.Get("resource")
	if requested != "" && s.resourceOf(requested) == "" {
		s.writeOAuthError(w, r, errInvalidTarget(s.ownResources()))
		return
	}
	bound := func(grantResource string) error {
		switch {
		case !s.ownsResource(grantResource):
			// Issued by another gateway on this database: not this
			// server's to redeem, rotate or revoke.
			return errInvalidGrant("the grant was issued by another authorization server")
		case requested != "" && s.resourceOf(requested) != grantResource:
			return errInvalidTarget(grantResource)
		}
		return nil
	}
	access, refresh, pair := s.newPair()
	var g *mcpgate.Grant
	var err error
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		code, verifier, redirectURI := r.PostForm.Get("code"), r.PostForm.Get("code_verifier"), r.PostForm.Get("redirect_uri")
		if code == "" {
			s.writeOAuthError(w, r, errInvalidRequest("code is required"))
			return
		}
		if !verifierShape.MatchString(verifier) {
			// Checked before the code is looked up, so a request without
			// PKCE never spends a code it could not redeem anyway.
			s.writeOAuthError(w, r, errInvalidRequest("code_verifier is required (PKCE S256)"))
			return
		}
		g, err = s.db.RedeemOAuthCode(r.Context(), mcpgate.HashToken(code), s.now(), func(c *store.OAuthCode) error {
			switch {
			case c.ClientID != clientID:
				return errInvalidGrant("the code was issued to another client")
			case c.RedirectURI != redirectURI:
				return errInvalidGrant("redirect_uri differs from the authorization request's")
			case subtle.ConstantTimeCompare([]byte(s256(verifier)), []byte(c.Challenge)) != 1:
				return errInvalidGrant("code_verifier does not match the code_challenge")
			}
			return bound(c.Resource)
		}, pair)
		if err == nil {
			s.audit.Record(r.Context(), mcpgate.NewAdminEvent(grantActor(g, mcpgate.SourceDashboard), mcpgate.ActionGrantCreated,
				map[string]any{"grant_id": g.ID, "client": g.ClientName, "scope": g.Scope}))
		}
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		if !strings.HasPrefix(rt, refreshPrefix) {
			s.writeOAuthError(w, r, errInvalidGrant("the refresh token is invalid, expired or revoked"))
			return
		}
		g, err = s.db.RotateRefreshToken(r.Context(), mcpgate.HashToken(rt), clientID, s.now(), bound, pair)
	case "":
		s.writeOAuthError(w, r, errInvalidRequest("grant_type is required"))
		return
	default:
		s.writeOAuthError(w, r, &oauthError{Code: "unsupported_grant_type", Description: "only authorization_code and refresh_token",
			status: http.StatusBadRequest})
		return
	}
	if err != nil {
		var oe *oauthError
		var reused *store.ReuseError
		switch {
		case errors.As(err, &oe):
		case errors.As(err, &reused):
			// Someone holds a copy of a single-use secret: the grant is
			// revoked (by the store), here at once and elsewhere by NOTIFY.
			s.revoked(reused.WorkspaceID)
			s.log.WarnContext(r.Context(), "single-use OAuth secret reused; grant revoked", "what", reused.What, "client_id", clientID)
			oe = errInvalidGrant("the " + reused.What + " was already used; its grant is revoked, sign in again")
		case mcpgate.ErrorCode(err) == mcpgate.ENotFound:
			oe = errInvalidGrant(mcpgate.ErrorMessage(err))
		default:
			s.internalError(w, r, err)
			return
		}
		s.writeOAuthError(w, r, oe)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, tokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: int(accessTTL.Seconds()),
		RefreshToken: refresh, Scope: mcpgate.OAuthScopeOf(g.Scope)})
}

// handleRevoke is RFC 7009: revoking either token of a grant ends the whole
// grant. It answers 200 whatever the token was, so it cannot be used to
// probe tokens.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	clientID, oerr := readForm(w, r)
	if oerr != nil {
		s.writeOAuthError(w, r, oerr)
		return
	}
	tok := r.PostForm.Get("token")
	if tok == "" {
		s.writeOAuthError(w, r, errInvalidRequest("token is required"))
		return
	}
	if strings.HasPrefix(tok, accessPrefix) || strings.HasPrefix(tok, refreshPrefix) {
		g, err := s.db.GrantOfToken(r.Context(), mcpgate.HashToken(tok))
		switch {
		case err == nil && (clientID == "" || clientID == g.ClientID) && g.RevokedAt == nil && s.ownsResource(g.Resource):
			// Another gateway's token (another PUBLIC_URL on this
			// database) is not this server's to revoke: it gets the
			// answer of an unknown token.
			if err := s.db.RevokeGrant(r.Context(), g.WorkspaceID, g.ID); err != nil && mcpgate.ErrorCode(err) != mcpgate.ENotFound {
				s.internalError(w, r, err)
				return
			}
			s.revoked(g.WorkspaceID)
			s.audit.Record(r.Context(), mcpgate.NewAdminEvent(grantActor(g, mcpgate.SourceMCP), mcpgate.ActionGrantRevoked,
				map[string]any{"grant_id": g.ID, "client": g.ClientName, "by": "client"}))
		case err != nil && mcpgate.ErrorCode(err) != mcpgate.ENotFound:
			s.internalError(w, r, err)
			return
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}
