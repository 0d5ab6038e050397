package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

type wsCtxKey struct{}

// WorkspaceFromContext returns the workspace of a /workspaces/{ws} route as
// the requesting user sees it (with their role). Routes mounted through
// Options.Workspace read it here.
func WorkspaceFromContext(ctx context.Context) *mcpgate.Workspace {
	w, _ := ctx.Value(wsCtxKey{}).(*mcpgate.Workspace)
	return w
}

// requireMember loads the {ws} workspace for the session's user. A workspace
// they do not belong to answers 404, as if it did not exist.
func (s *Server) requireMember(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := mcpgate.UserFromContext(r.Context())
		ws, err := s.store.FindMembership(r.Context(), chi.URLParam(r, "ws"), u.ID)
		if err != nil {
			WriteError(w, r, s.log, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), wsCtxKey{}, ws)))
	})
}

var errAdminOnly = mcpgate.Errorf(mcpgate.EForbidden, "only a workspace owner or admin can do this")

// RequireAdmin refuses members who are not owner or admin of the workspace.
func (s *Server) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !WorkspaceFromContext(r.Context()).Role.CanAdmin() {
			WriteError(w, r, s.log, errAdminOnly)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// RequireAdmin is requireAdmin for routes mounted through Options.Workspace.
func (s *Server) RequireAdmin(next http.Handler) http.Handler { return s.requireAdmin(next) }

func (s *Server) handleWorkspaceList(w http.ResponseWriter, r *http.Request) {
	ws, err := s.store.WorkspacesOfUser(r.Context(), mcpgate.UserFromContext(r.Context()).ID)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"workspaces": ws})
}

func (s *Server) handleWorkspaceCreate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	name, err := mcpgate.ValidateName("the workspace name", req.Name)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	ws, err := s.store.CreateWorkspace(r.Context(), mcpgate.UserFromContext(r.Context()).ID, name)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, ws)
}

func (s *Server) handleWorkspaceGet(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, WorkspaceFromContext(r.Context()))
}

func (s *Server) handleMemberList(w http.ResponseWriter, r *http.Request) {
	ms, err := s.store.ListMembers(r.Context(), WorkspaceFromContext(r.Context()).ID)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"members": ms})
}

func (s *Server) handleMemberUpdate(w http.ResponseWriter, r *http.Request) {
	ws := WorkspaceFromContext(r.Context())
	var req struct {
		Role mcpgate.Role `json:"role"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if !req.Role.Valid() {
		WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.EInvalid, "role must be owner, admin or member"))
		return
	}
	// Only an owner may make or unmake owners.
	target, err := s.store.FindMember(r.Context(), ws.ID, chi.URLParam(r, "user"))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if (req.Role == mcpgate.RoleOwner || target.Role == mcpgate.RoleOwner) && ws.Role != mcpgate.RoleOwner {
		WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.EForbidden, "only an owner can grant or change the owner role"))
		return
	}
	m, err := s.store.UpdateMemberRole(r.Context(), ws.ID, target.UserID, req.Role)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	s.recordAdmin(r, "member.role_changed", map[string]any{"user_id": m.UserID, "role": m.Role})
	writeJSON(w, http.StatusOK, m)
}

// handleMemberRemove removes a member. Admins may remove others (an owner
// only by an owner); anyone may leave.
func (s *Server) handleMemberRemove(w http.ResponseWriter, r *http.Request) {
	ws := WorkspaceFromContext(r.Context())
	me := mcpgate.UserFromContext(r.Context())
	userID := chi.URLParam(r, "user")
	if userID != me.ID {
		if !ws.Role.CanAdmin() {
			WriteError(w, r, s.log, errAdminOnly)
			return
		}
		target, err := s.store.FindMember(r.Context(), ws.ID, userID)
		if err != nil {
			WriteError(w, r, s.log, err)
			return
		}
		if target.Role == mcpgate.RoleOwner && ws.Role != mcpgate.RoleOwner {
			WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.EForbidden, "only an owner can remove an owner"))
			return
		}
	}
	if err := s.store.RemoveMember(r.Context(), ws.ID, userID); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	s.recordAdmin(r, "member.removed", map[string]any{"user_id": userID})
	w.WriteHeader(http.StatusNoContent)
}

// invitationTTL is how long an invitation can be accepted.
const invitationTTL = 7 * 24 * time.Hour

type invitationResponse struct {
	mcpgate.Invitation
	Token     string `json:"token"`
	AcceptURL string `json:"accept_url"`
}

func (s *Server) handleInvitationCreate(w http.ResponseWriter, r *http.Request) {
	ws := WorkspaceFromContext(r.Context())
	var req struct {
		Email string       `json:"email"`
		Role  mcpgate.Role `json:"role"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	email, err := mcpgate.NormalizeEmail(req.Email)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if req.Role == "" {
		req.Role = mcpgate.RoleMember
	}
	if req.Role != mcpgate.RoleMember && req.Role != mcpgate.RoleAdmin {
		WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.EInvalid, "role must be admin or member"))
		return
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	token := "inv_" + base64.RawURLEncoding.EncodeToString(b)
	inv := &mcpgate.Invitation{WorkspaceID: ws.ID, Email: email, Role: req.Role,
		CreatedBy: mcpgate.UserFromContext(r.Context()).ID, ExpiresAt: time.Now().Add(invitationTTL).UTC().Truncate(time.Second)}
	if err := s.store.CreateInvitation(r.Context(), inv, mcpgate.HashToken(token)); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	s.recordAdmin(r, "invitation.created", map[string]any{"email": email, "role": req.Role})
	writeJSON(w, http.StatusCreated, invitationResponse{Invitation: *inv, Token: token,
		AcceptURL: s.opts.PublicURL + "/invite/" + token})
}

func (s *Server) handleInvitationList(w http.ResponseWriter, r *http.Request) {
	invs, err := s.store.ListInvitations(r.Context(), WorkspaceFromContext(r.Context()).ID)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"invitations": invs})
}

func (s *Server) handleInvitationDelete(w http.ResponseWriter, r *http.Request) {
	if err := s.store.DeleteInvitation(r.Context(), WorkspaceFromContext(r.Context()).ID, chi.URLParam(r, "id")); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	s.recordAdmin(r, "invitation.withdrawn", map[string]any{"invitation_id": chi.URLParam(r, "id")})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleInvitationAccept(w http.ResponseWriter, r *http.Request) {
	u := mcpgate.UserFromContext(r.Context())
	ws, err := s.store.AcceptInvitation(r.Context(), mcpgate.HashToken(chi.URLParam(r, "token")), u.ID, u.Email)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	s.audit.Record(r.Context(), mcpgate.AuditEvent{WorkspaceID: ws.ID, ActorID: u.ID, Kind: "admin",
		Action: "invitation.accepted", Outcome: mcpgate.OutcomeOK, Source: "dashboard"})
	writeJSON(w, http.StatusOK, ws)
}

// recordAdmin writes an admin action of the request's workspace to the audit
// log. Its source is "dashboard": the JSON API authenticates only dashboard
// sessions, so every call to it is the dashboard acting for its user.
func (s *Server) recordAdmin(r *http.Request, action string, args map[string]any) {
	s.audit.Record(r.Context(), mcpgate.AuditEvent{
		WorkspaceID: WorkspaceFromContext(r.Context()).ID, ActorID: mcpgate.UserFromContext(r.Context()).ID,
		Kind: "admin", Action: action, Arguments: args, Outcome: mcpgate.OutcomeOK, Source: "dashboard"})
}
