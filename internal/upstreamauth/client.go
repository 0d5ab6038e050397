package upstreamauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// Defaults bounding one exchange with an upstream's authorization side.
const (
	DefaultTimeout  = 10 * time.Second
	DefaultMaxBytes = 64 << 10
)

// Client talks to upstream servers' authorization side.
type Client struct {
	// Network is the hop's policy: every URL is checked with it and every
	// request dialled through it.
	Network upstream.Network
	// Timeout bounds one request; MaxBytes one answer.
	Timeout  time.Duration
	MaxBytes int64
	// ClientName is the name the gateway registers under.
	ClientName string
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

func (c *Client) maxBytes() int64 {
	if c.MaxBytes > 0 {
		return c.MaxBytes
	}
	return DefaultMaxBytes
}

// Error is a failure to use an upstream's authorization side, with a
// message that says why (never a token or secret).
type Error struct {
	Message string
	// Status is the HTTP status the server answered with (0: none).
	Status int
	// Code and Description are an OAuth error answer's (RFC 6749 §5.2).
	Code, Description string
}

func (e *Error) Error() string { return e.Message }

// InvalidGrant reports whether err is the authorization server refusing
// a grant (a revoked, expired or reused refresh token): only a person
// connecting again mends it.
func InvalidGrant(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == "invalid_grant"
}

func errorf(format string, args ...any) error { return &Error{Message: fmt.Sprintf(format, args...)} }

// do sends req with the guarded client and reads at most MaxBytes of the
// answer.
func (c *Client) do(ctx context.Context, req *http.Request) (*http.Response, []byte, error) {
	if _, err := c.Network.CheckURL(req.URL.String()); err != nil {
		return nil, nil, errorf("the gateway may not reach %s: %v", redactURL(req.URL), err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	hc, closeIdle := c.Network.HTTPClient()
	defer closeIdle()
	resp, err := hc.Do(req.WithContext(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, errorf("%s did not answer in time", redactURL(req.URL))
		}
		return nil, nil, errorf("the gateway could not reach %s: %v", redactURL(req.URL), unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes()+1))
	if err != nil {
		return nil, nil, errorf("reading the answer of %s: %v", redactURL(req.URL), err)
	}
	if int64(len(body)) > c.maxBytes() {
		return nil, nil, errorf("the answer of %s is larger than %d bytes", redactURL(req.URL), c.maxBytes())
	}
	return resp, body, nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redactURL is a URL without its query (which may carry a code or state).
func redactURL(u *url.URL) string {
	c := *u
	c.RawQuery, c.Fragment, c.User = "", "", nil
	return c.String()
}

// getJSON fetches a metadata document: 200 with a JSON media type.
func (c *Client) getJSON(ctx context.Context, raw string, v any) (status int, err error) {
	req, err := http.NewRequest(http.MethodGet, raw, nil)
	if err != nil {
		return 0, errorf("the URL %q does not parse", raw)
	}
	req.Header.Set("Accept", "application/json")
	resp, body, err := c.do(ctx, req)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, &Error{Status: resp.StatusCode, Message: fmt.Sprintf("%s answered %d", redactURL(req.URL), resp.StatusCode)}
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return resp.StatusCode, errorf("%s answered %q, not JSON", redactURL(req.URL), mt)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return resp.StatusCode, errorf("%s answered JSON the gateway cannot read: %v", redactURL(req.URL), err)
	}
	return resp.StatusCode, nil
}

// Discovery is what the gateway found out about an OAuth-protected server.
type Discovery struct {
	// Resource is the protected resource's identifier: the resource
	// indicator of every authorization and token request.
	Resource            string
	ResourceMetadataURL string
	// Scopes are the scopes to ask for ("" for none): the challenge's,
	// else the resource metadata's scopes_supported.
	Scopes string
	Issuer string
	// Metadata is the authorization server's metadata, and MetadataRaw the
	// document as fetched.
	Metadata    oauthex.AuthServerMeta
	MetadataRaw json.RawMessage
}

// initializeProbe is the request that makes an MCP server say how it wants
// to be authorized.
const initializeProbe = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
	`"capabilities":{},"clientInfo":{"name":"mcpgate","version":"probe"}}}`

// toolsListProbe is the request after initialize that a server which
// lets initialize through unauthenticated answers 401.
const toolsListProbe = `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`

// probe sends one unauthenticated JSON-RPC request to the server.
func (c *Client) probe(ctx context.Context, serverURL, body string, h http.Header) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, serverURL, strings.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, _, err := c.do(ctx, req)
	return resp, err
}

// Discover asks serverURL how it is authorized: it must answer an
// unauthenticated initialize (or, where it lets that through, the next
// request) with 401; the protected-resource metadata is
// found from the challenge's resource_metadata (else the well-known URIs,
// path first), its resource must be the server's URL, and the first
// authorization server's metadata must be found, name that issuer, and
// support PKCE with S256.
func (c *Client) Discover(ctx context.Context, serverURL string) (*Discovery, error) {
	u, err := c.Network.CheckURL(serverURL)
	if err != nil {
		return nil, errorf("%v", err)
	}
	resp, err := c.probe(ctx, u.String(), initializeProbe, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusUnauthorized {
		// A server may let initialize through and ask for a token only
		// for what follows: the next request (2026-07-28's, which needs
		// no session; with the session a 2025 server gave) says.
		h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}}
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			h = http.Header{"Mcp-Protocol-Version": {"2025-11-25"}, "Mcp-Session-Id": {id}}
		}
		if next, err := c.probe(ctx, u.String(), toolsListProbe, h); err == nil && next.StatusCode == http.StatusUnauthorized {
			resp = next
		}
	}
	if resp.StatusCode != http.StatusUnauthorized {
		return nil, errorf("the server answered %d without a credential, not 401: it does not ask for OAuth "+
			"(choose the credential kind none or headers)", resp.StatusCode)
	}
	d := &Discovery{}
	var candidates []string
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	for _, ch := range challenges {
		if ch.Scheme != "bearer" {
			continue
		}
		if m := ch.Params["resource_metadata"]; m != "" {
			candidates = append(candidates, m)
		}
		if s := ch.Params["scope"]; s != "" {
			d.Scopes = s
		}
	}
	if len(candidates) == 0 {
		candidates = wellKnownResourceMetadata(u)
	}
	var prm oauthex.ProtectedResourceMetadata
	var lastErr error
	for _, m := range candidates {
		if _, lastErr = c.getJSON(ctx, m, &prm); lastErr == nil {
			d.ResourceMetadataURL = m
			break
		}
	}
	if d.ResourceMetadataURL == "" {
		return nil, errorf("the server's protected-resource metadata could not be read: %v", lastErr)
	}
	if !resourceCovers(prm.Resource, u) {
		return nil, errorf("the server's protected-resource metadata is for %q, not for this URL", prm.Resource)
	}
	d.Resource = prm.Resource
	if d.Scopes == "" && len(prm.ScopesSupported) > 0 {
		d.Scopes = strings.Join(prm.ScopesSupported, " ")
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, errorf("the server's protected-resource metadata names no authorization server")
	}
	d.Issuer = prm.AuthorizationServers[0]
	if err := c.authServerMetadata(ctx, d); err != nil {
		return nil, err
	}
	return d, nil
}

