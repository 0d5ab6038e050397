package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

// handleSessionList is GET /me/sessions: the person's own live sessions.
func (s *Server) handleSessionList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	list, err := s.svc.Accounts.Sessions(ctx, mcpgate.UserFromContext(ctx), mcpgate.SessionIDFromContext(ctx))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if list == nil {
		list = []mcpgate.Session{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": list})
}

// handleSessionEnd is DELETE /me/sessions/{id}. Ending the current session
// is logging out.
func (s *Server) handleSessionEnd(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := chi.URLParam(r, "id")
	if err := s.svc.Accounts.EndSession(ctx, mcpgate.UserFromContext(ctx), id); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if id == mcpgate.SessionIDFromContext(ctx) {
		s.sessions.clear(w)
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleSessionEndOthers is DELETE /me/sessions: every session but this one.
func (s *Server) handleSessionEndOthers(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	n, err := s.svc.Accounts.EndOtherSessions(ctx, mcpgate.UserFromContext(ctx), mcpgate.SessionIDFromContext(ctx))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"ended": n})
}
