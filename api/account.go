package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

// The account routes: a person's own password, email, sessions and the
// account itself (/me/...), and the mail links' routes (/auth/...), which
// need no session because a link may be opened in another browser.

type passwordChange struct {
	CurrentPassword string `json:"current_password"`
	NewPassword     string `json:"new_password"`
}

// handlePasswordChange is PUT /me/password. The service checks the current
// password and ends every session of the person; this browser then gets a
// fresh one, so it stays signed in.
func (s *Server) handlePasswordChange(r *http.Request, req passwordChange) (reply, error) {
	u := mcpgate.UserFromContext(r.Context())
	err := s.svc.Accounts.ChangePassword(r.Context(), u, req.CurrentPassword, req.NewPassword, httpx.ClientAddress(r))
	return reply{status: http.StatusNoContent, cookie: s.sessions.issuer(r, u)}, err
}

type emailChange struct {
	Email           string `json:"email"`
	CurrentPassword string `json:"current_password"`
}

// handleEmailChange is PUT /me/email: 202, since the address changes only
// when the link sent to it is opened.
func (s *Server) handleEmailChange(r *http.Request, req emailChange) (reply, error) {
	u := mcpgate.UserFromContext(r.Context())
	err := s.svc.Accounts.ChangeEmail(r.Context(), u, req.Email, req.CurrentPassword, httpx.ClientAddress(r))
	return accepted("A confirmation link is on its way to the new address; your email changes when you open it."), err
}

type verifyRequest struct {
	Token string `json:"token"`
}

// handleVerifyEmail is POST /auth/verify-email.
func (s *Server) handleVerifyEmail(r *http.Request, req verifyRequest) (reply, error) {
	u, err := s.svc.Accounts.VerifyEmail(r.Context(), req.Token)
	if err != nil {
		return reply{}, err
	}
	return ok(map[string]any{"email": u.Email, "email_verified": true}), nil
}

// handleVerificationResend is POST /me/email-verification: a new link to the
// signed-in person's address.
func (s *Server) handleVerificationResend(r *http.Request) (reply, error) {
	return accepted("A new link is on its way."), s.svc.Accounts.ResendVerification(r.Context(), mcpgate.UserFromContext(r.Context()))
}

type resetRequest struct {
	Email string `json:"email"`
}

// handlePasswordReset is POST /auth/password-reset. It answers 202 whether
// or not the address has an account; the mail goes out in the background.
func (s *Server) handlePasswordReset(r *http.Request, req resetRequest) (reply, error) {
	err := s.svc.Accounts.RequestPasswordReset(r.Context(), req.Email, httpx.ClientAddress(r))
	return accepted("If an account uses this address, a reset link is on its way. It works once, for 30 minutes."), err
}

type resetConfirm struct {
	Token    string `json:"token"`
	Password string `json:"password"`
	// RevokeKeys also revokes every MCP key and OAuth grant of the person:
	// the reset page offers it, for someone who fears their account was
	// used.
	RevokeKeys bool `json:"revoke_keys,omitempty"`
}

// handlePasswordResetConfirm is POST /auth/password-reset/confirm. Every
// session of the person ends, this browser's too: they sign in again with
// the new password.
func (s *Server) handlePasswordResetConfirm(r *http.Request, req resetConfirm) (reply, error) {
	err := s.svc.Accounts.ResetPassword(r.Context(), req.Token, req.Password, req.RevokeKeys)
	return reply{status: http.StatusNoContent, cookie: s.sessions.clearer}, err
}

type accountDelete struct {
	CurrentPassword string `json:"current_password"`
}

// handleAccountDelete is DELETE /me {"current_password"}. The body is read
// although the method is DELETE: the password must be given.
func (s *Server) handleAccountDelete(r *http.Request, req accountDelete) (reply, error) {
	err := s.svc.Accounts.DeleteAccount(r.Context(), mcpgate.UserFromContext(r.Context()), req.CurrentPassword, httpx.ClientAddress(r))
	return reply{status: http.StatusNoContent, cookie: s.sessions.clearer}, err
}

// handleSessionList is GET /me/sessions: the person's own live sessions.
func (s *Server) handleSessionList(r *http.Request) (reply, error) {
	ctx := r.Context()
	list, err := s.svc.Accounts.Sessions(ctx, mcpgate.UserFromContext(ctx), mcpgate.SessionIDFromContext(ctx))
	return ok(listOf("sessions", list)), err
}

// handleSessionEnd is DELETE /me/sessions/{id}. Ending the current session
// is logging out.
func (s *Server) handleSessionEnd(r *http.Request) (reply, error) {
	ctx := r.Context()
	id := chi.URLParam(r, "id")
	err := s.svc.Accounts.EndSession(ctx, mcpgate.UserFromContext(ctx), id)
	if id == mcpgate.SessionIDFromContext(ctx) {
		return reply{status: http.StatusNoContent, cookie: s.sessions.clearer}, err
	}
	return noContent, err
}

// handleSessionEndOthers is DELETE /me/sessions: every session but this one.
func (s *Server) handleSessionEndOthers(r *http.Request) (reply, error) {
	ctx := r.Context()
	n, err := s.svc.Accounts.EndOtherSessions(ctx, mcpgate.UserFromContext(ctx), mcpgate.SessionIDFromContext(ctx))
	return ok(map[string]int{"ended": n}), err
}