// resourceCovers reports whether the protected resource named resource
// is u's: the same URL, or one of its parents on the same origin (a
// server whose metadata at the root names its origin, RFC 9728 §3.3;
// "/api" covers "/api/mcp", not "/apiary"). Tokens are asked for that
// resource exactly as published.
func resourceCovers(resource string, u *url.URL) bool {
	r, err := url.Parse(resource)
	if err != nil || r.Fragment != "" || r.RawQuery != "" || !strings.EqualFold(r.Scheme, u.Scheme) || !strings.EqualFold(r.Host, u.Host) {
		return false
	}
	parent := strings.TrimSuffix(r.EscapedPath(), "/")
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	return path == parent || strings.HasPrefix(path, parent+"/")
}

// ResourceAuthServer reads the protected-resource metadata at metadataURL
// (a 401's resource_metadata) and returns the first authorization server
// it names: where the server now sends its clients to sign in.
func (c *Client) ResourceAuthServer(ctx context.Context, metadataURL string) (string, error) {
	var prm oauthex.ProtectedResourceMetadata
	if _, err := c.getJSON(ctx, metadataURL, &prm); err != nil {
		return "", errorf("the server's protected-resource metadata could not be read: %v", err)
	}
	if len(prm.AuthorizationServers) == 0 {
		return "", errorf("the server's protected-resource metadata names no authorization server")
	}
	return prm.AuthorizationServers[0], nil
}

