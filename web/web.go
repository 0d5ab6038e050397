package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

// Services are the services the pages read through: every one of them, the
// pages show a little of each.
type Services struct {
	Accounts      mcpgate.AccountService
	TwoFactor     mcpgate.TwoFactorService
	Workspaces    mcpgate.WorkspaceService
	Keys          mcpgate.KeyService
	Connections   mcpgate.ConnectionService
	Tools         mcpgate.ToolService
	Guardrails    mcpgate.GuardrailService
	Audit         mcpgate.AuditService
	Resources     mcpgate.ResourceService
	Approvals     mcpgate.ApprovalService
	Grants        mcpgate.GrantService
	Notifications mcpgate.NotificationService
}

// Options configure the dashboard.
type Options struct {
	// Services are what the pages read through; their rules decide what
	// each person sees.
	Services Services
	Logger   *slog.Logger
	// PublicURL is where users reach the gateway, without a trailing slash;
	// setup snippets and connector URLs are built from it.
	PublicURL string
	Version   string
	// Now returns the current time; tests fix it. Defaults to time.Now.
	Now func() time.Time
	// Demo reports whether a connector's upstream is its bundled simulator
	// (connectors.DemoProbe); its connection page then says so. Nil means
	// no.
	Demo func(connector string) bool
	// OAuthApp names the app of an OAuth client id for the login page an
	// authorization request starts with ("" when unknown); nil: none.
	OAuthApp func(ctx context.Context, clientID string) string
	// Servers are the workspace's upstream MCP servers; nil: no Servers
	// pages.
	Servers mcpgate.ServerService
}

type handler struct {
	svc    Services
	log    *slog.Logger
	opts   Options
	pages  map[string]*template.Template
	assets map[string]asset // by hashed name
	urls   map[string]string
	router chi.Router
}

type asset struct {
	body []byte
	ct   string
}

// Dashboard is the dashboard's handler. Besides its pages it renders the
// authorization server's consent and error pages (RenderConsent,
// RenderError), which the wiring hands to the server as its renderer.
type Dashboard struct{ *handler }

// New returns the dashboard. It parses every template now, so a broken
// template stops the process at start-up; it panics on one, as it is a
// programming error in the embedded files.
func New(opts Options) *Dashboard {
	h, err := newHandler(opts)
	if err != nil {
		panic(err)
	}
	return &Dashboard{h}
}

// SetOAuthApp sets Options.OAuthApp, for wiring in which the authorization
// server that names the apps is built after the dashboard (it takes the
// dashboard as its consent renderer). It must be called before the
// dashboard serves.
func (d *Dashboard) SetOAuthApp(fn func(ctx context.Context, clientID string) string) {
	d.opts.OAuthApp = fn
}

func newHandler(opts Options) (*handler, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.PublicURL = strings.TrimRight(opts.PublicURL, "/")
	h := &handler{svc: opts.Services, log: opts.Logger, opts: opts, assets: map[string]asset{}, urls: map[string]string{}}
	if err := h.loadAssets(); err != nil {
		return nil, err
	}
	if err := h.parseTemplates(); err != nil {
		return nil, err
	}
	h.routes()
	return h, nil
}

// loadAssets names every static file by its content hash:
// app.css becomes /static/app.<hash>.css, cached forever.
func (h *handler) loadAssets() error {
	entries, err := fs.ReadDir(files, "static")
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := fs.ReadFile(files, "static/"+e.Name())
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ext := path.Ext(e.Name())
		hashed := strings.TrimSuffix(e.Name(), ext) + "." + hex.EncodeToString(sum[:6]) + ext
		ct := mime.TypeByExtension(ext)
		if ct == "" {
			ct = "application/octet-stream"
		}
		h.assets[hashed] = asset{body: b, ct: ct}
		h.urls[e.Name()] = "/static/" + hashed
	}
	return nil
}

// pageFiles are the pages; each is parsed together with layout.html, which
// defines the frame and the shared partials.
var pageFiles = []string{"landing", "signup", "login", "invite", "overview", "connections", "keys",
	"sandboxes", "sandbox", "settings", "audit", "error", "account", "approvals", "approval", "consent",
	"forgot", "reset", "verify", "servers", "server"}

// pageParts are the partials a group of pages shares besides layout.html.
var pageParts = map[string]string{"servers": "server_parts", "server": "server_parts"}

