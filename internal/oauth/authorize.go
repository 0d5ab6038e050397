package oauth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
)

// csrfCookie and csrfField are the dashboard's CSRF cookie and form field
// (api.CSRFCookie, api.CSRFFormField): the consent form carries the token,
// bound to the person's session (mcpgate.CSRFTokenFromContext).
const (
	csrfCookie = "mcpgate_csrf"
	csrfField  = "csrf_token"
)

// authRequest is a checked authorization request (RFC 6749 §4.1.1 with
// PKCE and resource).
type authRequest struct {
	client *mcpgate.OAuthClient
	// redirectURI is where the answer goes; redirectParam is the
	// redirect_uri parameter as sent ("" when omitted, allowed for a client
	// with one registered URI), which the token request must repeat
	// (RFC 6749 §4.1.3).
	redirectURI   string
	redirectParam string
	state         string
	challenge     string
	resource      string
	// readOnly: the client asked for read-only access only, which is
	// then the most the person can grant.
	readOnly bool
}

// pageError is a request that cannot go back to the client (unknown
// client, unregistered redirect URI): the person sees it instead.
type pageError struct {
	status           int
	heading, message string
}

// challengeShape is a S256 challenge: base64url of 32 bytes.
var challengeShape = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// parseAuthRequest checks an authorization request. Problems with the
// client or redirect URI are a pageError (never redirect to an unchecked
// URI); the others are an oauthError, which the caller shows on the
// gateway's page too (authRequest).
func (s *Server) parseAuthRequest(r *http.Request, get func(string) string) (*authRequest, *pageError, *oauthError) {
	clientID := get("client_id")
	if clientID == "" {
		return nil, &pageError{http.StatusBadRequest, "This sign-in link is incomplete", "The app did not say who it is (client_id is missing). Start again from the app."}, nil
	}
	c, err := s.findClient(r, clientID)
	if err != nil {
		switch mcpgate.ErrorCode(err) {
		case mcpgate.ENotFound:
			return nil, &pageError{http.StatusBadRequest, "Unknown app", "This app is not registered with this gateway, or its registration expired. Start again from the app."}, nil
		case mcpgate.EInvalid:
			return nil, &pageError{http.StatusBadRequest, "This app cannot sign in", mcpgate.ErrorMessage(err)}, nil
		case mcpgate.ETooMany:
			return nil, &pageError{http.StatusTooManyRequests, "Try again in a few minutes", mcpgate.ErrorMessage(err)}, nil
		}
		s.log.ErrorContext(r.Context(), "find oauth client", "err", err)
		return nil, &pageError{http.StatusServiceUnavailable, "Something went wrong", "The gateway could not check this app right now. Try again shortly."}, nil
	}
	ar := &authRequest{client: c, state: get("state"), redirectURI: get("redirect_uri"), redirectParam: get("redirect_uri")}
	if ar.redirectURI == "" && len(c.RedirectURIs) == 1 {
		ar.redirectURI = c.RedirectURIs[0]
	}
	// A fragment is refused here as at registration (RFC 6749 §3.1.2),
	// whatever the registered URI: the code is never put after a "#".
	if strings.Contains(ar.redirectURI, "#") || !matchRedirect(c.RedirectURIs, ar.redirectURI) {
		return nil, &pageError{http.StatusBadRequest, "Unexpected return address",
			"The app asked to send you back to an address it did not register. Nothing was shared. Start again from the app."}, nil
	}
	if get("response_type") != "code" {
		return ar, nil, &oauthError{Code: "unsupported_response_type", Description: "only response_type=code is supported"}
	}
	ar.challenge = get("code_challenge")
	if ar.challenge == "" {
		return ar, nil, errInvalidRequest("code_challenge is required: PKCE with S256")
	}
	if get("code_challenge_method") != "S256" {
		return ar, nil, errInvalidRequest("code_challenge_method must be S256")
	}
	if !challengeShape.MatchString(ar.challenge) {
		return ar, nil, errInvalidRequest("code_challenge is not a S256 challenge")
	}
	// RFC 8707 makes the parameter optional; the MCP endpoint, this
	// server's one resource, is then meant.
	ar.resource = s.resource
	if res := get("resource"); res != "" {
		if ar.resource = s.resourceOf(res); ar.resource == "" {
			return ar, nil, &oauthError{Code: "invalid_target", Description: "this server issues tokens only for " + s.ownResources()}
		}
	}
	scopes := strings.Fields(get("scope"))
	for _, sc := range scopes {
		// offline_access (OpenID Connect) asks for a refresh token, which
		// every grant has; anything else is a scope this server does not
		// have, and granting "something" for it would be a guess.
		if !isKnownScope(sc) && sc != "offline_access" {
			return ar, nil, &oauthError{Code: "invalid_scope", Description: "unknown scope " + strconv.Quote(sc) +
				"; this server has " + mcpgate.OAuthScopeTools + " and " + mcpgate.OAuthScopeRead}
		}
	}
	ar.readOnly = slices.Contains(scopes, mcpgate.OAuthScopeRead) && !slices.Contains(scopes, mcpgate.OAuthScopeTools)
	return ar, nil, nil
}

