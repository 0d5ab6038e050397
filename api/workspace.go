package api

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

type wsCtxKey struct{}

type wsEntry struct {
	ws    *mcpgate.Workspace
	actor *mcpgate.Actor
}

// WorkspaceFromContext returns the workspace of a /workspaces/{ws} route as
// the requesting user sees it (with their role).
func WorkspaceFromContext(ctx context.Context) *mcpgate.Workspace {
	e, _ := ctx.Value(wsCtxKey{}).(wsEntry)
	return e.ws
}

// actorFrom returns the actor of a /workspaces/{ws} route.
func actorFrom(r *http.Request) *mcpgate.Actor {
	e, _ := r.Context().Value(wsCtxKey{}).(wsEntry)
	return e.actor
}

// requireMember enters the {ws} workspace as the session's user. A
// workspace they do not belong to answers 404, as if it did not exist.
func (s *Server) requireMember(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := mcpgate.UserFromContext(r.Context())
		a, ws, err := s.svc.Workspaces.Enter(r.Context(), u, chi.URLParam(r, "ws"), mcpgate.SourceDashboard)
		if err != nil {
			WriteError(w, r, s.log, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), wsCtxKey{}, wsEntry{ws: ws, actor: a})))
	})
}

func (s *Server) handleWorkspaceList(w http.ResponseWriter, r *http.Request) {
	ws, err := s.svc.Workspaces.Workspaces(r.Context(), mcpgate.UserFromContext(r.Context()))
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
	ws, err := s.svc.Workspaces.CreateWorkspace(r.Context(), mcpgate.UserFromContext(r.Context()), req.Name)
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
	ms, err := s.svc.Workspaces.Members(r.Context(), actorFrom(r))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"members": ms})
}

func (s *Server) handleMemberUpdate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Role mcpgate.Role `json:"role"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	m, err := s.svc.Workspaces.SetMemberRole(r.Context(), actorFrom(r), chi.URLParam(r, "user"), req.Role)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) handleMemberRemove(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Workspaces.RemoveMember(r.Context(), actorFrom(r), chi.URLParam(r, "user")); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type invitationResponse struct {
	mcpgate.Invitation
	Token     string `json:"token"`
	AcceptURL string `json:"accept_url"`
}

func (s *Server) handleInvitationCreate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Email string       `json:"email"`
		Role  mcpgate.Role `json:"role"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	inv, token, err := s.svc.Workspaces.Invite(r.Context(), actorFrom(r), req.Email, req.Role)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, invitationResponse{Invitation: *inv, Token: token,
		AcceptURL: s.opts.PublicURL + "/invite/" + token})
}

func (s *Server) handleInvitationList(w http.ResponseWriter, r *http.Request) {
	invs, err := s.svc.Workspaces.Invitations(r.Context(), actorFrom(r))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"invitations": invs})
}

func (s *Server) handleInvitationDelete(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Workspaces.DeleteInvitation(r.Context(), actorFrom(r), chi.URLParam(r, "id")); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleInvitationAccept(w http.ResponseWriter, r *http.Request) {
	ws, err := s.svc.Workspaces.AcceptInvitation(r.Context(), mcpgate.UserFromContext(r.Context()), chi.URLParam(r, "token"))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, ws)
}
