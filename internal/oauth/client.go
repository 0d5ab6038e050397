package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

// isLoopbackHost reports whether host (no port) is a loopback name or
// address, as RFC 8252 §7.3 native-app redirects use.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkRedirectURI refuses a redirect URI a client may not register: it must
// be absolute, without a fragment, and https, or http on a loopback host,
// or a private-use scheme of a native app (RFC 8252 §7.1). Schemes that run
// code in a browser are refused outright.
func checkRedirectURI(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Fragment != "" || strings.ContainsAny(raw, " \t\r\n") {
		return errors.New("each redirect URI must be an absolute URI without a fragment")
	}
	switch scheme := strings.ToLower(u.Scheme); scheme {
	case "https":
		if u.Host == "" {
			return errors.New("an https redirect URI needs a host")
		}
	case "http":
		if !isLoopbackHost(u.Hostname()) {
			return errors.New("http redirect URIs are allowed only on 127.0.0.1, [::1] or localhost; use https")
		}
	case "javascript", "data", "vbscript", "file", "blob", "about":
		return errors.New("this redirect URI scheme is not allowed")
	default:
		// A native app's private-use scheme (RFC 8252 §7.1). The RFC asks
		// for a reverse domain name, but the clients in use (cursor://,
		// vscode://) do not follow it, so any scheme with a target is
		// taken; the consent page shows it to the person.
		if u.Host == "" && u.Opaque == "" && u.Path == "" {
			return errors.New("a custom-scheme redirect URI must name its app")
		}
	}
	return nil
}

// matchRedirect reports whether a requested redirect URI is one of the
// registered ones: exactly, or (RFC 8252 §7.3) a loopback http URI that
// differs only in its port, since native apps listen on any free port.
func matchRedirect(registered []string, requested string) bool {
	if slices.Contains(registered, requested) {
		return true
	}
	req, err := url.Parse(requested)
	if err != nil || req.Scheme != "http" || !isLoopbackHost(req.Hostname()) {
		return false
	}
	for _, r := range registered {
		reg, err := url.Parse(r)
		if err != nil || reg.Scheme != "http" || !isLoopbackHost(reg.Hostname()) {
			continue
		}
		if reg.Hostname() == req.Hostname() && reg.Path == req.Path && reg.RawQuery == req.RawQuery &&
			reg.User == nil && req.User == nil {
			return true
		}
	}
	return false
}

const maxRegistrationBody = 64 << 10

// handleRegister is Dynamic Client Registration (RFC 7591) for public
// clients. Anyone may register, so the consent page marks such clients as
// self-registered, registrations are rate-limited per address, and those
// that never get a grant are pruned after a day.
func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	if !s.allowRegistration(httpx.ClientAddress(r)) {
		w.Header().Set("Retry-After", "180")
		s.writeOAuthError(w, r, &oauthError{Code: "too_many_requests", Description: "too many registrations from this address; try again later",
			status: http.StatusTooManyRequests})
		return
	}
	var md oauthex.ClientRegistrationMetadata
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRegistrationBody))
	if err := dec.Decode(&md); err != nil {
		s.writeOAuthError(w, r, &oauthError{Code: "invalid_client_metadata", Description: "the body must be a JSON client metadata document",
			status: http.StatusBadRequest})
		return
	}
	c, oerr := clientFromMetadata(&md)
	if oerr != nil {
		s.writeOAuthError(w, r, oerr)
		return
	}
	c.ID = newSecret(clientPrefix)[:len(clientPrefix)+22]
	c.Kind = mcpgate.ClientDCR
	if err := s.db.SaveOAuthClient(r.Context(), c, httpx.ClientAddress(r)); err != nil {
		s.internalError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "oauth client registered", "client_id", c.ID, "client_name", c.Name)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, registrationAnswer(c, &md))
}

