package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/password"
)

// SessionStore is what sessions need from the database.
type SessionStore interface {
	CreateSession(ctx context.Context, userID string, expiresAt time.Time) (string, error)
	FindSessionUser(ctx context.Context, sessionID string) (*mcpgate.User, error)
	RevokeSession(ctx context.Context, sessionID string) error
}

// Store is what the JSON API needs from the database.
type Store interface {
	SessionStore
	CreateUser(ctx context.Context, email, passwordHash string, invitationHash []byte) (*mcpgate.User, error)
	FindUserByEmail(ctx context.Context, email string) (*mcpgate.User, string, error)
	LoginFailures(ctx context.Context, subject string, period time.Duration) (int, time.Time, error)
	RecordLoginFailure(ctx context.Context, period time.Duration, subjects ...string) error
	ClearLoginFailures(ctx context.Context, subject string) error

	CreateWorkspace(ctx context.Context, ownerID, name string) (*mcpgate.Workspace, error)
	WorkspacesOfUser(ctx context.Context, userID string) ([]mcpgate.Workspace, error)
	FindMembership(ctx context.Context, workspaceID, userID string) (*mcpgate.Workspace, error)
	ListMembers(ctx context.Context, workspaceID string) ([]mcpgate.Member, error)
	FindMember(ctx context.Context, workspaceID, userID string) (*mcpgate.Member, error)
	UpdateMemberRole(ctx context.Context, workspaceID, userID string, role mcpgate.Role) (*mcpgate.Member, error)
	RemoveMember(ctx context.Context, workspaceID, userID string) error
	CreateInvitation(ctx context.Context, inv *mcpgate.Invitation, tokenHash []byte) error
	ListInvitations(ctx context.Context, workspaceID string) ([]mcpgate.Invitation, error)
	DeleteInvitation(ctx context.Context, workspaceID, id string) error
	FindOpenInvitation(ctx context.Context, tokenHash []byte) (*mcpgate.Invitation, error)
	AcceptInvitation(ctx context.Context, tokenHash []byte, userID, email string) (*mcpgate.Workspace, error)
}

// Auditor records admin actions in the audit log.
type Auditor interface {
	Record(ctx context.Context, ev mcpgate.AuditEvent)
}

// SignupMode says who may create an account.
type SignupMode string

// The signup modes.
const (
	SignupOpen   SignupMode = "open"
	SignupInvite SignupMode = "invite"
)

// Options configure the server. Handlers left nil are not mounted.
type Options struct {
	Store     Store
	Logger    *slog.Logger
	PublicURL string
	Signup    SignupMode
	JWTSecret []byte
	// SessionTTL defaults to 12 hours.
	SessionTTL time.Duration
	// PasswordParams default to password.Default; tests lower them.
	PasswordParams *password.Params
	// Ready reports whether the instance can serve (database and schema).
	Ready func(ctx context.Context) error
	// Audit records admin actions; nil records nothing.
	Audit Auditor
	// Gateway, Keys and AuditLog serve the credential, tool, key and audit
	// routes; left nil, those routes are not mounted.
	Gateway  Gateway
	Keys     KeyStore
	AuditLog AuditLog
	// MCP serves /mcp and /c/{key}/mcp; Metrics serves /metrics; Web serves
	// every other path (the dashboard).
	MCP     http.Handler
	Metrics http.Handler
	Web     http.Handler
}

// Server is the HTTP surface.
type Server struct {
	store    Store
	log      *slog.Logger
	opts     Options
	sessions *Sessions
	pwParams password.Params
	throttle loginThrottle
	audit    Auditor
}

// New returns a server.
func New(opts Options) *Server {
	if opts.SessionTTL == 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{store: opts.Store, log: opts.Logger, opts: opts, pwParams: password.Default, audit: opts.Audit}
	if opts.PasswordParams != nil {
		s.pwParams = *opts.PasswordParams
	}
	if s.audit == nil {
		s.audit = nopAuditor{}
	}
	s.sessions = &Sessions{Secret: opts.JWTSecret, TTL: opts.SessionTTL, Secure: isHTTPS(opts.PublicURL), Store: opts.Store}
	s.throttle = loginThrottle{store: opts.Store, period: 15 * time.Minute, perEmail: 5, perAddress: 30}
	return s
}

type nopAuditor struct{}

func (nopAuditor) Record(context.Context, mcpgate.AuditEvent) {}

// Sessions returns the session issuer, for the dashboard's pages.
func (s *Server) Sessions() *Sessions { return s.sessions }

func isHTTPS(u string) bool { return len(u) >= 8 && strings.EqualFold(u[:8], "https://") }

// Handler returns the root router.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.requestLog)
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.handleReady)
	if s.opts.Metrics != nil {
		r.Handle("/metrics", s.opts.Metrics)
	}
	if s.opts.MCP != nil {
		r.Handle("/mcp", s.opts.MCP)
		r.Handle("/c/{key}/mcp", s.opts.MCP)
	}
	r.Route("/api/v1", func(r chi.Router) {
		r.Use(securityHeaders, timeout(15*time.Second), s.csrf)
		r.Post("/auth/signup", s.handleSignup)
		r.Post("/auth/login", s.handleLogin)
		r.Post("/auth/logout", s.handleLogout)
		r.Group(func(r chi.Router) {
			r.Use(s.requireUser)
			r.Get("/me", s.handleMe)
			r.Put("/me/password", s.handlePasswordChange)
			r.Get("/workspaces", s.handleWorkspaceList)
			r.Post("/workspaces", s.handleWorkspaceCreate)
			r.Post("/invitations/{token}/accept", s.handleInvitationAccept)
			r.Route("/workspaces/{ws}", func(r chi.Router) {
				r.Use(s.requireMember)
				r.Get("/", s.handleWorkspaceGet)
				r.Get("/members", s.handleMemberList)
				r.With(s.requireAdmin).Patch("/members/{user}", s.handleMemberUpdate)
				r.Delete("/members/{user}", s.handleMemberRemove)
				r.With(s.requireAdmin).Get("/invitations", s.handleInvitationList)
				r.With(s.requireAdmin).Post("/invitations", s.handleInvitationCreate)
				r.With(s.requireAdmin).Delete("/invitations/{id}", s.handleInvitationDelete)
				s.gatewayRoutes(r)
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
