package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

// Cookie names and the CSRF header. Where PUBLIC_URL is https the two
// cookies carry the __Host- prefix (see Sessions.cookieName); these are the
// names without it.
const (
	SessionCookie = "mcpgate_session"
	CSRFCookie    = "mcpgate_csrf"
	CSRFHeader    = "X-CSRF-Token"
	// CSRFFormField carries the CSRF token in dashboard forms.
	CSRFFormField = "csrf_token"
)

// hostPrefix makes a browser keep a cookie only if it came over https with
// Secure, Path=/ and no Domain (RFC 6265bis, "cookie prefixes"): no http
// page, no sibling subdomain and no man in the middle on http can set or
// overwrite it, so a session or CSRF cookie cannot be planted.
const hostPrefix = "__Host-"

const (
	jwtIssuer   = "mcpgate"
	jwtAudience = "mcpgate-dashboard"
)

// Sessions issues and verifies dashboard session tokens: HS256 JWTs whose id
// is a session row, so that logout revokes them on every replica.
type Sessions struct {
	Secret []byte
	TTL    time.Duration
	Secure bool
	Store  SessionStore
}

// issue creates a session row and sets the session and CSRF cookies. A new
// session id is made at every login, so a fixed (planted) cookie never
// becomes an authenticated one.
func (s *Sessions) issue(w http.ResponseWriter, r *http.Request, u *mcpgate.User) error {
	now := time.Now()
	exp := now.Add(s.TTL)
	sid, err := s.Store.CreateSession(r.Context(), u.ID, exp)
	if err != nil {
		return err
	}
	// Where the session was made, for the person's session list.
	if err := s.Store.DescribeSession(r.Context(), sid, httpx.ClientAddress(r), r.UserAgent()); err != nil {
		return err
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Issuer: jwtIssuer, Subject: u.ID, Audience: jwt.ClaimStrings{jwtAudience}, ID: sid,
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
	})
	signed, err := tok.SignedString(s.Secret)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(SessionCookie), Value: signed, Path: "/", Expires: exp, MaxAge: int(s.TTL.Seconds()),
		HttpOnly: true, Secure: s.Secure, SameSite: http.SameSiteLaxMode})
	s.setCSRF(w, sid)
	return nil
}

// cookieName is the name a cookie has on this gateway: with the __Host-
// prefix where it is served over https.
func (s *Sessions) cookieName(base string) string {
	if s.Secure {
		return hostPrefix + base
	}
	return base
}

// csrfToken is the CSRF token of a session: an HMAC of its id under a key
// drawn from the session secret. A token is good for one session only, so a
// token that was planted (a cookie set from a sibling subdomain, or a token
// of the attacker's own session) fails the check, and it needs no storage.
func (s *Sessions) csrfToken(sessionID string) string {
	k := hmac.New(sha256.New, s.Secret)
	k.Write([]byte("mcpgate csrf tokens"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(sessionID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// setCSRF sets the CSRF cookie of a session. It is readable by the page's
// script (not HttpOnly) because the page must echo it in a header; a
// cross-site page cannot read it.
func (s *Sessions) setCSRF(w http.ResponseWriter, sessionID string) {
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(CSRFCookie), Value: s.csrfToken(sessionID), Path: "/",
		MaxAge: int(s.TTL.Seconds()), Secure: s.Secure, SameSite: http.SameSiteLaxMode})
}

// issuer is issue as a reply's cookie step.
func (s *Sessions) issuer(r *http.Request, u *mcpgate.User) func(http.ResponseWriter) error {
	return func(w http.ResponseWriter) error { return s.issue(w, r, u) }
}

// clearer is clear as a reply's cookie step.
func (s *Sessions) clearer(w http.ResponseWriter) error {
	s.clear(w)
	return nil
}

// clear expires the session and CSRF cookies (on https also those without
// the prefix, which a gateway from before the prefix may have left).
func (s *Sessions) clear(w http.ResponseWriter) {
	names := []string{SessionCookie, CSRFCookie}
	if s.Secure {
		names = append(names, hostPrefix+SessionCookie, hostPrefix+CSRFCookie)
	}
	for _, name := range names {
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1,
			HttpOnly: strings.HasSuffix(name, SessionCookie), Secure: s.Secure, SameSite: http.SameSiteLaxMode})
	}
}

