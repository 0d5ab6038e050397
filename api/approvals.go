package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

// The approval and guardrail routes. The services decide who may see and
// decide what; a session is the only way in (requireUser), so an MCP key or
// OAuth token can never approve its own call here.

func (s *Server) handleApprovalList(w http.ResponseWriter, r *http.Request) {
	list, err := s.svc.Approvals.Approvals(r.Context(), actorFrom(r), mcpgate.ApprovalState(r.URL.Query().Get("state")))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if list == nil {
		list = []mcpgate.ApprovalRequest{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": list})
}

func (s *Server) handleApprovalGet(w http.ResponseWriter, r *http.Request) {
	ap, err := s.svc.Approvals.Approval(r.Context(), actorFrom(r), chi.URLParam(r, "id"))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, ap)
}

func (s *Server) handleApprovalDecide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		decide := s.svc.Approvals.Deny
		if approve {
			decide = s.svc.Approvals.Approve
		}
		ap, err := decide(r.Context(), actorFrom(r), chi.URLParam(r, "id"))
		if err != nil {
			WriteError(w, r, s.log, err)
			return
		}
		writeJSON(w, http.StatusOK, ap)
	}
}

func (s *Server) handleGuardrailsGet(w http.ResponseWriter, r *http.Request) {
	g, err := s.svc.Guardrails.Guardrails(r.Context(), actorFrom(r))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

func (s *Server) handleGuardrailsPut(w http.ResponseWriter, r *http.Request) {
	var req mcpgate.Guardrails
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	g, err := s.svc.Guardrails.SetGuardrails(r.Context(), actorFrom(r), req)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}
