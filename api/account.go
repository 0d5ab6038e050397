package api

import (
	"context"
	"net/http"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/password"
)

// PasswordStore is what changing a password needs beyond Store; *store.DB
// has it. SetPassword replaces the hash and revokes every session of the
// user.
type PasswordStore interface {
	SetPassword(ctx context.Context, userID, passwordHash string) error
}

type passwordChange struct {
	CurrentPassword string `json:"current_password"`
	NewPassword     string `json:"new_password"`
}

// A wrong current password is a 400, not a 401 or 403: the session is fine,
// and the dashboard sends a 401 back to the login page.
var errWrongCurrentPassword = mcpgate.Errorf(mcpgate.EInvalid, "the current password is not correct")

// handlePasswordChange is PUT /me/password: the person proves they know the
// current password (wrong guesses count against the same throttle as
// logins), the new one replaces it, every session of theirs ends, and this
// browser gets a fresh one. The audit event names no password.
func (s *Server) handlePasswordChange(w http.ResponseWriter, r *http.Request) {
	ps, ok := s.store.(PasswordStore)
	if !ok {
		WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.EInternal, "this store cannot change passwords"))
		return
	}
	var req passwordChange
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	ctx := r.Context()
	u := mcpgate.UserFromContext(ctx)
	subjects := []string{"email:" + u.Email, "addr:" + ClientAddress(r)}
	if err := s.throttle.check(ctx, subjects); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	_, hash, err := s.store.FindUserByEmail(ctx, u.Email)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if req.CurrentPassword == "" || password.Verify(req.CurrentPassword, hash) != nil {
		if err := s.store.RecordLoginFailure(ctx, s.throttle.period, subjects...); err != nil {
			WriteError(w, r, s.log, err)
			return
		}
		WriteError(w, r, s.log, errWrongCurrentPassword)
		return
	}
	_ = s.store.ClearLoginFailures(ctx, subjects[0])
	if err := mcpgate.ValidatePassword(req.NewPassword); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if req.NewPassword == req.CurrentPassword {
		WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.EInvalid, "the new password is the same as the current one"))
		return
	}
	newHash, err := password.Hash(req.NewPassword, s.pwParams)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if err := ps.SetPassword(ctx, u.ID, newHash); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	// SetPassword ended every session, this one included: keep this
	// browser signed in with a new one.
	if err := s.sessions.issue(w, r, u); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	s.recordAccount(ctx, u, "account.password_changed")
	w.WriteHeader(http.StatusNoContent)
}

// recordAccount writes an account event (not tied to one workspace) to the
// audit log of the person's personal workspace, where they read it.
func (s *Server) recordAccount(ctx context.Context, u *mcpgate.User, action string) {
	wss, err := s.store.WorkspacesOfUser(ctx, u.ID)
	if err != nil || len(wss) == 0 {
		s.log.WarnContext(ctx, "account event not audited: no workspace", "action", action, "err", err)
		return
	}
	ws := wss[0]
	for _, w := range wss {
		if w.Personal {
			ws = w
			break
		}
	}
	s.audit.Record(ctx, mcpgate.AuditEvent{WorkspaceID: ws.ID, ActorID: u.ID, Kind: "admin",
		Action: action, Outcome: mcpgate.OutcomeOK, Source: "api"})
}
