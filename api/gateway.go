package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

// Gateway is what the API needs of the MCP gateway: tool policy and
// credentials, both of which it checks and audits itself.
type Gateway interface {
	Tools(ctx context.Context, workspaceID string) ([]mcpgate.ToolInfo, error)
	SetTool(ctx context.Context, workspaceID, userID, name string, enabled, needsConfirmation bool) (*mcpgate.ToolInfo, error)
	PutCredential(ctx context.Context, workspaceID, userID, connector string, credential mcpgate.Secret) (*mcpgate.Connection, error)
	Connection(ctx context.Context, workspaceID, connector string) (*mcpgate.Connection, error)
	DeleteCredential(ctx context.Context, workspaceID, userID, connector string) error
	// CallTool runs a tool for the dashboard under the workspace's policy;
	// confirmed says the user confirmed it in a dialog.
	CallTool(ctx context.Context, workspaceID, userID, tool string, args json.RawMessage, confirmed bool) (json.RawMessage, error)
}

// KeyStore is what the API needs to manage MCP keys.
type KeyStore interface {
	CreateKey(ctx context.Context, k *mcpgate.APIKey, secretHash []byte) error
	ListKeys(ctx context.Context, workspaceID, userID string) ([]mcpgate.APIKey, error)
	FindKey(ctx context.Context, workspaceID, id string) (*mcpgate.APIKey, error)
	RevokeKey(ctx context.Context, workspaceID, id string) error
}

// AuditLog reads the audit log.
type AuditLog interface {
	ListAudit(ctx context.Context, workspaceID string, f mcpgate.AuditFilter) ([]mcpgate.AuditEvent, string, error)
}

func (s *Server) gatewayRoutes(r chi.Router) {
	if s.opts.Gateway != nil {
		r.Get("/connections/{connector}", s.handleConnectionGet)
		r.With(s.requireAdmin).Put("/connections/{connector}", s.handleConnectionPut)
		r.With(s.requireAdmin).Delete("/connections/{connector}", s.handleConnectionDelete)
		r.Get("/tools", s.handleToolList)
		r.With(s.requireAdmin).Put("/tools/{name}", s.handleToolUpdate)
		r.Post("/tools/{name}/call", s.handleToolCall)
	}
	if s.opts.Keys != nil {
		r.Get("/keys", s.handleKeyList)
		r.Post("/keys", s.handleKeyCreate)
		r.Delete("/keys/{id}", s.handleKeyRevoke)
	}
	if s.opts.AuditLog != nil {
		r.Get("/audit", s.handleAuditList)
		r.Get("/audit/export", s.handleAuditExport)
	}
}

