package oauth

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/limiter"
	"github.com/mcpgate/mcpgate/internal/store"
)

// Lifetimes. A code is exchanged at once, so a minute is plenty and one that
// leaks is soon worthless; an access token lasts an hour, so that what a
// leaked one allows ends soon after without the client signing in again
// (its refresh token, rotated on every use, brings a new one).
const (
	codeTTL    = 60 * time.Second
	accessTTL  = time.Hour
	refreshTTL = 30 * 24 * time.Hour
	// unusedClientTTL is how long a DCR registration that never got a
	// grant is kept.
	unusedClientTTL = 24 * time.Hour
)

// Token prefixes: they tell an access token from an MCP key at a glance (so
// the right authenticator claims it) and make leaked ones easy to scan for.
// The access token's is the verifier's (internal/auth), which claims
// bearer tokens by it.
const (
	accessPrefix  = auth.AccessTokenPrefix
	refreshPrefix = "mcprt_"
	codePrefix    = "mcpac_"
	clientPrefix  = "mcpc_"
)

// ConsentRenderer shows the dashboard's pages for the authorization
// endpoint: the consent form, and an error page for a request that cannot
// be sent back to its client.
type ConsentRenderer interface {
	RenderConsent(w http.ResponseWriter, r *http.Request, p mcpgate.ConsentPage)
	RenderError(w http.ResponseWriter, r *http.Request, status int, heading, message string)
}

// TokenCache is a cache of access tokens that a revocation must empty at
// once (internal/auth's Tokens).
type TokenCache interface {
	Invalidate(kind, workspaceID string)
}

// Auditor records grant events.
type Auditor interface {
	Record(ctx context.Context, ev mcpgate.AuditEvent)
}

type nopAuditor struct{}

func (nopAuditor) Record(context.Context, mcpgate.AuditEvent) {}

// Options configure the server.
type Options struct {
	// DB keeps clients, codes and grants (the *store.DB, as a Store).
	DB Store
	// Workspaces decides which workspaces a person may grant access to.
	Workspaces mcpgate.WorkspaceService
	Consent    ConsentRenderer
	Audit      Auditor
	Logger     *slog.Logger
	// PublicURL is the issuer; <PublicURL>/mcp and each server's endpoint
	// <PublicURL>/mcp/<server> are the resources.
	PublicURL string
	// RegisterRate and RegisterBurst limit registrations per client address
	// (default 20 an hour, burst 20).
	RegisterRate  rate.Limit
	RegisterBurst int
	// FetchRate and FetchBurst limit fetches of client ID metadata
	// documents per client address (default 20 an hour, burst 10): each
	// one makes the gateway connect somewhere a stranger chose.
	FetchRate  rate.Limit
	FetchBurst int
	// Tokens, when set, is this replica's cache of access tokens
	// (internal/auth's Tokens), told at once of a revocation made here; the
	// other replicas hear of it by NOTIFY.
	Tokens TokenCache
	CIMD   CIMDOptions
	// Now is the clock (tests).
	Now func() time.Time
}

// Server is the authorization server.
type Server struct {
	opts     Options
	db       Store
	log      *slog.Logger
	audit    Auditor
	now      func() time.Time
	issuer   string
	resource string
	cimd     *cimdFetcher
	tokens   TokenCache

	// registrars and fetchers limit, per client address, registrations
	// and fetches of client ID metadata documents.
	registrars *limiter.Buckets
	fetchers   *limiter.Buckets
}

// addrIdle is how long an address's registration or fetch bucket is kept
// after its last use: a day, longer than either takes to refill (an hour),
// so that forgetting one never hands its address a fresh burst.
const addrIdle = 24 * time.Hour

// newAddrLimiter returns token buckets per client address. They are not
// shared out among replicas: each replica limits the addresses it sees.
func newAddrLimiter(l rate.Limit, burst int) *limiter.Buckets {
	return limiter.New(limiter.Options{Rate: l, Burst: burst, Idle: addrIdle})
}

// allowAddr takes a token from addr's bucket of l, first forgetting the
// idle buckets (registrations and fetches are rare, so the sweep rides on
// them instead of a loop of its own).
func allowAddr(l *limiter.Buckets, addr string, now time.Time) bool {
	l.Sweep(now)
	ok, _ := l.Allow(addr, now)
	return ok
}

