package api

import (
	"net/http"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

type emailChange struct {
	Email           string `json:"email"`
	CurrentPassword string `json:"current_password"`
}

// handleEmailChange is PUT /me/email: 202, since the address changes only
// when the link sent to it is opened.
func (s *Server) handleEmailChange(w http.ResponseWriter, r *http.Request) {
	var req emailChange
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	u := mcpgate.UserFromContext(r.Context())
	if err := s.svc.Accounts.ChangeEmail(r.Context(), u, req.Email, req.CurrentPassword, httpx.ClientAddress(r)); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{
		"status": "A confirmation link is on its way to the new address; your email changes when you open it."})
}