func (h *handler) parseTemplates() error {
	funcs := template.FuncMap{
		"asset": func(name string) (string, error) {
			u, ok := h.urls[name]
			if !ok {
				return "", fmt.Errorf("no static asset %q", name)
			}
			return u, nil
		},
		"time":             fmtTime,
		"timeAgo":          func(t time.Time) string { return timeAgo(h.opts.Now(), t) },
		"timePtr":          func(t *time.Time) string { return fmtTimePtr(t) },
		"agoPtr":           func(t *time.Time) string { return agoPtr(h.opts.Now(), t) },
		"rfc3339":          fmtRFC3339,
		"bytes":            fmtBytes,
		"pct":              func(f float64) string { return fmt.Sprintf("%.1f%%", f) },
		"json":             compactJSON,
		"initial":          initial,
		"eq2":              func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) },
		"add":              func(a, b int) int { return a + b },
		"dict":             dict,
		"list":             func(xs ...any) []any { return xs },
		"sub":              func(a, b float64) float64 { return a - b },
		"canAdmin":         func(ws *mcpgate.Workspace) bool { return ws != nil && ws.Role.CanAdmin() },
		"demo":             func(connector string) bool { return h.opts.Demo != nil && h.opts.Demo(connector) },
		"browser":          browserName,
		"upstream":         h.upstream,
		"guardrailLabels":  h.guardrailLabels,
		"connectionsTitle": h.connectionsTitle,
		"hostOf":           hostOf,
		"pathSeg":          pathSeg,
		"maxApprovalWait":  func() int { return mcpgate.MaxApprovalWaitSeconds },
	}
	h.pages = map[string]*template.Template{}
	for _, name := range pageFiles {
		shared := []string{"templates/layout.html", "templates/connected_apps.html"}
		if extra, ok := pageParts[name]; ok {
			shared = append(shared, "templates/"+extra+".html")
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, append(shared, "templates/"+name+".html")...)
		if err != nil {
			return fmt.Errorf("parse template %s: %w", name, err)
		}
		h.pages[name] = t
	}
	return nil
}

func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict needs key/value pairs")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.router.ServeHTTP(w, r) }

func (h *handler) routes() {
	r := chi.NewRouter()
	r.Get("/static/{name}", h.serveStatic)
	r.Get("/favicon.ico", h.serveFavicon)
	r.Group(func(r chi.Router) {
		r.Use(h.pageHeaders)
		r.Get("/", h.handleLanding)
		r.Get("/signup", h.handleSignup)
		r.Get("/login", h.handleLogin)
		r.Get("/forgot-password", h.handleForgot)
		r.Get("/reset-password", h.handleReset)
		r.Get("/verify-email", h.handleVerify)
		r.Get("/invite/{token}", h.handleInvite)
		r.Route("/app", func(r chi.Router) {
			r.Use(h.requireUser)
			r.Get("/", h.handleApp)
			r.Get("/account", h.handleAccount)
			r.Route("/w/{ws}", func(r chi.Router) {
				r.Use(h.requireMember)
				r.Get("/", h.handleOverview)
				r.Get("/connections", h.handleConnections)
				r.Get("/keys", h.handleKeys)
				r.Get("/sandboxes", h.handleSandboxes)
				r.Get("/sandboxes/{id}", h.handleSandbox)
				r.Get("/settings", h.handleSettings)
				r.Get("/audit", h.handleAudit)
				r.Get("/approvals", h.handleApprovals)
				r.Get("/approvals/{id}", h.handleApproval)
				if h.opts.Servers != nil {
					r.Get("/servers", h.handleServers)
					r.Get("/servers/{name}", h.handleServer)
				}
			})
		})
		r.NotFound(func(w http.ResponseWriter, r *http.Request) { h.notFound(w, r) })
		r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			h.renderError(w, r, http.StatusMethodNotAllowed, "Method not allowed",
				"Pages only answer GET; changes go through the API.")
		})
	})
	h.router = r
}

func (h *handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	// The name holds the content's hash, so the file never changes.
	h.writeAsset(w, r, chi.URLParam(r, "name"), "public, max-age=31536000, immutable")
}

func (h *handler) writeAsset(w http.ResponseWriter, r *http.Request, name, cacheControl string) {
	a, ok := h.assets[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.ct)
	w.Header().Set("Cache-Control", cacheControl)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(a.body)
}

