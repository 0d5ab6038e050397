package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

// SessionStore is what sessions need from the database.
type SessionStore interface {
	CreateSession(ctx context.Context, userID string, expiresAt time.Time) (string, error)
	// DescribeSession records where a session was made (client address and
	// user agent), for the person's session list.
	DescribeSession(ctx context.Context, sessionID, address, userAgent string) error
	FindSessionUser(ctx context.Context, sessionID string) (*mcpgate.User, error)
	RevokeSession(ctx context.Context, sessionID string) error
}

// Services are the services the handlers call: every one but the
// resources, which only the dashboard's pages browse.
type Services struct {
	Accounts      mcpgate.AccountService
	TwoFactor     mcpgate.TwoFactorService
	Workspaces    mcpgate.WorkspaceService
	Keys          mcpgate.KeyService
	Connections   mcpgate.ConnectionService
	Tools         mcpgate.ToolService
	Guardrails    mcpgate.GuardrailService
	Audit         mcpgate.AuditService
	Approvals     mcpgate.ApprovalService
	Grants        mcpgate.GrantService
	Notifications mcpgate.NotificationService
}

// Options configure the server. Handlers left nil are not mounted.
type Options struct {
	// Services decide every rule; the handlers only translate HTTP.
	Services Services
	Sessions SessionStore
	Logger   *slog.Logger
	// PublicURL is where people reach the gateway: the base of connector
	// and invitation URLs, and https there makes cookies Secure.
	PublicURL string
	JWTSecret []byte
	// SessionTTL defaults to 12 hours.
	SessionTTL time.Duration
	// Ready reports whether the instance can serve (database and schema).
	Ready func(ctx context.Context) error
	// MCP serves /mcp and the connector URL; Metrics serves /metrics; Web
	// serves every other path (the dashboard).
	MCP http.Handler
	// ServerMCP serves each upstream server's own endpoint, /mcp/{server}
	// and /c/{key}/mcp/{server}; nil: not mounted.
	ServerMCP http.Handler
	Metrics   http.Handler
	Web       http.Handler
	// TrustedProxies are the proxies whose forwarding headers give the
	// client address (TRUSTED_PROXIES); nil trusts none.
	TrustedProxies *httpx.Proxies
	// OAuth serves the authorization server: /.well-known/oauth-* and
	// /oauth/*, with the session's user (if any) in the context.
	OAuth http.Handler
	// Servers are the workspace's upstream MCP servers; nil: their routes
	// are not mounted.
	Servers mcpgate.ServerService
	// ServerOAuth connects OAuth upstream servers (nil: no such routes).
	ServerOAuth mcpgate.ServerOAuthService
}

// Server is the HTTP surface.
type Server struct {
	svc      Services
	log      *slog.Logger
	opts     Options
	sessions *Sessions
	exports  exportLimiter
}

// New returns a server.
func New(opts Options) *Server {
	if opts.SessionTTL == 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{svc: opts.Services, log: opts.Logger, opts: opts}
	s.sessions = &Sessions{Secret: opts.JWTSecret, TTL: opts.SessionTTL, Secure: isHTTPS(opts.PublicURL), Store: opts.Sessions}
	return s
}

// Sessions returns the session issuer, for the dashboard's pages.
func (s *Server) Sessions() *Sessions { return s.sessions }

func isHTTPS(u string) bool { return len(u) >= 8 && strings.EqualFold(u[:8], "https://") }

