package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

// The approval and guardrail routes. The services decide who may see and
// decide what; a session is the only way in (requireUser), so an MCP key or
// OAuth token can never approve its own call here.

func (s *Server) handleApprovalList(r *http.Request) (reply, error) {
	list, err := s.svc.Approvals.Approvals(r.Context(), actorFrom(r), mcpgate.ApprovalState(r.URL.Query().Get("state")))
	return ok(listOf("approvals", list)), err
}

func (s *Server) handleApprovalGet(r *http.Request) (reply, error) {
	ap, err := s.svc.Approvals.Approval(r.Context(), actorFrom(r), chi.URLParam(r, "id"))
	return ok(ap), err
}

func (s *Server) handleApprovalDecide(approve bool) func(r *http.Request) (reply, error) {
	decide := s.svc.Approvals.Deny
	if approve {
		decide = s.svc.Approvals.Approve
	}
	return func(r *http.Request) (reply, error) {
		ap, err := decide(r.Context(), actorFrom(r), chi.URLParam(r, "id"))
		return ok(ap), err
	}
}

func (s *Server) handleGuardrailsGet(r *http.Request) (reply, error) {
	g, err := s.svc.Guardrails.Guardrails(r.Context(), actorFrom(r))
	return ok(g), err
}

func (s *Server) handleGuardrailsPut(r *http.Request, req mcpgate.Guardrails) (reply, error) {
	g, err := s.svc.Guardrails.SetGuardrails(r.Context(), actorFrom(r), req)
	return ok(g), err
}

func (s *Server) handleNotificationsGet(r *http.Request) (reply, error) {
	n, err := s.svc.Notifications.Notifications(r.Context(), actorFrom(r))
	return ok(n), err
}

func (s *Server) handleNotificationsPut(r *http.Request, req mcpgate.NotificationInput) (reply, error) {
	n, err := s.svc.Notifications.SetNotifications(r.Context(), actorFrom(r), req)
	return ok(n), err
}

func (s *Server) handleDeliveryList(r *http.Request) (reply, error) {
	list, err := s.svc.Notifications.WebhookDeliveries(r.Context(), actorFrom(r))
	return ok(listOf("deliveries", list)), err
}