// New returns the server.
func New(opts Options) *Server {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.Audit = cmp.Or[Auditor](opts.Audit, nopAuditor{})
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RegisterRate == 0 {
		opts.RegisterRate, opts.RegisterBurst = rate.Every(3*time.Minute), 20
	}
	if opts.FetchRate == 0 {
		opts.FetchRate, opts.FetchBurst = rate.Every(3*time.Minute), 10
	}
	resource, issuer := identifiers(opts.PublicURL)
	return &Server{opts: opts, db: opts.DB, log: opts.Logger, audit: opts.Audit, now: opts.Now,
		issuer: issuer, resource: resource, cimd: newCIMDFetcher(opts.CIMD), tokens: opts.Tokens,
		registrars: newAddrLimiter(opts.RegisterRate, opts.RegisterBurst), fetchers: newAddrLimiter(opts.FetchRate, opts.FetchBurst)}
}

// Resource is the protected resource the server issues tokens for.
func (s *Server) Resource() string { return s.resource }

// ResourceMetadataURL is where the resource's metadata is (RFC 9728 §3.1,
// with the resource's path appended).
func (s *Server) ResourceMetadataURL() string {
	return s.issuer + "/.well-known/oauth-protected-resource/mcp"
}

// Challenge is the WWW-Authenticate value of a 401 from the MCP endpoint:
// it points OAuth clients to the resource metadata (RFC 9728 §5.1) and
// names the scope to ask for.
func (s *Server) Challenge() string { return challengeOf(s.ResourceMetadataURL()) }

// ServerChallenge is Challenge for a server's own endpoint,
// /mcp/<server>: it points to that endpoint's metadata, whose resource is
// the endpoint, so that the client asks for a token for it.
func (s *Server) ServerChallenge(server string) string {
	return challengeOf(s.ResourceMetadataURL() + "/" + server)
}

func challengeOf(metadataURL string) string {
	return `Bearer resource_metadata="` + metadataURL + `", scope="` + mcpgate.OAuthScopeTools + `"`
}

// Handler serves the metadata documents and the /oauth/ endpoints. The
// dashboard's session, if any, must already be in the request's context
// (mcpgate.UserFromContext).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource", s.resourceMetadata(s.issuer))
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", s.resourceMetadata(s.resource))
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp/{server}", s.serverResourceMetadata)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.handleServerMetadata)
	mux.HandleFunc("POST /oauth/register", s.handleRegister)
	mux.HandleFunc("GET /oauth/authorize", s.handleAuthorize)
	mux.HandleFunc("POST /oauth/authorize", s.handleConsent)
	mux.HandleFunc("POST /oauth/token", s.handleToken)
	mux.HandleFunc("POST /oauth/revoke", s.handleRevoke)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Metadata, registration, token and revocation answer any origin:
		// browser-based MCP clients call them, no cookie is read there,
		// and the consent page is not among them.
		if !strings.HasPrefix(r.URL.Path, "/oauth/authorize") {
			w.Header().Set("Access-Control-Allow-Origin", "*")
			if r.Method == http.MethodOptions {
				w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Authorization, MCP-Protocol-Version")
				w.Header().Set("Access-Control-Max-Age", "86400")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		mux.ServeHTTP(w, r)
	})
}

// resourceMetadata serves the metadata of one of the gateway's resource
// identifiers. Its "resource" is the identifier its URL was made from
// (RFC 9728 §3.3): the path-less document describes the path-less
// resource, the one with /mcp appended the MCP endpoint. Clients compare
// the two, and one that reads the path-less document asks for tokens for
// the path-less identifier, which resourceOf takes as this gateway's.
func (s *Server) resourceMetadata(resource string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.writeResourceMetadata(w, resource, "mcpgate MCP endpoint")
	}
}

// serverResourceMetadata serves the metadata of a server's own endpoint,
// /mcp/<server>: the same document for every well-formed name, read from
// nothing, so that it tells no one whether a workspace has a server of
// that name (the endpoint itself answers that, to the workspace's own
// credentials only); a name no server can have is not found.
func (s *Server) serverResourceMetadata(w http.ResponseWriter, r *http.Request) {
	resource := serverResource(canonicalURL(s.resource+"/"+r.PathValue("server")), s.resource)
	if resource == "" {
		http.NotFound(w, r)
		return
	}
	s.writeResourceMetadata(w, resource, "mcpgate MCP endpoint of the upstream server "+r.PathValue("server"))
}