// ChallengeResourceMetadata is the resource_metadata of a Bearer
// challenge ("" when it names none).
func ChallengeResourceMetadata(wwwAuthenticate string) string {
	challenges, _ := oauthex.ParseWWWAuthenticate([]string{wwwAuthenticate})
	for _, ch := range challenges {
		if ch.Scheme == "bearer" && ch.Params["resource_metadata"] != "" {
			return ch.Params["resource_metadata"]
		}
	}
	return ""
}

// wellKnownResourceMetadata are RFC 9728's URIs for u: with the path
// inserted first, then at the root.
func wellKnownResourceMetadata(u *url.URL) []string {
	base := u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource"
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		return []string{base + p, base}
	}
	return []string{base}
}

// AuthServerMetadataURLs are the URLs the MCP authorization spec
// (2025-11-25) has a client try, in order, for an issuer: OAuth 2.0
// metadata and OpenID Connect discovery with the path inserted, then
// OpenID Connect discovery with the path appended; for an issuer without
// a path, the two at the root.
func AuthServerMetadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return nil, errorf("the authorization server %q is not a URL", issuer)
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	if p == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}, nil
	}
	return []string{origin + "/.well-known/oauth-authorization-server" + p, origin + "/.well-known/openid-configuration" + p,
		origin + p + "/.well-known/openid-configuration"}, nil
}

func (c *Client) authServerMetadata(ctx context.Context, d *Discovery) error {
	if _, err := c.Network.CheckURL(d.Issuer); err != nil {
		return errorf("the gateway may not reach the authorization server %q: %v", d.Issuer, err)
	}
	urls, err := AuthServerMetadataURLs(d.Issuer)
	if err != nil {
		return err
	}
	var lastErr error
	for _, m := range urls {
		var raw json.RawMessage
		status, err := c.getJSON(ctx, m, &raw)
		if err != nil {
			lastErr = err
			if status >= 400 && status < 500 {
				continue // not there: the next URI
			}
			return errorf("the authorization server's metadata could not be read: %v", err)
		}
		var meta oauthex.AuthServerMeta
		if err := json.Unmarshal(raw, &meta); err != nil {
			return errorf("the authorization server's metadata does not parse: %v", err)
		}
		if strings.TrimSuffix(meta.Issuer, "/") != strings.TrimSuffix(d.Issuer, "/") {
			return errorf("the authorization server's metadata names the issuer %q, not %q", meta.Issuer, d.Issuer)
		}
		if !slices.Contains(meta.CodeChallengeMethodsSupported, "S256") {
			return errorf("the authorization server %s does not support PKCE with S256, which the gateway requires", d.Issuer)
		}
		for name, e := range map[string]string{"token_endpoint": meta.TokenEndpoint, "authorization_endpoint": meta.AuthorizationEndpoint} {
			if e == "" {
				return errorf("the authorization server's metadata has no %s", name)
			}
		}
		if au, err := url.Parse(meta.AuthorizationEndpoint); err != nil || (au.Scheme != "https" && au.Scheme != "http") {
			return errorf("the authorization server's authorization_endpoint is not an http(s) URL")
		}
		d.Metadata, d.MetadataRaw = meta, raw
		return nil
	}
	return errorf("no authorization server metadata found for %s: %v", d.Issuer, lastErr)
}

// Registration is how the gateway is known to an authorization server.
type Registration struct {
	ClientID     string
	ClientSecret mcpgate.Secret // "" for a public client
	// Kind is "cimd" (the client id is the URL of the gateway's client ID
	// metadata document) or "dcr".
	Kind string
}