// registration is the answer to a registration (RFC 7591 §3.2.1): the
// client's id and what was registered, where an optional field that was not
// registered is left out, never sent empty. An empty string is not a URL,
// and client libraries that validate the answer (the TypeScript SDK's
// OAuthClientInformationFullSchema, in its src/shared/auth.ts) refuse it.
type registration struct {
	ClientID                string   `json:"client_id"`
	ClientIDIssuedAt        int64    `json:"client_id_issued_at"`
	ClientName              string   `json:"client_name,omitempty"`
	ClientURI               string   `json:"client_uri,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	Scope                   string   `json:"scope"`
}

// registrationAnswer echoes a registered client. The name is echoed only
// when the client sent one (the placeholder shown for a nameless client is
// the gateway's, not the client's); the grant types, response types and
// auth method are the ones this server provisions for every client.
func registrationAnswer(c *mcpgate.OAuthClient, md *oauthex.ClientRegistrationMetadata) registration {
	a := registration{ClientID: c.ID, ClientIDIssuedAt: c.CreatedAt.Unix(), ClientURI: c.URI, RedirectURIs: c.RedirectURIs,
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: "none", Scope: mcpgate.OAuthScopeTools + " " + mcpgate.OAuthScopeRead}
	if strings.TrimSpace(md.ClientName) != "" {
		a.ClientName = c.Name
	}
	// A registration's scope is what the client will restrict itself to
	// (RFC 7591 §2); the server may narrow it to the scopes it knows, and
	// says so by the echo. The authorization request is where an unknown
	// scope is refused.
	var known []string
	for _, sc := range strings.Fields(md.Scope) {
		if isKnownScope(sc) && !slices.Contains(known, sc) {
			known = append(known, sc)
		}
	}
	if len(known) > 0 {
		a.Scope = strings.Join(known, " ")
	}
	return a
}

// isKnownScope reports whether scope is one of the MCP endpoint's scopes.
func isKnownScope(scope string) bool {
	return scope == mcpgate.OAuthScopeTools || scope == mcpgate.OAuthScopeRead
}

// clientFromMetadata validates client metadata, from a registration or a
// metadata document. Every client is public: a requested secret-based auth
// method is replaced by "none", which the response says (RFC 7591 §3.2.1).
func clientFromMetadata(md *oauthex.ClientRegistrationMetadata) (*mcpgate.OAuthClient, *oauthError) {
	bad := func(code, desc string) *oauthError {
		return &oauthError{Code: code, Description: desc, status: http.StatusBadRequest}
	}
	if len(md.RedirectURIs) == 0 || len(md.RedirectURIs) > 20 {
		return nil, bad("invalid_redirect_uri", "one to twenty redirect_uris are required")
	}
	for _, u := range md.RedirectURIs {
		if len(u) > 2000 {
			return nil, bad("invalid_redirect_uri", "a redirect URI is too long")
		}
		if err := checkRedirectURI(u); err != nil {
			return nil, bad("invalid_redirect_uri", err.Error())
		}
	}
	if len(md.GrantTypes) > 0 && !slices.Contains(md.GrantTypes, "authorization_code") {
		return nil, bad("invalid_client_metadata", "grant_types must include authorization_code")
	}
	for _, g := range md.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return nil, bad("invalid_client_metadata", "only the authorization_code and refresh_token grants are supported")
		}
	}
	if len(md.ResponseTypes) > 0 && !slices.Equal(md.ResponseTypes, []string{"code"}) {
		return nil, bad("invalid_client_metadata", "response_types must be [\"code\"]")
	}
	name := strings.TrimSpace(md.ClientName)
	if name == "" {
		name = "Unnamed client"
	}
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > 100 {
		return nil, bad("invalid_client_metadata", "client_name must be valid text of at most 100 characters")
	}
	uri := ""
	if cu, err := url.Parse(md.ClientURI); err == nil && cu.Scheme == "https" && cu.Host != "" && len(md.ClientURI) <= 500 {
		uri = md.ClientURI
	}
	return &mcpgate.OAuthClient{Name: name, URI: uri, RedirectURIs: md.RedirectURIs}, nil
}

// findClient returns the client a client_id names: a registered one, or
// one known by its metadata document (fetched, or from the cache).
func (s *Server) findClient(r *http.Request, id string) (*mcpgate.OAuthClient, error) {
	if isCIMDClientID(id) {
		return s.cimdClient(r, id)
	}
	if !strings.HasPrefix(id, clientPrefix) {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "unknown client")
	}
	c, _, err := s.db.FindOAuthClient(r.Context(), id)
	return c, err
}

// cimdClient returns a client by its metadata document: the stored copy
// of a client someone consented to, while it is fresh; else the copy
// fetched for an earlier step of this sign-in (this replica's, for a few
// minutes); else a fetch, limited per client address. A fetched document
// is stored only when a person consents (keepClient), so strangers cannot
// fill the table.
func (s *Server) cimdClient(r *http.Request, id string) (*mcpgate.OAuthClient, error) {
	c, fetched, err := s.db.FindOAuthClient(r.Context(), id)
	if err == nil && s.now().Sub(fetched) < s.cimd.opts.CacheTTL {
		return c, nil
	}
	if err != nil && mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		return nil, err
	}
	if c := s.cimd.pending.get(id, s.now()); c != nil {
		return c, nil
	}
	if !allowAddr(s.fetchers, httpx.ClientAddress(r), s.now()) {
		return nil, mcpgate.Errorf(mcpgate.ETooMany, "Too many apps were looked up from your address. Try again in a few minutes.")
	}
	md, ferr := s.cimd.fetch(r.Context(), id)
	if ferr != nil {
		s.log.InfoContext(r.Context(), "client metadata document refused", "client_id", id, "err", ferr)
		reason := "it could not be fetched"
		var fe *fetchError
		if errors.As(ferr, &fe) {
			reason = fe.Reason
		}
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "The app's metadata document (%s) cannot be used: %s.", id, reason)
	}
	nc, oerr := clientFromMetadata(md)
	if oerr != nil {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "the client's metadata document is not valid: %s", oerr.Description)
	}
	nc.ID, nc.Kind = id, mcpgate.ClientCIMD
	s.cimd.pending.put(nc, s.now())
	return nc, nil
}

// keepClient stores a metadata document's client once a person consents
// to it (a registered client is stored already), refreshing the stored copy.
func (s *Server) keepClient(r *http.Request, c *mcpgate.OAuthClient) error {
	if c.Kind != mcpgate.ClientCIMD {
		return nil
	}
	return s.db.SaveOAuthClient(r.Context(), c, httpx.ClientAddress(r))
}

// AppName names the app of a client id for the login page an authorization
// request leads through: the stored client's name (the consent page then
// says how the gateway knows it), or for a metadata document not consented
// to yet, its host. Nothing is fetched: the person has not signed in yet.
func (s *Server) AppName(ctx context.Context, clientID string) string {
	c, _, err := s.db.FindOAuthClient(ctx, clientID)
	switch {
	case err == nil:
		return c.Name
	case isCIMDClientID(clientID):
		u, _ := url.Parse(clientID)
		return "an app of " + u.Host
	}
	return ""
}