// redirectBack sends the browser to the client's redirect URI with params,
// the state, and the issuer (RFC 9207, against mix-up attacks).
func (s *Server) redirectBack(w http.ResponseWriter, r *http.Request, ar *authRequest, params url.Values) {
	u, _ := url.Parse(ar.redirectURI)
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	if ar.state != "" {
		q.Set("state", ar.state)
	}
	q.Set("iss", s.issuer)
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, ar *authRequest, e *oauthError) {
	s.log.InfoContext(r.Context(), "authorization request refused", "client_id", ar.client.ID, "error", e.Code, "description", e.Description)
	s.redirectBack(w, r, ar, url.Values{"error": {e.Code}, "error_description": {e.Description}})
}

// pageHeaders are the consent page's security headers: the dashboard's
// policy, with form-action widened to the client's redirect origin, since
// browsers apply form-action to the redirect that follows the form.
func pageHeaders(w http.ResponseWriter, redirectURI string) {
	h := w.Header()
	formAction := "'self'"
	if u, err := url.Parse(redirectURI); err == nil && u.Scheme != "" {
		switch {
		case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
			host := u.Hostname()
			if strings.Contains(host, ":") {
				host = "[" + host + "]"
			}
			formAction += " http://" + host + ":*"
			if u.Port() == "" {
				formAction += " http://" + host
			}
		case u.Scheme == "http" || u.Scheme == "https":
			formAction += " " + u.Scheme + "://" + u.Host
		default:
			formAction += " " + u.Scheme + ":"
		}
	}
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action "+formAction+"; object-src 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// ensureCSRF returns the browser's CSRF token, setting one when it has none.
// A signed-in person's is the one bound to their session (the API's session
// layer puts it in the context), which the consent POST is checked against.
func (s *Server) ensureCSRF(w http.ResponseWriter, r *http.Request) string {
	if tok := mcpgate.CSRFTokenFromContext(r.Context()); tok != "" {
		return tok
	}
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", MaxAge: 12 * 3600,
		Secure: strings.HasPrefix(s.issuer, "https://"), SameSite: http.SameSiteLaxMode})
	return v
}

// authRequest parses the authorization request that get reads; when it is
// refused it shows why on the gateway's page and returns nil. A malformed
// request is never answered by a redirect to the client: the person has not
// yet seen which app this is, and a self-registered client's redirect URI
// would make the gateway an open redirector (RFC 9700 §4.11.2). Only the
// person's own decision on the consent page goes back to the app.
func (s *Server) authRequest(w http.ResponseWriter, r *http.Request, get func(string) string) *authRequest {
	ar, perr, oerr := s.parseAuthRequest(r, get)
	if perr != nil {
		s.errorPage(w, r, perr.status, perr.heading, perr.message)
		return nil
	}
	if oerr != nil {
		s.log.InfoContext(r.Context(), "authorization request refused", "client_id", ar.client.ID, "error", oerr.Code,
			"description", oerr.Description)
		s.errorPage(w, r, http.StatusBadRequest, ar.client.Name+" sent a sign-in request this gateway cannot accept",
			"The app's request is not valid ("+oerr.Code+": "+oerr.Description+"). Nothing was shared. "+
				"Tell the app's maker, or try another version of the app.")
		return nil
	}
	return ar
}

// errorPage answers with the consent renderer's error page.
func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, status int, heading, message string) {
	pageHeaders(w, "")
	s.opts.Consent.RenderError(w, r, status, heading, message)
}

// authParams are the request parameters the consent form carries through.
var authParams = []string{"client_id", "redirect_uri", "response_type", "state", "code_challenge",
	"code_challenge_method", "resource", "scope"}