// Register makes the gateway known to the authorization server: by its
// client ID metadata document (documentURL) when the server supports them
// and documentURL is https, else by Dynamic Client Registration with the
// redirect URI.
func (c *Client) Register(ctx context.Context, meta *oauthex.AuthServerMeta, documentURL, redirectURI string) (*Registration, error) {
	if meta.ClientIDMetadataDocumentSupported && strings.HasPrefix(documentURL, "https://") {
		return &Registration{ClientID: documentURL, Kind: "cimd"}, nil
	}
	if meta.RegistrationEndpoint == "" {
		return nil, errorf("the authorization server takes neither client ID metadata documents (at an https PUBLIC_URL) " +
			"nor Dynamic Client Registration: the gateway cannot register itself there")
	}
	doc := ClientMetadata(c.ClientName, documentURL, redirectURI)
	doc["token_endpoint_auth_method"] = registrationAuthMethod(meta)
	body, _ := json.Marshal(doc)
	req, _ := http.NewRequest(http.MethodPost, meta.RegistrationEndpoint, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, answer, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return nil, oauthError(resp.StatusCode, answer, "the authorization server refused the gateway's registration")
	}
	var reg struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := json.Unmarshal(answer, &reg); err != nil || reg.ClientID == "" {
		return nil, errorf("the authorization server's registration answer has no client_id")
	}
	return &Registration{ClientID: reg.ClientID, ClientSecret: mcpgate.Secret(reg.ClientSecret), Kind: "dcr"}, nil
}

// registrationAuthMethod is how the gateway asks to authenticate at the
// token endpoint when it registers: as a public client (PKCE alone) where
// the authorization server takes that or says nothing, else with the
// secret it issues, by HTTP Basic or in the form, as the server lists.
func registrationAuthMethod(meta *oauthex.AuthServerMeta) string {
	m := meta.TokenEndpointAuthMethodsSupported
	switch {
	case len(m) == 0 || slices.Contains(m, "none"):
		return "none"
	case slices.Contains(m, "client_secret_basic"):
		return "client_secret_basic"
	case slices.Contains(m, "client_secret_post"):
		return "client_secret_post"
	}
	return "none"
}

// clientAuth sets the client's authentication on a token or revocation
// request: nothing but its id for a public client; its secret by HTTP
// Basic (RFC 6749 §2.3.1, the id and secret form-encoded) unless the
// authorization server takes only the form's client_secret.
func clientAuth(req *http.Request, form url.Values, meta *oauthex.AuthServerMeta, reg Registration) {
	form.Set("client_id", reg.ClientID)
	if reg.ClientSecret == "" {
		return
	}
	m := meta.TokenEndpointAuthMethodsSupported
	if slices.Contains(m, "client_secret_post") && !slices.Contains(m, "client_secret_basic") || len(m) == 0 {
		form.Set("client_secret", reg.ClientSecret.Reveal())
		return
	}
	form.Del("client_id")
	req.SetBasicAuth(url.QueryEscape(reg.ClientID), url.QueryEscape(reg.ClientSecret.Reveal()))
}

// ClientMetadata is the gateway's client metadata: the body of a Dynamic
// Client Registration and, with client_id, its client ID metadata
// document. The gateway is a public client (PKCE, no secret).
func ClientMetadata(name, documentURL, redirectURI string) map[string]any {
	m := map[string]any{"client_name": name, "redirect_uris": []string{redirectURI},
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": "none",
		// A server-hosted client, its redirect URI the gateway's own.
		"application_type": "web"}
	if documentURL != "" {
		if u, err := url.Parse(documentURL); err == nil {
			m["client_uri"] = u.Scheme + "://" + u.Host
		}
	}
	return m
}

// PKCE returns a new code verifier and its S256 challenge.
func PKCE() (verifier, challenge string) {
	verifier = RandomToken()
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// RandomToken is 32 random bytes, base64url: a state or a verifier.
func RandomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// AuthorizeURL is the authorization request a person's browser is sent to.
func AuthorizeURL(meta *oauthex.AuthServerMeta, clientID, redirectURI, state, challenge, resource, scopes string) string {
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirectURI}, "state": {state},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "resource": {resource}}
	if scopes != "" {
		q.Set("scope", scopes)
	}
	sep := "?"
	if strings.Contains(meta.AuthorizationEndpoint, "?") {
		sep = "&"
	}
	return meta.AuthorizationEndpoint + sep + q.Encode()
}

// Token is a token endpoint's answer.
type Token struct {
	AccessToken  mcpgate.Secret
	RefreshToken mcpgate.Secret
	TokenType    string
	Scope        string
	// ExpiresAt is when the access token expires (nil: not said).
	ExpiresAt *time.Time
}

// Exchange trades an authorization code for tokens.
func (c *Client) Exchange(ctx context.Context, meta *oauthex.AuthServerMeta, reg Registration, code, verifier, redirectURI, resource string) (*Token, error) {
	return c.token(ctx, meta, reg, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"redirect_uri": {redirectURI}, "resource": {resource}})
}

