package api

import (
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

// The upstream server routes, under /workspaces/{ws}/servers. Credential
// headers come in as Secrets and go out as hints only; every rule (who may
// change a server, what is refused) is the service's.

func (s *Server) serverRoutes(r chi.Router) {
	r.Get("/servers", s.route(s.handleServerList))
	r.Post("/servers", routeBody(s, s.handleServerAdd))
	r.Get("/servers/{name}", s.route(s.handleServerGet))
	r.Patch("/servers/{name}", routeBody(s, s.handleServerUpdate))
	r.Delete("/servers/{name}", s.route(s.handleServerRemove))
	r.Post("/servers/{name}/discover", s.route(s.handleServerDiscover))
	r.Put("/servers/{name}/tools/{tool}", routeBody(s, s.handleServerToolUpdate))
	r.Post("/servers/{name}/tools/{tool}/approve", routeBody(s, s.handleServerToolApprove))
}

func (s *Server) handleServerList(r *http.Request) (reply, error) {
	list, err := s.opts.Servers.Servers(r.Context(), actorFrom(r))
	return ok(listOf("servers", list)), err
}

func (s *Server) handleServerAdd(r *http.Request, in mcpgate.ServerInput) (reply, error) {
	srv, err := s.opts.Servers.AddServer(r.Context(), actorFrom(r), in)
	return created(srv), err
}

func (s *Server) handleServerGet(r *http.Request) (reply, error) {
	srv, err := s.opts.Servers.Server(r.Context(), actorFrom(r), chi.URLParam(r, "name"))
	return ok(srv), err
}

func (s *Server) handleServerUpdate(r *http.Request, upd mcpgate.ServerUpdate) (reply, error) {
	srv, err := s.opts.Servers.UpdateServer(r.Context(), actorFrom(r), chi.URLParam(r, "name"), upd)
	return ok(srv), err
}

func (s *Server) handleServerRemove(r *http.Request) (reply, error) {
	return noContent, s.opts.Servers.RemoveServer(r.Context(), actorFrom(r), chi.URLParam(r, "name"))
}

func (s *Server) handleServerDiscover(r *http.Request) (reply, error) {
	srv, err := s.opts.Servers.DiscoverServer(r.Context(), actorFrom(r), chi.URLParam(r, "name"))
	return ok(srv), err
}

type serverToolUpdate struct {
	Enabled  *bool   `json:"enabled"`
	Approval *string `json:"approval"`
}

func (s *Server) handleServerToolUpdate(r *http.Request, req serverToolUpdate) (reply, error) {
	u := mcpgate.ToolUpdate{Enabled: req.Enabled}
	if req.Approval != nil {
		a, err := mcpgate.ParseApproval(*req.Approval)
		if err != nil {
			return reply{}, err
		}
		u.Approval = &a
	}
	srv, err := s.opts.Servers.SetServerTool(r.Context(), actorFrom(r), chi.URLParam(r, "name"), toolParam(r), u)
	return ok(srv), err
}

// serverToolApprove names the change approved: the pin of the pending
// definition the admin reviewed.
type serverToolApprove struct {
	ExpectedPin string `json:"expected_pin"`
}

func (s *Server) handleServerToolApprove(r *http.Request, req serverToolApprove) (reply, error) {
	srv, err := s.opts.Servers.ApproveServerTool(r.Context(), actorFrom(r), chi.URLParam(r, "name"), toolParam(r), req.ExpectedPin)
	return ok(srv), err
}

// toolParam is the {tool} segment unescaped: an upstream's tool name is
// sent path-escaped, and chi matches on the escaped path when the request
// has one (RawPath), leaving its parameters escaped.
func toolParam(r *http.Request) string {
	v := chi.URLParam(r, "tool")
	if r.URL.RawPath == "" {
		return v
	}
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}
