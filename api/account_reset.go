package api

import (
	"net/http"

	"github.com/mcpgate/mcpgate/internal/httpx"
)

type resetRequest struct {
	Email string `json:"email"`
}

type resetConfirm struct {
	Token    string `json:"token"`
	Password string `json:"password"`
	// RevokeKeys also revokes every MCP key of the person: the reset page
	// offers it, for someone who fears their account was used.
	RevokeKeys bool `json:"revoke_keys,omitempty"`
}

// handlePasswordReset is POST /auth/password-reset. It answers 202 whether
// or not the address has an account; the mail goes out in the background.
func (s *Server) handlePasswordReset(w http.ResponseWriter, r *http.Request) {
	var req resetRequest
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if err := s.svc.Accounts.RequestPasswordReset(r.Context(), req.Email, httpx.ClientAddress(r)); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{
		"status": "If an account uses this address, a reset link is on its way. It works once, for 30 minutes."})
}

// handlePasswordResetConfirm is POST /auth/password-reset/confirm. Every
// session of the person ends, this browser's too: they sign in again with
// the new password.
func (s *Server) handlePasswordResetConfirm(w http.ResponseWriter, r *http.Request) {
	var req resetConfirm
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if err := s.svc.Accounts.ResetPassword(r.Context(), req.Token, req.Password, req.RevokeKeys); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	s.sessions.clear(w)
	w.WriteHeader(http.StatusNoContent)
}