// pageHeaders marks pages as private and uncacheable (they show keys and
// audit data). The CSRF cookie the page's script echoes in the X-CSRF-Token
// header of every write is the API's: bound to the session, set at sign-in
// and mended by the session layer in front of every page.
func (h *handler) pageHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// requireUser sends a logged-out visitor to the login page, with a way back.
func (h *handler) requireUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mcpgate.UserFromContext(r.Context()) == nil {
			http.Redirect(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireMember enters the {ws} workspace as the user. A workspace the user
// does not belong to is a 404, as if it did not exist.
func (h *handler) requireMember(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := mcpgate.UserFromContext(r.Context())
		a, ws, err := h.svc.Workspaces.Enter(r.Context(), u, chi.URLParam(r, "ws"), mcpgate.SourceDashboard)
		if err != nil {
			if mcpgate.ErrorCode(err) == mcpgate.ENotFound || mcpgate.ErrorCode(err) == mcpgate.EInvalid {
				h.notFound(w, r)
				return
			}
			h.serverError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(mcpgate.NewContextWithWorkspace(r.Context(), ws, a)))
	})
}

func workspaceFrom(ctx context.Context) *mcpgate.Workspace { return mcpgate.WorkspaceFromContext(ctx) }

// actorFrom returns the person as the actor of the page's workspace.
func actorFrom(ctx context.Context) *mcpgate.Actor { return mcpgate.ActorFromContext(ctx) }

// view is what every page template gets.
type view struct {
	Title      string
	Nav        string
	User       *mcpgate.User
	Workspace  *mcpgate.Workspace
	Workspaces []mcpgate.Workspace
	PublicURL  string
	Version    string
	// Base is the current workspace's page prefix, /app/w/<id>.
	Base string
	// API is the current workspace's API prefix, /api/v1/workspaces/<id>.
	API string
	// PendingApprovals counts the requests waiting for this person to
	// decide, for the navigation.
	PendingApprovals int
	// Servers: the gateway serves upstream MCP servers (their pages are in
	// the navigation).
	Servers bool
	// Flow marks a page of an OAuth sign-in (consent, the login it
	// starts with): the header names the gateway and offers nothing that
	// leads away from the flow.
	Flow bool
	Data any
}

func (h *handler) newView(r *http.Request, title, nav string, data any) *view {
	v := &view{Title: title, Nav: nav, User: mcpgate.UserFromContext(r.Context()), Workspace: workspaceFrom(r.Context()),
		PublicURL: h.opts.PublicURL, Version: h.opts.Version, Data: data, Servers: h.opts.Servers != nil}
	if v.Workspace != nil {
		v.Base = "/app/w/" + v.Workspace.ID
		v.API = "/api/v1/workspaces/" + v.Workspace.ID
		if wss, err := h.svc.Workspaces.Workspaces(r.Context(), v.User); err == nil {
			v.Workspaces = wss
		}
		if a := actorFrom(r.Context()); a != nil && h.svc.Approvals != nil {
			v.PendingApprovals, _ = h.svc.Approvals.PendingApprovals(r.Context(), a)
		}
	}
	return v
}

// render executes a page into a buffer first, so that a template error
// becomes a clean 500 rather than half a page.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, page string, v *view) {
	t, ok := h.pages[page]
	if !ok {
		h.serverError(w, r, fmt.Errorf("no page %q", page))
		return
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, v); err != nil {
		h.log.ErrorContext(r.Context(), "render page", "page", page, "err", err)
		if page != "error" {
			h.renderError(w, r, http.StatusInternalServerError, "Something went wrong",
				"The page could not be shown. Try again; if it keeps happening, tell the person who runs this gateway.")
			return
		}
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

type errorPage struct {
	Status  int
	Heading string
	Message string
}

func (h *handler) renderError(w http.ResponseWriter, r *http.Request, status int, heading, msg string) {
	h.render(w, r, status, "error", h.newView(r, heading, "", errorPage{Status: status, Heading: heading, Message: msg}))
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	// A workspace the user is not in must look like one that does not
	// exist: drop any workspace from the frame.
	r = r.WithContext(mcpgate.NewContextWithWorkspace(r.Context(), nil, nil))
	h.renderError(w, r, http.StatusNotFound, "Page not found",
		"There is nothing here, or you do not have access to it. Check the address, or go back to your dashboard.")
}

func (h *handler) serverError(w http.ResponseWriter, r *http.Request, err error) {
	h.log.ErrorContext(r.Context(), "dashboard page", "path", r.URL.Path, "err", err)
	h.renderError(w, r, http.StatusInternalServerError, "Something went wrong",
		"The page could not be loaded. Try again in a moment.")
}

// pathSeg escapes a name that is not ours (an upstream's tool name) as one
// URL path segment, so that no "/", "?" or "#" in it reaches another route.
// A name of dots only is escaped twice: browsers resolve "%2E%2E" as "..",
// and a doubly escaped one names no tool (the API answers not found).
func pathSeg(s string) string {
	if strings.Trim(s, ".") == "" {
		return url.PathEscape(strings.ReplaceAll(s, ".", "%2E"))
	}
	return url.PathEscape(s)
}