func (s *Server) handleConnectionGet(w http.ResponseWriter, r *http.Request) {
	c, err := s.opts.Gateway.Connection(r.Context(), WorkspaceFromContext(r.Context()).ID, chi.URLParam(r, "connector"))
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
	c, err := s.opts.Gateway.PutCredential(r.Context(), WorkspaceFromContext(r.Context()).ID,
		mcpgate.UserFromContext(r.Context()).ID, chi.URLParam(r, "connector"), mcpgate.Secret(strings.TrimSpace(req.APIKey.Reveal())))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) handleConnectionDelete(w http.ResponseWriter, r *http.Request) {
	err := s.opts.Gateway.DeleteCredential(r.Context(), WorkspaceFromContext(r.Context()).ID,
		mcpgate.UserFromContext(r.Context()).ID, chi.URLParam(r, "connector"))
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleToolList(w http.ResponseWriter, r *http.Request) {
	tools, err := s.opts.Gateway.Tools(r.Context(), WorkspaceFromContext(r.Context()).ID)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tools": tools})
}

func (s *Server) handleToolUpdate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Enabled           *bool `json:"enabled"`
		NeedsConfirmation *bool `json:"needs_confirmation"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	ws := WorkspaceFromContext(r.Context())
	name := chi.URLParam(r, "name")
	// Fields left out keep their current value.
	tools, err := s.opts.Gateway.Tools(r.Context(), ws.ID)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	var cur *mcpgate.ToolInfo
	for i := range tools {
		if tools[i].Name == name {
			cur = &tools[i]
		}
	}
	if cur == nil {
		WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.ENotFound, "no tool named %q", name))
		return
	}
	enabled, confirm := cur.Enabled, cur.NeedsConfirmation
	if req.Enabled != nil {
		enabled = *req.Enabled
	}
	if req.NeedsConfirmation != nil {
		confirm = *req.NeedsConfirmation
	}
	t, err := s.opts.Gateway.SetTool(r.Context(), ws.ID, mcpgate.UserFromContext(r.Context()).ID, name, enabled, confirm)
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
	out, err := s.opts.Gateway.CallTool(r.Context(), WorkspaceFromContext(r.Context()).ID,
		mcpgate.UserFromContext(r.Context()).ID, chi.URLParam(r, "name"), req.Arguments, req.Confirmed)
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
	name, err := mcpgate.ValidateName("the key name", req.Name)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if req.Scope == "" {
		req.Scope = mcpgate.ScopeFull
	}
	if !req.Scope.Valid() {
		WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.EInvalid, "scope must be full or read_only"))
		return
	}
	if req.ExpiresAt != nil {
		if !req.ExpiresAt.After(time.Now()) {
			WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.EInvalid, "expires_at must be in the future"))
			return
		}
		t := req.ExpiresAt.UTC()
		req.ExpiresAt = &t
	}
	ws := WorkspaceFromContext(r.Context())
	user := mcpgate.UserFromContext(r.Context())
	key, id, hash := mcpgate.NewMCPKey()
	k := &mcpgate.APIKey{ID: id, WorkspaceID: ws.ID, UserID: user.ID, OwnerEmail: user.Email, Name: name,
		Scope: req.Scope, ExpiresAt: req.ExpiresAt}
	if err := s.opts.Keys.CreateKey(r.Context(), k, hash); err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	s.recordAdmin(r, "key.created", map[string]any{"key_id": k.ID, "name": k.Name, "scope": k.Scope})
	writeJSON(w, http.StatusCreated, keyCreated{APIKey: *k, Key: key, ConnectorURL: s.opts.PublicURL + "/c/" + key + "/mcp"})
}

// handleKeyList lists keys: all of the workspace's for an admin, a member's
// own otherwise.
func (s *Server) handleKeyList(w http.ResponseWriter, r *http.Request) {
	ws := WorkspaceFromContext(r.Context())
	owner := ""
	if !ws.Role.CanAdmin() {
		owner = mcpgate.UserFromContext(r.Context()).ID
	}
	keys, err := s.opts.Keys.ListKeys(r.Context(), ws.ID, owner)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
}

// handleKeyRevoke revokes a key: its owner or a workspace admin may. Another
// member's key reads as not found to a member.
func (s *Server) handleKeyRevoke(w http.ResponseWriter, r *http.Request) {
	ws := WorkspaceFromContext(r.Context())
	k, err := s.opts.Keys.FindKey(r.Context(), ws.ID, chi.URLParam(r, "id"))
	if err == nil && !ws.Role.CanAdmin() && k.UserID != mcpgate.UserFromContext(r.Context()).ID {
		err = mcpgate.Errorf(mcpgate.ENotFound, "key not found")
	}
	if err == nil {
		err = s.opts.Keys.RevokeKey(r.Context(), ws.ID, k.ID)
	}
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	s.recordAdmin(r, "key.revoked", map[string]any{"key_id": k.ID, "name": k.Name})
	w.WriteHeader(http.StatusNoContent)
}

// handleAuditList pages the audit log: admins see every event, members their
// own.
func (s *Server) handleAuditList(w http.ResponseWriter, r *http.Request) {
	ws := WorkspaceFromContext(r.Context())
	q := r.URL.Query()
	f := mcpgate.AuditFilter{Action: q.Get("tool"), Outcome: q.Get("outcome"), Kind: q.Get("kind"),
		Source: q.Get("source"), Cursor: q.Get("cursor"), ActorID: q.Get("actor")}
	if f.Action == "" {
		f.Action = q.Get("action")
	}
	if !ws.Role.CanAdmin() {
		f.ActorID = mcpgate.UserFromContext(r.Context()).ID
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
	items, next, err := s.opts.AuditLog.ListAudit(r.Context(), ws.ID, f)
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
