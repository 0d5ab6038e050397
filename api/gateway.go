package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

func (s *Server) handleConnectionGet(w http.ResponseWriter, r *http.Request) {
	c, err := s.svc.Connections.Connection(r.Context(), actorFrom(r), chi.URLParam(r, "connector"))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) handleConnectionPut(w http.ResponseWriter, r *http.Request) {
	var req struct {
		APIKey mcpgate.Secret `json:"api_key"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if strings.TrimSpace(req.APIKey.Reveal()) == "" {
		WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.EInvalid, "api_key is required"))
		return
	}
	c, err := s.svc.Connections.PutConnection(r.Context(), actorFrom(r), chi.URLParam(r, "connector"),
		mcpgate.Secret(strings.TrimSpace(req.APIKey.Reveal())))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) handleConnectionDelete(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Connections.DeleteConnection(r.Context(), actorFrom(r), chi.URLParam(r, "connector")); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleToolList(w http.ResponseWriter, r *http.Request) {
	tools, err := s.svc.Tools.Tools(r.Context(), actorFrom(r))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tools": tools})
}

func (s *Server) handleToolUpdate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Enabled  *bool   `json:"enabled"`
		Approval *string `json:"approval"`
		// NeedsConfirmation is the deprecated alias of approval (true:
		// model, false: none), still accepted from older clients.
		NeedsConfirmation *bool `json:"needs_confirmation"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	u := mcpgate.ToolUpdate{Enabled: req.Enabled, NeedsConfirmation: req.NeedsConfirmation}
	if req.Approval != nil {
		a, err := mcpgate.ParseApproval(*req.Approval)
		if err != nil {
			WriteError(w, r, s.log, err)
			return
		}
		u.Approval = &a
	}
	t, err := s.svc.Tools.UpdateTool(r.Context(), actorFrom(r), chi.URLParam(r, "name"), u)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// handleToolCall runs a tool from the dashboard: the same policy, credential
// and audit path as an MCP call. A tool that needs confirmation runs only
// with "confirmed": true, which the dashboard sends after its dialog.
func (s *Server) handleToolCall(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Arguments json.RawMessage `json:"arguments"`
		Confirmed bool            `json:"confirmed"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	a := *actorFrom(r)
	a.Source = mcpgate.SourceDashboard
	out, err := s.svc.Tools.CallTool(r.Context(), &a, mcpgate.ToolCall{Tool: chi.URLParam(r, "name"),
		Arguments: req.Arguments, Confirmed: req.Confirmed})
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(out)
}

type keyCreated struct {
	mcpgate.APIKey
	Key          string `json:"key"`
	ConnectorURL string `json:"connector_url"`
}

func (s *Server) handleKeyCreate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name      string        `json:"name"`
		Scope     mcpgate.Scope `json:"scope"`
		ExpiresAt *time.Time    `json:"expires_at"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	k, key, err := s.svc.Keys.CreateKey(r.Context(), actorFrom(r), mcpgate.NewKey{Name: req.Name, Scope: req.Scope, ExpiresAt: req.ExpiresAt})
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, keyCreated{APIKey: *k, Key: key, ConnectorURL: mcpgate.ConnectorURL(s.opts.PublicURL, key)})
}

func (s *Server) handleKeyList(w http.ResponseWriter, r *http.Request) {
	keys, err := s.svc.Keys.Keys(r.Context(), actorFrom(r))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
}

func (s *Server) handleKeyRevoke(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Keys.RevokeKey(r.Context(), actorFrom(r), chi.URLParam(r, "id")); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleAuditList pages the audit log (the service decides whose events the
// caller sees).
func (s *Server) handleAuditList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := mcpgate.AuditFilter{Action: q.Get("tool"), Outcome: mcpgate.Outcome(q.Get("outcome")), Kind: mcpgate.AuditKind(q.Get("kind")),
		Source: mcpgate.Source(q.Get("source")), Cursor: q.Get("cursor"), ActorID: q.Get("actor")}
	if f.Action == "" {
		f.Action = q.Get("action")
	}
	for name, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.EInvalid, "%s must be an RFC 3339 time", name))
				return
			}
			*dst = t
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.EInvalid, "limit must be 1 to 200"))
			return
		}
		f.Limit = n
	}
	items, next, err := s.svc.Audit.Audit(r.Context(), actorFrom(r), f)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if items == nil {
		items = []mcpgate.AuditEvent{}
	}
	writeJSON(w, http.StatusOK, struct {
		Items      []mcpgate.AuditEvent `json:"items"`
		NextCursor *string              `json:"next_cursor"`
	}{items, optional(next)})
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