func (s *Server) writeResourceMetadata(w http.ResponseWriter, resource, name string) {
	w.Header().Set("Cache-Control", "public, max-age=3600")
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                 resource,
		"authorization_servers":    []string{s.issuer},
		"scopes_supported":         []string{mcpgate.OAuthScopeTools, mcpgate.OAuthScopeRead},
		"bearer_methods_supported": []string{"header"},
		"resource_name":            name,
	})
}

func (s *Server) handleServerMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=3600")
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         s.issuer,
		"authorization_endpoint":                         s.issuer + "/oauth/authorize",
		"token_endpoint":                                 s.issuer + "/oauth/token",
		"registration_endpoint":                          s.issuer + "/oauth/register",
		"revocation_endpoint":                            s.issuer + "/oauth/revoke",
		"scopes_supported":                               []string{mcpgate.OAuthScopeTools, mcpgate.OAuthScopeRead},
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"revocation_endpoint_auth_methods_supported":     []string{"none"},
		"code_challenge_methods_supported":               []string{"S256"},
		"client_id_metadata_document_supported":          true,
		"authorization_response_iss_parameter_supported": true,
		"service_documentation":                          s.issuer + "/",
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// oauthError is an error response of the token, registration and
// revocation endpoints (RFC 6749 §5.2). Descriptions never carry a secret.
type oauthError struct {
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
	status      int
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Description }

func errInvalidRequest(desc string) *oauthError {
	return &oauthError{Code: "invalid_request", Description: desc, status: http.StatusBadRequest}
}

// errInvalidTarget refuses a resource indicator (RFC 8707 §2).
func errInvalidTarget(only string) *oauthError {
	return &oauthError{Code: "invalid_target", Description: "the token can be issued only for " + only, status: http.StatusBadRequest}
}

func errInvalidGrant(desc string) *oauthError {
	return &oauthError{Code: "invalid_grant", Description: desc, status: http.StatusBadRequest}
}

func (s *Server) writeOAuthError(w http.ResponseWriter, r *http.Request, e *oauthError) {
	s.log.InfoContext(r.Context(), "oauth request refused", "path", r.URL.Path, "error", e.Code, "description", e.Description)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, e.status, e)
}

func (s *Server) internalError(w http.ResponseWriter, r *http.Request, err error) {
	s.log.ErrorContext(r.Context(), "oauth endpoint", "path", r.URL.Path, "err", err)
	if mcpgate.ErrorCode(err) == mcpgate.EUnavailable {
		s.writeOAuthError(w, r, &oauthError{Code: "temporarily_unavailable", Description: "try again shortly",
			status: http.StatusServiceUnavailable})
		return
	}
	s.writeOAuthError(w, r, &oauthError{Code: "server_error", Description: "internal error", status: http.StatusInternalServerError})
}

// newSecret returns prefix + 32 random bytes, base64url.
func newSecret(prefix string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// s256 is the PKCE S256 transform (RFC 7636 §4.2).
func s256(verifier string) string {
	h := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// allowRegistration takes a token from the address's registration bucket.
func (s *Server) allowRegistration(addr string) bool { return allowAddr(s.registrars, addr, s.now()) }

// Prune deletes expired codes and tokens and clients (registered, or known
// by a metadata document) that never got a grant; the wiring calls it
// periodically.
func (s *Server) Prune(ctx context.Context) error { return s.db.PruneOAuth(ctx, unusedClientTTL) }

// revoked drops this replica's cached tokens of a workspace at once, ahead
// of the notification every replica (this one included) will get.
func (s *Server) revoked(workspaceID string) {
	if s.tokens != nil {
		s.tokens.Invalidate(store.InvalidateGrants, workspaceID)
	}
}

// grantActor is the actor of a grant's own events (created, revoked).
func grantActor(g *mcpgate.Grant, source mcpgate.Source) *mcpgate.Actor {
	return &mcpgate.Actor{UserID: g.UserID, Email: g.UserEmail, WorkspaceID: g.WorkspaceID, Scope: g.Scope,
		GrantID: g.ID, ClientName: g.ClientName, Source: source}
}
