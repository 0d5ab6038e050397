package api

import (
	"html/template"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

// OAuth to upstream servers: the gateway's client ID metadata document and
// the callback its authorization requests come back to (top-level routes,
// design.md §4), and the workspace routes that start a connection and end
// one. The rules (who connects which grant, the state's binding to the
// session) are the service's.

// serverOAuthRoutes are the top-level routes.
func (s *Server) serverOAuthRoutes(r chi.Router) {
	r.With(securityHeaders).Get(mcpgate.UpstreamClientDocumentPath, s.handleUpstreamClientDocument)
	r.With(securityHeaders, s.OptionalUser).Get(mcpgate.UpstreamCallbackPath, s.handleUpstreamCallback)
}

// serverOAuthWorkspaceRoutes are under /workspaces/{ws}.
func (s *Server) serverOAuthWorkspaceRoutes(r chi.Router) {
	r.Post("/servers/{name}/connect", s.route(s.handleServerConnect))
	r.Delete("/servers/{name}/connection", s.route(s.handleServerDisconnect))
}

func (s *Server) handleUpstreamClientDocument(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=3600")
	writeJSON(w, http.StatusOK, s.opts.ServerOAuth.ClientMetadataDocument())
}

// handleServerConnect starts the authorization code flow: the page sends
// the browser to the answer's authorize_url.
func (s *Server) handleServerConnect(r *http.Request) (reply, error) {
	c, err := s.opts.ServerOAuth.Connect(r.Context(), actorFrom(r), chi.URLParam(r, "name"), mcpgate.SessionIDFromContext(r.Context()))
	return ok(c), err
}

func (s *Server) handleServerDisconnect(r *http.Request) (reply, error) {
	return noContent, s.opts.ServerOAuth.Disconnect(r.Context(), actorFrom(r), chi.URLParam(r, "name"))
}

var callbackPage = template.Must(template.New("callback").Parse(`<!doctype html><meta charset="utf-8">
<title>Connection failed · mcpgate</title><h1>The server was not connected</h1><p>{{.}}</p>`))

// handleUpstreamCallback finishes a connection in the person's browser and
// sends it back to the server's page, which shows the outcome.
func (s *Server) handleUpstreamCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ctx := r.Context()
	done, err := s.opts.ServerOAuth.FinishConnect(ctx, mcpgate.UserFromContext(ctx), mcpgate.SessionIDFromContext(ctx),
		q.Get("state"), q.Get("code"), q.Get("iss"), q.Get("error"))
	w.Header().Set("Cache-Control", "no-store")
	if done == nil {
		if mcpgate.ErrorCode(err) == mcpgate.EInternal || mcpgate.ErrorCode(err) == "" {
			s.log.ErrorContext(ctx, "finish an upstream connection", "err", err)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(errorStatus(err))
		_ = callbackPage.Execute(w, mcpgate.ErrorMessage(err))
		return
	}
	page := "/app/w/" + url.PathEscape(done.WorkspaceID) + "/servers/" + url.PathEscape(done.Server)
	if err != nil {
		page += "?connect_error=" + url.QueryEscape(mcpgate.ErrorMessage(err))
	} else {
		page += "?connected=1"
	}
	http.Redirect(w, r, page, http.StatusSeeOther)
}

// errorStatus is the HTTP status of a coded error on a page.
func errorStatus(err error) int {
	switch mcpgate.ErrorCode(err) {
	case mcpgate.EInvalid, mcpgate.EConflict:
		return http.StatusBadRequest
	case mcpgate.EUnauthorized:
		return http.StatusUnauthorized
	case mcpgate.EForbidden:
		return http.StatusForbidden
	case mcpgate.ENotFound:
		return http.StatusNotFound
	case mcpgate.EUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