var errSession = mcpgate.Errorf(mcpgate.EUnauthorized, "log in to continue")

// parse verifies a session token: signature (HS256 only), issuer, audience,
// expiry; it returns the claims.
func (s *Sessions) parse(raw string) (*jwt.RegisteredClaims, error) {
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return s.Secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithIssuer(jwtIssuer),
		jwt.WithAudience(jwtAudience), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	if err != nil || claims.ID == "" || claims.Subject == "" {
		return nil, errSession
	}
	return &claims, nil
}

// Authenticate returns the user of the request's session cookie, checking
// the token and that its session row is live.
func (s *Sessions) Authenticate(r *http.Request) (*mcpgate.User, string, error) {
	c, err := r.Cookie(s.cookieName(SessionCookie))
	if err != nil || c.Value == "" {
		return nil, "", errSession
	}
	claims, err := s.parse(c.Value)
	if err != nil {
		return nil, "", err
	}
	u, err := s.Store.FindSessionUser(r.Context(), claims.ID)
	if err != nil {
		if mcpgate.ErrorCode(err) == mcpgate.EUnauthorized {
			return nil, "", errSession
		}
		return nil, "", err
	}
	if u.ID != claims.Subject {
		return nil, "", errSession
	}
	return u, claims.ID, nil
}

// checkCSRF enforces the CSRF token on a state-changing request that
// carries a session: the X-CSRF-Token header (or the form field) must be the
// session's own token (csrfToken). Without a valid session cookie there is
// no session to ride, and the routes that need one refuse the request.
func (s *Sessions) checkCSRF(r *http.Request) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	c, err := r.Cookie(s.cookieName(SessionCookie))
	if err != nil || c.Value == "" {
		return nil
	}
	claims, err := s.parse(c.Value)
	if err != nil {
		return nil
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" && r.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
		got = r.PostFormValue(CSRFFormField)
	}
	if !hmac.Equal([]byte(got), []byte(s.csrfToken(claims.ID))) {
		return errCSRF
	}
	return nil
}

var errCSRF = mcpgate.Errorf(mcpgate.EForbidden, "missing or invalid CSRF token; reload the page and try again")

// csrf refuses state-changing requests that fail CheckCSRF.
func (s *Server) csrf(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.sessions.checkCSRF(r); err != nil {
			WriteError(w, r, s.log, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireUser authenticates the session and puts the user in the context.
func (s *Server) requireUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, sid, err := s.sessions.Authenticate(r)
		if err != nil {
			WriteError(w, r, s.log, err)
			return
		}
		next.ServeHTTP(w, s.sessions.enter(w, r, u, sid))
	})
}

// OptionalUser puts the session's user, if any, in the context; the dashboard
// uses it to decide between its public and private pages.
func (s *Server) OptionalUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, sid, err := s.sessions.Authenticate(r); err == nil {
			r = s.sessions.enter(w, r, u, sid)
		}
		next.ServeHTTP(w, r)
	})
}

// enter puts an authenticated session in the request's context: the user,
// the session id and the session's CSRF token (which pages put in their
// forms). A browser whose CSRF cookie is not the session's (a planted one,
// or one from before tokens were bound to sessions) gets the right one.
func (s *Sessions) enter(w http.ResponseWriter, r *http.Request, u *mcpgate.User, sid string) *http.Request {
	tok := s.csrfToken(sid)
	if c, err := r.Cookie(s.cookieName(CSRFCookie)); err != nil || !hmac.Equal([]byte(c.Value), []byte(tok)) {
		s.setCSRF(w, sid)
	}
	ctx := mcpgate.NewContextWithSessionID(mcpgate.NewContextWithUser(r.Context(), u), sid)
	return r.WithContext(mcpgate.NewContextWithCSRFToken(ctx, tok))
}
