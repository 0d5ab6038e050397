package api

import (
	"net/http"

	"github.com/mcpgate/mcpgate"
)

type verifyRequest struct {
	Token string `json:"token"`
}

// handleVerifyEmail is POST /auth/verify-email. It needs no session: the
// link may be opened in another browser than the one signed in.
func (s *Server) handleVerifyEmail(w http.ResponseWriter, r *http.Request) {
	var req verifyRequest
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	u, err := s.svc.Accounts.VerifyEmail(r.Context(), req.Token)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"email": u.Email, "email_verified": true})
}

// handleVerificationResend is POST /me/email-verification: a new link to the
// signed-in person's address.
func (s *Server) handleVerificationResend(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Accounts.ResendVerification(r.Context(), mcpgate.UserFromContext(r.Context())); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "A new link is on its way."})
}