// Handler returns the root router.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(httpx.WithClientAddress(s.opts.TrustedProxies), s.requestLog, s.canonicalConnectorPath)
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.handleReady)
	if s.opts.Metrics != nil {
		r.Handle("/metrics", s.opts.Metrics)
	}
	if s.opts.MCP != nil {
		// The same security headers as the API (nosniff, no framing, no
		// referrer): MCP answers are JSON or SSE, never pages.
		r.With(securityHeaders).Handle("/mcp", s.opts.MCP)
		r.With(securityHeaders).Handle(mcpgate.ConnectorPathPrefix+"{key}/mcp", s.opts.MCP)
	}
	if s.opts.ServerMCP != nil {
		r.With(securityHeaders).Handle("/mcp/{server}", s.opts.ServerMCP)
		r.With(securityHeaders).Handle(mcpgate.ConnectorPathPrefix+"{key}/mcp/{server}", s.opts.ServerMCP)
	}
	if s.opts.ServerOAuth != nil {
		s.serverOAuthRoutes(r)
	}
	if s.opts.OAuth != nil {
		// The authorization server sets its own security headers (the
		// consent page's form-action names the client's redirect origin).
		oauth := r.With(s.OptionalUser)
		oauth.Handle("/.well-known/oauth-protected-resource", s.opts.OAuth)
		oauth.Handle("/.well-known/oauth-protected-resource/*", s.opts.OAuth)
		oauth.Handle("/.well-known/oauth-authorization-server", s.opts.OAuth)
		oauth.Handle("/oauth/*", s.opts.OAuth)
	}
	r.Route("/api/v1", func(r chi.Router) {
		r.Use(securityHeaders, timeout(15*time.Second), s.csrf)
		r.Post("/auth/signup", routeBody(s, s.handleSignup))
		r.Post("/auth/login", routeBody(s, s.handleLogin))
		r.Post("/auth/logout", s.route(s.handleLogout))
		r.Post("/auth/password-reset", routeBody(s, s.handlePasswordReset))
		r.Post("/auth/password-reset/confirm", routeBody(s, s.handlePasswordResetConfirm))
		r.Post("/auth/verify-email", routeBody(s, s.handleVerifyEmail))
		r.Group(func(r chi.Router) {
			r.Use(s.requireUser)
			r.Get("/me", s.route(s.handleMe))
			r.Put("/me/password", routeBody(s, s.handlePasswordChange))
			r.Post("/me/email-verification", s.route(s.handleVerificationResend))
			r.Put("/me/email", routeBody(s, s.handleEmailChange))
			r.Delete("/me", routeBody(s, s.handleAccountDelete))
			r.Get("/me/sessions", s.route(s.handleSessionList))
			r.Delete("/me/sessions", s.route(s.handleSessionEndOthers))
			r.Delete("/me/sessions/{id}", s.route(s.handleSessionEnd))
			r.Post("/me/totp", routeBody(s, s.handleTOTPBegin))
			r.Post("/me/totp/confirm", routeBody(s, s.handleTOTPConfirm))
			r.Delete("/me/totp", routeBody(s, s.handleTOTPDisable))
			r.Post("/me/totp/recovery-codes", routeBody(s, s.handleRecoveryCodesRenew))
			r.Get("/workspaces", s.route(s.handleWorkspaceList))
			r.Post("/workspaces", routeBody(s, s.handleWorkspaceCreate))
			r.Post("/invitations/{token}/accept", s.route(s.handleInvitationAccept))
			r.Route("/workspaces/{ws}", func(r chi.Router) {
				r.Use(s.requireMember)
				r.Get("/", s.route(s.handleWorkspaceGet))
				r.Patch("/", routeBody(s, s.handleWorkspaceUpdate))
				r.Get("/members", s.route(s.handleMemberList))
				r.Patch("/members/{user}", routeBody(s, s.handleMemberUpdate))
				r.Delete("/members/{user}", s.route(s.handleMemberRemove))
				r.Get("/invitations", s.route(s.handleInvitationList))
				r.Post("/invitations", routeBody(s, s.handleInvitationCreate))
				r.Delete("/invitations/{id}", s.route(s.handleInvitationDelete))
				r.Get("/connections/{connector}", s.route(s.handleConnectionGet))
				r.Put("/connections/{connector}", routeBody(s, s.handleConnectionPut))
				r.Delete("/connections/{connector}", s.route(s.handleConnectionDelete))
				r.Get("/tools", s.route(s.handleToolList))
				r.Put("/tools/{name}", routeBody(s, s.handleToolUpdate))
				r.Post("/tools/{name}/call", routeBody(s, s.handleToolCall))
				r.Get("/keys", s.route(s.handleKeyList))
				r.Post("/keys", routeBody(s, s.handleKeyCreate))
				r.Delete("/keys/{id}", s.route(s.handleKeyRevoke))
				r.Get("/audit", s.route(s.handleAuditList))
				r.Get("/audit/export", s.handleAuditExport)
				r.Get("/approvals", s.route(s.handleApprovalList))
				r.Get("/approvals/{id}", s.route(s.handleApprovalGet))
				r.Post("/approvals/{id}/approve", s.route(s.handleApprovalDecide(true)))
				r.Post("/approvals/{id}/deny", s.route(s.handleApprovalDecide(false)))
				r.Get("/guardrails", s.route(s.handleGuardrailsGet))
				r.Put("/guardrails", routeBody(s, s.handleGuardrailsPut))
				r.Get("/notifications", s.route(s.handleNotificationsGet))
				r.Put("/notifications", routeBody(s, s.handleNotificationsPut))
				r.Get("/notifications/deliveries", s.route(s.handleDeliveryList))
				r.Get("/grants", s.route(s.handleGrantList))
				r.Delete("/grants/{id}", s.route(s.handleGrantRevoke))
				if s.opts.Servers != nil {
					s.serverRoutes(r)
				}
				if s.opts.ServerOAuth != nil {
					s.serverOAuthWorkspaceRoutes(r)
				}
			})
		})
		r.NotFound(func(w http.ResponseWriter, r *http.Request) {
			WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.ENotFound, "no such API route"))
		})
		r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			var body errorBody
			body.Error.Code = "method_not_allowed"
			body.Error.Message = "method not allowed on this route"
			writeJSON(w, http.StatusMethodNotAllowed, body)
		})
	})
	if s.opts.Web != nil {
		r.With(securityHeaders, s.OptionalUser).Handle("/*", s.opts.Web)
	}
	return r
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if s.opts.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := s.opts.Ready(ctx); err != nil {
			s.log.WarnContext(r.Context(), "not ready", "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
