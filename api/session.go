package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

// sessionDescriber is implemented by stores that record where a session was
// made (*store.DB does).
type sessionDescriber interface {
	DescribeSession(ctx context.Context, sessionID, address, userAgent string) error
}

// Cookie names and the CSRF header.
const (
	SessionCookie = "mcpgate_session"
	CSRFCookie    = "mcpgate_csrf"
	CSRFHeader    = "X-CSRF-Token"
	// CSRFFormField carries the CSRF token in dashboard forms.
	CSRFFormField = "csrf_token"
)

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
	if d, ok := s.Store.(sessionDescriber); ok {
		// Where the session was made, for the person's session list.
		if err := d.DescribeSession(r.Context(), sid, httpx.ClientAddress(r), r.UserAgent()); err != nil {
			return err
		}
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Issuer: jwtIssuer, Subject: u.ID, Audience: jwt.ClaimStrings{jwtAudience}, ID: sid,
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
	})
	signed, err := tok.SignedString(s.Secret)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: signed, Path: "/", Expires: exp, MaxAge: int(s.TTL.Seconds()),
		HttpOnly: true, Secure: s.Secure, SameSite: http.SameSiteLaxMode})
	s.setCSRF(w, exp)
	return nil
}

// setCSRF sets a fresh CSRF token cookie. It is readable by the page's script
// (not HttpOnly) because the page must echo it in a header; a cross-site page
// cannot read it.
func (s *Sessions) setCSRF(w http.ResponseWriter, exp time.Time) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: CSRFCookie, Value: v, Path: "/", Expires: exp,
		Secure: s.Secure, SameSite: http.SameSiteLaxMode})
	return v
}

// EnsureCSRF returns the request's CSRF token, setting a new cookie when it
// has none. Dashboard pages put it in their forms.
func (s *Sessions) EnsureCSRF(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(CSRFCookie); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	return s.setCSRF(w, time.Now().Add(s.TTL))
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

func (s *Sessions) clear(w http.ResponseWriter) {
	for _, name := range []string{SessionCookie, CSRFCookie} {
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1,
			HttpOnly: name == SessionCookie, Secure: s.Secure, SameSite: http.SameSiteLaxMode})
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
	c, err := r.Cookie(SessionCookie)
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

// CheckCSRF enforces the double-submit token on a state-changing request that
// carries a session cookie: the X-CSRF-Token header (or the form field) must
// equal the mcpgate_csrf cookie.
func CheckCSRF(r *http.Request) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if _, err := r.Cookie(SessionCookie); errors.Is(err, http.ErrNoCookie) {
		return nil
	}
	c, err := r.Cookie(CSRFCookie)
	if err != nil || len(c.Value) < 32 {
		return errCSRF
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" && r.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
		got = r.PostFormValue(CSRFFormField)
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(c.Value)) != 1 {
		return errCSRF
	}
	return nil
}

var errCSRF = mcpgate.Errorf(mcpgate.EForbidden, "missing or invalid CSRF token; reload the page and try again")

// csrf refuses state-changing requests that fail CheckCSRF.
func (s *Server) csrf(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := CheckCSRF(r); err != nil {
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
		ctx := mcpgate.NewContextWithSessionID(mcpgate.NewContextWithUser(r.Context(), u), sid)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// OptionalUser puts the session's user, if any, in the context; the dashboard
// uses it to decide between its public and private pages.
func (s *Server) OptionalUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, sid, err := s.sessions.Authenticate(r); err == nil {
			r = r.WithContext(mcpgate.NewContextWithSessionID(mcpgate.NewContextWithUser(r.Context(), u), sid))
		}
		next.ServeHTTP(w, r)
	})
}
