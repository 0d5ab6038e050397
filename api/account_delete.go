package api

import (
	"net/http"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

type accountDelete struct {
	CurrentPassword string `json:"current_password"`
}

// handleAccountDelete is DELETE /me {"current_password"}. The body is read
// although the method is DELETE: the password must be given.
func (s *Server) handleAccountDelete(w http.ResponseWriter, r *http.Request) {
	var req accountDelete
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	u := mcpgate.UserFromContext(r.Context())
	if err := s.svc.Accounts.DeleteAccount(r.Context(), u, req.CurrentPassword, httpx.ClientAddress(r)); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	s.sessions.clear(w)
	w.WriteHeader(http.StatusNoContent)
}
