package api

import (
	"net/http"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

type credentialsRequest struct {
	Email      string `json:"email"`
	Password   string `json:"password"`
	Invitation string `json:"invitation,omitempty"`
}

type meResponse struct {
	User       userJSON            `json:"user"`
	Workspaces []mcpgate.Workspace `json:"workspaces"`
}

type userJSON struct {
	ID            string `json:"id"`
	Email         string `json:"email"`
	InstanceAdmin bool   `json:"instance_admin"`
	EmailVerified bool   `json:"email_verified"`
	// TOTPEnabled is always false until two-factor sign-in is built.
	TOTPEnabled bool `json:"totp_enabled"`
}

func (s *Server) handleSignup(w http.ResponseWriter, r *http.Request) {
	var req credentialsRequest
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	u, err := s.svc.Accounts.Signup(r.Context(), req.Email, req.Password, req.Invitation, httpx.ClientAddress(r))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if err := s.sessions.issue(w, r, u); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	s.writeMe(w, r, http.StatusCreated, u)
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	var req credentialsRequest
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	u, err := s.svc.Accounts.Login(r.Context(), req.Email, req.Password, httpx.ClientAddress(r))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	// Drop any session the browser already had: login always makes a new one.
	if old, err := r.Cookie(SessionCookie); err == nil {
		if claims, err := s.sessions.parse(old.Value); err == nil {
			_ = s.opts.Sessions.RevokeSession(r.Context(), claims.ID)
		}
	}
	if err := s.sessions.issue(w, r, u); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	s.writeMe(w, r, http.StatusOK, u)
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		if claims, err := s.sessions.parse(c.Value); err == nil {
			if err := s.opts.Sessions.RevokeSession(r.Context(), claims.ID); err != nil {
				WriteError(w, r, s.log, err)
				return
			}
		}
	}
	s.sessions.clear(w)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleMe(w http.ResponseWriter, r *http.Request) {
	s.writeMe(w, r, http.StatusOK, mcpgate.UserFromContext(r.Context()))
}

func (s *Server) writeMe(w http.ResponseWriter, r *http.Request, status int, u *mcpgate.User) {
	ws, err := s.svc.Workspaces.Workspaces(r.Context(), u)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	verified, err := s.svc.Accounts.EmailVerified(r.Context(), u)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, status, meResponse{User: userJSON{ID: u.ID, Email: u.Email, InstanceAdmin: u.InstanceAdmin, EmailVerified: verified},
		Workspaces: ws})
}
