package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

func (s *Server) handleConnectionGet(r *http.Request) (reply, error) {
	c, err := s.svc.Connections.Connection(r.Context(), actorFrom(r), chi.URLParam(r, "connector"))
	return ok(c), err
}

type connectionPut struct {
	APIKey mcpgate.Secret `json:"api_key"`
}

func (s *Server) handleConnectionPut(r *http.Request, req connectionPut) (reply, error) {
	key := strings.TrimSpace(req.APIKey.Reveal())
	if key == "" {
		return reply{}, mcpgate.Errorf(mcpgate.EInvalid, "api_key is required")
	}
	c, err := s.svc.Connections.PutConnection(r.Context(), actorFrom(r), chi.URLParam(r, "connector"), mcpgate.Secret(key))
	return ok(c), err
}

func (s *Server) handleConnectionDelete(r *http.Request) (reply, error) {
	return noContent, s.svc.Connections.DeleteConnection(r.Context(), actorFrom(r), chi.URLParam(r, "connector"))
}

func (s *Server) handleToolList(r *http.Request) (reply, error) {
	tools, err := s.svc.Tools.Tools(r.Context(), actorFrom(r))
	return ok(listOf("tools", tools)), err
}

type toolUpdate struct {
	Enabled  *bool   `json:"enabled"`
	Approval *string `json:"approval"`
	// NeedsConfirmation is the deprecated alias of approval (true:
	// model, false: none), still accepted from older clients; approval
	// wins when both are sent. Answers carry approval only.
	NeedsConfirmation *bool `json:"needs_confirmation"`
}

func (s *Server) handleToolUpdate(r *http.Request, req toolUpdate) (reply, error) {
	u := mcpgate.ToolUpdate{Enabled: req.Enabled}
	switch {
	case req.Approval != nil:
		a, err := mcpgate.ParseApproval(*req.Approval)
		if err != nil {
			return reply{}, err
		}
		u.Approval = &a
	case req.NeedsConfirmation != nil:
		a := mcpgate.ApprovalNone
		if *req.NeedsConfirmation {
			a = mcpgate.ApprovalModel
		}
		u.Approval = &a
	}
	t, err := s.svc.Tools.UpdateTool(r.Context(), actorFrom(r), chi.URLParam(r, "name"), u)
	return ok(t), err
}

type toolCall struct {
	Arguments json.RawMessage `json:"arguments"`
	Confirmed bool            `json:"confirmed"`
}

// handleToolCall runs a tool from the dashboard: the same policy, credential
// and audit path as an MCP call. A tool that needs confirmation runs only
// with "confirmed": true, which the dashboard sends after its dialog. The
// tool's result is already JSON and is answered as it is.
func (s *Server) handleToolCall(r *http.Request, req toolCall) (reply, error) {
	a := *actorFrom(r)
	a.Source = mcpgate.SourceDashboard
	out, err := s.svc.Tools.CallTool(r.Context(), &a, mcpgate.ToolCall{Tool: chi.URLParam(r, "name"),
		Arguments: req.Arguments, Confirmed: req.Confirmed})
	return ok(json.RawMessage(out)), err
}

type keyCreate struct {
	Name      string        `json:"name"`
	Scope     mcpgate.Scope `json:"scope"`
	ExpiresAt *time.Time    `json:"expires_at"`
}

type keyCreated struct {
	mcpgate.APIKey
	Key          string `json:"key"`
	ConnectorURL string `json:"connector_url"`
}

func (s *Server) handleKeyCreate(r *http.Request, req keyCreate) (reply, error) {
	k, key, err := s.svc.Keys.CreateKey(r.Context(), actorFrom(r), mcpgate.NewKey{Name: req.Name, Scope: req.Scope, ExpiresAt: req.ExpiresAt})
	if err != nil {
		return reply{}, err
	}
	return created(keyCreated{APIKey: *k, Key: key, ConnectorURL: mcpgate.ConnectorURL(s.opts.PublicURL, key)}), nil
}

func (s *Server) handleKeyList(r *http.Request) (reply, error) {
	keys, err := s.svc.Keys.Keys(r.Context(), actorFrom(r))
	return ok(listOf("keys", keys)), err
}

func (s *Server) handleKeyRevoke(r *http.Request) (reply, error) {
	return noContent, s.svc.Keys.RevokeKey(r.Context(), actorFrom(r), chi.URLParam(r, "id"))
}

type auditPage struct {
	Items      []mcpgate.AuditEvent `json:"items"`
	NextCursor *string              `json:"next_cursor"`
}

// handleAuditList pages the audit log (the service decides whose events the
// caller sees).
func (s *Server) handleAuditList(r *http.Request) (reply, error) {
	f, err := auditFilter(r.URL.Query())
	if err != nil {
		return reply{}, err
	}
	items, next, err := s.svc.Audit.Audit(r.Context(), actorFrom(r), f)
	if items == nil {
		items = []mcpgate.AuditEvent{}
	}
	page := auditPage{Items: items}
	if next != "" {
		page.NextCursor = &next
	}
	return ok(page), err
}
