package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

// handleGrantList lists the OAuth grants ("Connected apps") the caller may
// see; the service decides which.
func (s *Server) handleGrantList(w http.ResponseWriter, r *http.Request) {
	gs, err := s.svc.Grants.Grants(r.Context(), actorFrom(r))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if gs == nil {
		gs = []mcpgate.Grant{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": gs})
}

func (s *Server) handleGrantRevoke(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Grants.RevokeGrant(r.Context(), actorFrom(r), chi.URLParam(r, "id")); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
