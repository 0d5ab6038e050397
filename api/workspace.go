package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

// actorFrom returns the actor of a /workspaces/{ws} route.
func actorFrom(r *http.Request) *mcpgate.Actor { return mcpgate.ActorFromContext(r.Context()) }

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
		next.ServeHTTP(w, r.WithContext(mcpgate.NewContextWithWorkspace(r.Context(), ws, a)))
	})
}

func (s *Server) handleWorkspaceList(r *http.Request) (reply, error) {
	ws, err := s.svc.Workspaces.Workspaces(r.Context(), mcpgate.UserFromContext(r.Context()))
	return ok(listOf("workspaces", ws)), err
}

type workspaceCreate struct {
	Name string `json:"name"`
}

func (s *Server) handleWorkspaceCreate(r *http.Request, req workspaceCreate) (reply, error) {
	ws, err := s.svc.Workspaces.CreateWorkspace(r.Context(), mcpgate.UserFromContext(r.Context()), req.Name)
	return created(ws), err
}

func (s *Server) handleWorkspaceGet(r *http.Request) (reply, error) {
	return ok(mcpgate.WorkspaceFromContext(r.Context())), nil
}

type workspaceUpdate struct {
	RequireTwoFactor    *bool `json:"require_two_factor"`
	ApprovalFourEyes    *bool `json:"approval_four_eyes"`
	ApprovalWaitSeconds *int  `json:"approval_wait_seconds"`
}

// handleWorkspaceUpdate is PATCH /workspaces/{ws}: the workspace's settings
// (owners only; the service decides).
func (s *Server) handleWorkspaceUpdate(r *http.Request, req workspaceUpdate) (reply, error) {
	ws, err := s.svc.Workspaces.UpdateWorkspace(r.Context(), actorFrom(r), mcpgate.WorkspaceUpdate{RequireTwoFactor: req.RequireTwoFactor,
		ApprovalFourEyes: req.ApprovalFourEyes, ApprovalWaitSeconds: req.ApprovalWaitSeconds})
	return ok(ws), err
}

func (s *Server) handleMemberList(r *http.Request) (reply, error) {
	ms, err := s.svc.Workspaces.Members(r.Context(), actorFrom(r))
	return ok(listOf("members", ms)), err
}

type memberUpdate struct {
	Role mcpgate.Role `json:"role"`
}

func (s *Server) handleMemberUpdate(r *http.Request, req memberUpdate) (reply, error) {
	m, err := s.svc.Workspaces.SetMemberRole(r.Context(), actorFrom(r), chi.URLParam(r, "user"), req.Role)
	return ok(m), err
}

func (s *Server) handleMemberRemove(r *http.Request) (reply, error) {
	return noContent, s.svc.Workspaces.RemoveMember(r.Context(), actorFrom(r), chi.URLParam(r, "user"))
}

type invitationCreate struct {
	Email string       `json:"email"`
	Role  mcpgate.Role `json:"role"`
}

type invitationResponse struct {
	mcpgate.Invitation
	Token     string `json:"token"`
	AcceptURL string `json:"accept_url"`
}

func (s *Server) handleInvitationCreate(r *http.Request, req invitationCreate) (reply, error) {
	inv, token, err := s.svc.Workspaces.Invite(r.Context(), actorFrom(r), req.Email, req.Role)
	if err != nil {
		return reply{}, err
	}
	return created(invitationResponse{Invitation: *inv, Token: token, AcceptURL: s.opts.PublicURL + "/invite/" + token}), nil
}

func (s *Server) handleInvitationList(r *http.Request) (reply, error) {
	invs, err := s.svc.Workspaces.Invitations(r.Context(), actorFrom(r))
	return ok(listOf("invitations", invs)), err
}

func (s *Server) handleInvitationDelete(r *http.Request) (reply, error) {
	return noContent, s.svc.Workspaces.DeleteInvitation(r.Context(), actorFrom(r), chi.URLParam(r, "id"))
}

func (s *Server) handleInvitationAccept(r *http.Request) (reply, error) {
	ws, err := s.svc.Workspaces.AcceptInvitation(r.Context(), mcpgate.UserFromContext(r.Context()), chi.URLParam(r, "token"))
	return ok(ws), err
}
