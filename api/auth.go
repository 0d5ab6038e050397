package api

import (
	"context"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/password"
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
}

func (s *Server) handleSignup(w http.ResponseWriter, r *http.Request) {
	var req credentialsRequest
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	u, err := s.Signup(r.Context(), req.Email, req.Password, req.Invitation)
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

// Signup validates and creates an account. In invite mode an open invitation
// for the same email is required; with one in open mode it is accepted too.
func (s *Server) Signup(ctx context.Context, email, pw, invitation string) (*mcpgate.User, error) {
	email, err := mcpgate.NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	if err := mcpgate.ValidatePassword(pw); err != nil {
		return nil, err
	}
	var invHash []byte
	if invitation != "" {
		invHash = mcpgate.HashToken(invitation)
		inv, err := s.store.FindOpenInvitation(ctx, invHash)
		if err != nil {
			return nil, err
		}
		if inv.Email != email {
			return nil, mcpgate.Errorf(mcpgate.EForbidden, "this invitation was sent to another email address")
		}
	} else if s.opts.Signup == SignupInvite {
		return nil, mcpgate.Errorf(mcpgate.EForbidden, "sign-up on this instance needs an invitation; ask a workspace admin for one")
	}
	hash, err := password.Hash(pw, s.pwParams)
	if err != nil {
		return nil, err
	}
	return s.store.CreateUser(ctx, email, hash, invHash)
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	var req credentialsRequest
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	u, err := s.Login(r.Context(), req.Email, req.Password, ClientAddress(r))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	// Drop any session the browser already had: login always makes a new one.
	if old, err := r.Cookie(SessionCookie); err == nil {
		if claims, err := s.sessions.parse(old.Value); err == nil {
			_ = s.store.RevokeSession(r.Context(), claims.ID)
		}
	}
	if err := s.sessions.issue(w, r, u); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	s.writeMe(w, r, http.StatusOK, u)
}

var errBadLogin = mcpgate.Errorf(mcpgate.EUnauthorized, "wrong email or password")

// dummyHash is verified when the email is unknown, so that a wrong email
// costs the same time as a wrong password and does not reveal accounts.
// It is computed on first use so that programs importing api do not pay for
// an argon2 hash at start-up.
var dummyHash = sync.OnceValue(func() string {
	h, _ := password.Hash("dummy password for timing", password.Default)
	return h
})

// Login checks credentials under the login throttle.
func (s *Server) Login(ctx context.Context, email, pw, addr string) (*mcpgate.User, error) {
	email, err := mcpgate.NormalizeEmail(email)
	if err != nil {
		return nil, errBadLogin
	}
	subjects := []string{"email:" + email, "addr:" + addr}
	if err := s.throttle.check(ctx, subjects); err != nil {
		return nil, err
	}
	u, hash, err := s.store.FindUserByEmail(ctx, email)
	if err != nil && mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		return nil, err
	}
	if u == nil {
		hash = dummyHash()
	}
	if password.Verify(pw, hash) != nil || u == nil {
		if err := s.store.RecordLoginFailure(ctx, s.throttle.period, subjects...); err != nil {
			return nil, err
		}
		return nil, errBadLogin
	}
	_ = s.store.ClearLoginFailures(ctx, subjects[0])
	return u, nil
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		if claims, err := s.sessions.parse(c.Value); err == nil {
			if err := s.store.RevokeSession(r.Context(), claims.ID); err != nil {
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
	ws, err := s.store.WorkspacesOfUser(r.Context(), u.ID)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, status, meResponse{User: userJSON{ID: u.ID, Email: u.Email, InstanceAdmin: u.InstanceAdmin}, Workspaces: ws})
}

// ClientAddress is the address login throttling counts against: the TCP
// peer. Behind a proxy every client shares the proxy's address, so the
// per-address limit is set high and the per-email limit does the fine work.
func ClientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// loginThrottle refuses logins for a subject (an email or an address) after
// too many failures in a window. The counts live in Postgres so that every
// replica enforces the same limit.
type loginThrottle struct {
	store      Store
	period     time.Duration
	perEmail   int
	perAddress int
}

func (t loginThrottle) check(ctx context.Context, subjects []string) error {
	for i, sub := range subjects {
		limit := t.perEmail
		if i > 0 {
			limit = t.perAddress
		}
		n, start, err := t.store.LoginFailures(ctx, sub, t.period)
		if err != nil {
			return err
		}
		if n >= limit {
			wait := int(math.Ceil(time.Until(start.Add(t.period)).Seconds()))
			return &mcpgate.Error{Code: mcpgate.ETooMany, RetryAfter: max(wait, 1),
				Message: "too many failed logins; wait a few minutes and try again"}
		}
	}
	return nil
}