// handleAuthorize checks the request, sends a signed-out person through
// the login page and back, and shows the consent page.
func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	u := mcpgate.UserFromContext(r.Context())
	if u == nil && q.Get("client_id") != "" {
		// Signed out: to the login page first, with nothing fetched (a
		// stranger's request makes the gateway connect nowhere) and
		// nothing sent to the client; the request is checked when the
		// person is back.
		http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	ar := s.authRequest(w, r, q.Get)
	if ar == nil {
		return
	}
	wss, err := s.opts.Workspaces.Workspaces(r.Context(), u)
	if err != nil {
		s.log.ErrorContext(r.Context(), "list workspaces for consent", "err", err)
		s.errorPage(w, r, http.StatusServiceUnavailable, "Something went wrong", "Try again shortly.")
		return
	}
	fields := map[string]string{csrfField: s.ensureCSRF(w, r)}
	for _, p := range authParams {
		if v := q.Get(p); v != "" {
			fields[p] = v
		}
	}
	ru, _ := url.Parse(ar.redirectURI)
	host := ru.Host
	if host == "" {
		host = ru.Scheme + ":"
	}
	page := mcpgate.ConsentPage{Client: *ar.client, RedirectHost: host,
		RedirectLoopback: ru.Scheme == "http" && isLoopbackHost(ru.Hostname()),
		SelfRegistered:   ar.client.Kind == mcpgate.ClientDCR, Resource: ar.resource, Workspaces: wss, ReadOnly: ar.readOnly,
		Action: "/oauth/authorize", Fields: fields}
	if ar.client.Kind == mcpgate.ClientCIMD {
		if cu, err := url.Parse(ar.client.ID); err == nil {
			page.DocumentHost = cu.Host
		}
	}
	pageHeaders(w, ar.redirectURI)
	s.opts.Consent.RenderConsent(w, r, page)
}

// handleConsent is the consent form's POST: CSRF-checked, the request
// checked again (nothing in the form is trusted), then a code bound to
// client, redirect URI, challenge, resource, workspace and scope.
func (s *Server) handleConsent(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "Bad request", "The form could not be read. Start again from the app.")
		return
	}
	want := mcpgate.CSRFTokenFromContext(r.Context())
	if want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(r.PostForm.Get(csrfField))) != 1 {
		s.errorPage(w, r, http.StatusForbidden, "This form expired",
			"The page was not sent by this gateway, or it is too old. Start again from the app.")
		return
	}
	u := mcpgate.UserFromContext(r.Context())
	if u == nil {
		s.errorPage(w, r, http.StatusUnauthorized, "You are signed out", "Sign in again and start again from the app.")
		return
	}
	ar := s.authRequest(w, r, r.PostForm.Get)
	if ar == nil {
		return
	}
	if r.PostForm.Get("decision") != "allow" {
		s.redirectError(w, r, ar, &oauthError{Code: "access_denied", Description: "the person declined"})
		return
	}
	actor, _, err := s.opts.Workspaces.EnterToGrant(r.Context(), u, r.PostForm.Get("workspace"))
	if err != nil {
		if mcpgate.ErrorCode(err) == mcpgate.ETOTPEnrolment {
			s.errorPage(w, r, http.StatusForbidden, "Two-factor sign-in required", mcpgate.ErrorMessage(err))
			return
		}
		if c := mcpgate.ErrorCode(err); c == mcpgate.ENotFound || c == mcpgate.EInvalid {
			s.errorPage(w, r, http.StatusNotFound, "Workspace not found", "Choose one of your workspaces. Start again from the app.")
			return
		}
		s.log.ErrorContext(r.Context(), "enter workspace for consent", "err", err)
		s.errorPage(w, r, http.StatusServiceUnavailable, "Something went wrong", "Try again shortly.")
		return
	}
	scope := mcpgate.ScopeFull
	switch r.PostForm.Get("access") {
	case string(mcpgate.ScopeFull):
		if ar.readOnly {
			// A person may grant less than the app asked, never more.
			s.errorPage(w, r, http.StatusBadRequest, "The app asked for read-only access",
				"Full access cannot be given to an app that asked only to read. Start again from the app.")
			return
		}
	case string(mcpgate.ScopeReadOnly):
		scope = mcpgate.ScopeReadOnly
	default:
		s.errorPage(w, r, http.StatusBadRequest, "Choose the access", "Full or read-only. Start again from the app.")
		return
	}
	if err := s.keepClient(r, ar.client); err != nil {
		s.log.ErrorContext(r.Context(), "store consented client", "err", err)
		s.errorPage(w, r, http.StatusServiceUnavailable, "Something went wrong", "Try again shortly.")
		return
	}
	code := newSecret(codePrefix)
	err = s.db.CreateOAuthCode(r.Context(), mcpgate.HashToken(code), store.OAuthCode{ClientID: ar.client.ID,
		WorkspaceID: actor.WorkspaceID, UserID: actor.UserID, RedirectURI: ar.redirectParam, Challenge: ar.challenge,
		Resource: ar.resource, Scope: scope, ExpiresAt: s.now().Add(codeTTL)})
	if err != nil {
		s.log.ErrorContext(r.Context(), "store authorization code", "err", err)
		s.errorPage(w, r, http.StatusServiceUnavailable, "Something went wrong", "Try again shortly.")
		return
	}
	s.log.InfoContext(r.Context(), "authorization granted", "client_id", ar.client.ID, "workspace_id", actor.WorkspaceID, "scope", scope)
	s.redirectBack(w, r, ar, url.Values{"code": {code}})
}