// Refresh trades a refresh token for new tokens. A server that rotates
// refresh tokens answers a new one; one that does not keeps the old one
// (the caller keeps it: Token.RefreshToken is then "").
func (c *Client) Refresh(ctx context.Context, meta *oauthex.AuthServerMeta, reg Registration, refreshToken mcpgate.Secret, resource string) (*Token, error) {
	return c.token(ctx, meta, reg, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken.Reveal()},
		"resource": {resource}})
}

func (c *Client) token(ctx context.Context, meta *oauthex.AuthServerMeta, reg Registration, form url.Values) (*Token, error) {
	req, err := http.NewRequest(http.MethodPost, meta.TokenEndpoint, nil)
	if err != nil {
		return nil, errorf("the token endpoint is not a URL")
	}
	clientAuth(req, form, meta, reg)
	setForm(req, form)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, body, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, redactSecrets(oauthError(resp.StatusCode, body, "the authorization server refused the token request"), form)
	}
	var t struct {
		AccessToken  string          `json:"access_token"`
		TokenType    string          `json:"token_type"`
		RefreshToken string          `json:"refresh_token"`
		ExpiresIn    json.RawMessage `json:"expires_in"`
		Scope        string          `json:"scope"`
	}
	if err := json.Unmarshal(body, &t); err != nil || t.AccessToken == "" {
		return nil, errorf("the authorization server's token answer has no access_token")
	}
	if t.TokenType != "" && !strings.EqualFold(t.TokenType, "bearer") {
		return nil, errorf("the authorization server issued a %q token; the gateway sends bearer tokens only", t.TokenType)
	}
	out := &Token{AccessToken: mcpgate.Secret(t.AccessToken), RefreshToken: mcpgate.Secret(t.RefreshToken), TokenType: "Bearer", Scope: t.Scope}
	if n, err := strconv.ParseInt(strings.Trim(string(t.ExpiresIn), `"`), 10, 64); err == nil && n > 0 {
		at := time.Now().Add(time.Duration(n) * time.Second)
		out.ExpiresAt = &at
	}
	return out, nil
}

// Revoke asks the authorization server to revoke token (RFC 7009); a
// server without a revocation endpoint is not asked.
func (c *Client) Revoke(ctx context.Context, meta *oauthex.AuthServerMeta, reg Registration, token mcpgate.Secret, hint string) error {
	if meta.RevocationEndpoint == "" || token == "" {
		return nil
	}
	form := url.Values{"token": {token.Reveal()}, "token_type_hint": {hint}}
	req, err := http.NewRequest(http.MethodPost, meta.RevocationEndpoint, nil)
	if err != nil {
		return errorf("the revocation endpoint is not a URL")
	}
	clientAuth(req, form, meta, reg)
	setForm(req, form)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, body, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return redactSecrets(oauthError(resp.StatusCode, body, "the authorization server refused the revocation"), form)
	}
	return nil
}

// secretFields are the members of a token or revocation request whose
// values an error must not carry, should the server echo one.
var secretFields = []string{"code", "code_verifier", "refresh_token", "token", "client_secret"}

// redactSecrets replaces in err's message and description every secret
// value form sent: an error goes to logs and the audit log.
func redactSecrets(err error, form url.Values) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	for _, f := range secretFields {
		if v := form.Get(f); len(v) >= 4 {
			e.Message = strings.ReplaceAll(e.Message, v, "[redacted]")
			e.Description = strings.ReplaceAll(e.Description, v, "[redacted]")
		}
	}
	return e
}

// oauthError reads an OAuth error answer; its description is the
// server's words, bounded.
func oauthError(status int, body []byte, what string) error {
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	_ = json.Unmarshal(body, &e)
	msg := fmt.Sprintf("%s (%d", what, status)
	if e.Error != "" {
		msg += " " + cut(e.Error, 64)
	}
	msg += ")"
	if e.Description != "" {
		msg += ": " + cut(e.Description, 200)
	}
	return &Error{Message: msg, Status: status, Code: e.Error, Description: e.Description}
}

func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// setForm makes form the body of req.
func setForm(req *http.Request, form url.Values) {
	body := form.Encode()
	req.Body = io.NopCloser(strings.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
}
