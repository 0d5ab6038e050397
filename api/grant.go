package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// handleGrantList lists the OAuth grants ("Connected apps") the caller may
// see; the service decides which.
func (s *Server) handleGrantList(r *http.Request) (reply, error) {
	gs, err := s.svc.Grants.Grants(r.Context(), actorFrom(r))
	return ok(listOf("grants", gs)), err
}

func (s *Server) handleGrantRevoke(r *http.Request) (reply, error) {
	return noContent, s.svc.Grants.RevokeGrant(r.Context(), actorFrom(r), chi.URLParam(r, "id"))
}
