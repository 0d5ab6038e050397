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

// loginRequest is a sign-in: the password, and for a person who signs in
// with two factors a code from their app or a recovery code.
type loginRequest struct {
	Email        string `json:"email"`
	Password     string `json:"password"`
	TOTPCode     string `json:"totp_code,omitempty"`
	RecoveryCode string `json:"recovery_code,omitempty"`
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
	// TOTPEnabled says the person signs in with a second factor.
	TOTPEnabled bool `json:"totp_enabled"`
}

func (s *Server) handleSignup(r *http.Request, req credentialsRequest) (reply, error) {
	u, err := s.svc.Accounts.Signup(r.Context(), req.Email, req.Password, req.Invitation, httpx.ClientAddress(r))
	if err != nil {
		return reply{}, err
	}
	if u == nil {
		// SIGNUP_VERIFY=required: the account is made when the link is
		// opened. The answer is the same for an address with an account.
		return accepted(signupMailed), nil
	}
	return s.signedIn(r, http.StatusCreated, u)
}

// signupMailed is the answer to every sign-up where addresses are confirmed
// first, whether or not the address has an account.
const signupMailed = "Check your inbox: we emailed you a link to finish creating your account. It works once, for 24 hours."

func (s *Server) handleLogin(r *http.Request, req loginRequest) (reply, error) {
	u, err := s.svc.Accounts.Login(r.Context(), mcpgate.Credentials{Email: req.Email, Password: req.Password,
		TOTPCode: req.TOTPCode, RecoveryCode: req.RecoveryCode}, httpx.ClientAddress(r))
	if err != nil {
		return reply{}, err
	}
	// Drop any session the browser already had: login always makes a new one.
	if old, err := r.Cookie(s.sessions.cookieName(SessionCookie)); err == nil {
		if claims, err := s.sessions.parse(old.Value); err == nil {
			_ = s.opts.Sessions.RevokeSession(r.Context(), claims.ID)
		}
	}
	return s.signedIn(r, http.StatusOK, u)
}

// signedIn answers a sign-up or login: a new session and the person's /me.
func (s *Server) signedIn(r *http.Request, status int, u *mcpgate.User) (reply, error) {
	me, err := s.me(r, u)
	return reply{status: status, body: me, cookie: s.sessions.issuer(r, u)}, err
}

func (s *Server) handleLogout(r *http.Request) (reply, error) {
	if c, err := r.Cookie(s.sessions.cookieName(SessionCookie)); err == nil {
		if claims, err := s.sessions.parse(c.Value); err == nil {
			if err := s.opts.Sessions.RevokeSession(r.Context(), claims.ID); err != nil {
				return reply{}, err
			}
		}
	}
	return reply{status: http.StatusNoContent, cookie: s.sessions.clearer}, nil
}

func (s *Server) handleMe(r *http.Request) (reply, error) {
	me, err := s.me(r, mcpgate.UserFromContext(r.Context()))
	return ok(me), err
}

func (s *Server) me(r *http.Request, u *mcpgate.User) (meResponse, error) {
	ws, err := s.svc.Workspaces.Workspaces(r.Context(), u)
	if err != nil {
		return meResponse{}, err
	}
	verified, err := s.svc.Accounts.EmailVerified(r.Context(), u)
	if err != nil {
		return meResponse{}, err
	}
	totp, err := s.svc.TwoFactor.TOTPEnabled(r.Context(), u)
	if err != nil {
		return meResponse{}, err
	}
	if ws == nil {
		ws = []mcpgate.Workspace{}
	}
	return meResponse{User: userJSON{ID: u.ID, Email: u.Email, InstanceAdmin: u.InstanceAdmin, EmailVerified: verified,
		TOTPEnabled: totp}, Workspaces: ws}, nil
}
