package api

import (
	"net/http"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

type passwordChange struct {
	CurrentPassword string `json:"current_password"`
	NewPassword     string `json:"new_password"`
}

// handlePasswordChange is PUT /me/password. The service checks the current
// password and ends every session of the person; this browser then gets a
// fresh one, so it stays signed in.
func (s *Server) handlePasswordChange(w http.ResponseWriter, r *http.Request) {
	var req passwordChange
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	u := mcpgate.UserFromContext(r.Context())
	if err := s.svc.Accounts.ChangePassword(r.Context(), u, req.CurrentPassword, req.NewPassword, httpx.ClientAddress(r)); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if err := s.sessions.issue(w, r, u); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
