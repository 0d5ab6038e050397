package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

func (h *handler) handleLanding(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "landing", h.newView(r, "MCP gateway for "+h.upstreamThings(), "", nil))
}

type authPage struct {
	Next       string
	Email      string
	Invitation string
	// App is the app asking, when the page is the first step of an OAuth
	// sign-in.
	App string
}

func (h *handler) handleSignup(w http.ResponseWriter, r *http.Request) {
	h.authForm(w, r, "signup", "Create your account")
}

func (h *handler) handleLogin(w http.ResponseWriter, r *http.Request) {
	h.authForm(w, r, "login", "Log in")
}

// authForm renders the sign-up or login page, or sends someone already
// signed in on to where they were going.
func (h *handler) authForm(w http.ResponseWriter, r *http.Request, page, title string) {
	next := orDefault(safeNext(r.URL.Query().Get("next")), "/app")
	if mcpgate.UserFromContext(r.Context()) != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	p := authPage{Next: next, App: h.oauthApp(r, next)}
	v := h.newView(r, title, "", p)
	v.Flow = p.App != ""
	h.render(w, r, http.StatusOK, page, v)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

type invitePage struct {
	Token      string
	Invitation *mcpgate.Invitation
	Next       string
	// WrongUser is set when the logged-in user's email is not the one
	// invited.
	WrongUser bool
}

func (h *handler) handleInvite(w http.ResponseWriter, r *http.Request) {
	token := chi.URLParam(r, "token")
	inv, err := h.svc.Workspaces.FindInvitation(r.Context(), token)
	if err != nil {
		if c := mcpgate.ErrorCode(err); c == mcpgate.ENotFound || c == mcpgate.EInvalid || c == mcpgate.EConflict {
			h.renderError(w, r, http.StatusNotFound, "This invitation is not valid",
				"It may have expired, been used already, or been withdrawn. Ask a workspace admin for a new one.")
			return
		}
		h.serverError(w, r, err)
		return
	}
	u := mcpgate.UserFromContext(r.Context())
	p := invitePage{Token: token, Invitation: inv, Next: "/invite/" + token}
	if u != nil && u.Email != inv.Email {
		p.WrongUser = true
	}
	h.render(w, r, http.StatusOK, "invite", h.newView(r, "Join a workspace", "", p))
}

// handleApp sends the user to their personal workspace (or the first one).
func (h *handler) handleApp(w http.ResponseWriter, r *http.Request) {
	u := mcpgate.UserFromContext(r.Context())
	wss, err := h.svc.Workspaces.Workspaces(r.Context(), u)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	if len(wss) == 0 {
		h.renderError(w, r, http.StatusNotFound, "No workspace yet",
			"Your account is not in any workspace. Ask an admin for an invitation.")
		return
	}
	http.Redirect(w, r, "/app/w/"+url.PathEscape(homeWorkspace(wss).ID), http.StatusSeeOther)
}

// homeWorkspace is the person's personal workspace, or else the first of
// wss (which must not be empty).
func homeWorkspace(wss []mcpgate.Workspace) mcpgate.Workspace {
	for _, ws := range wss {
		if ws.Personal {
			return ws
		}
	}
	return wss[0]
}

// connectorState is a registered connector as it describes itself
// (connectors.Info), with the workspace's connection to it.
type connectorState struct {
	mcpgate.ConnectorInfo
	// Connection is nil when the workspace has none.
	Connection *mcpgate.Connection
	// AuthFailed is set when the upstream rejected the stored credential
	// since it was last verified.
	AuthFailed bool
}

// connectorStates returns every registered connector with the workspace's
// connection to it, in the registry's order.
func (h *handler) connectorStates(ctx context.Context) ([]connectorState, error) {
	var out []connectorState
	for _, info := range h.svc.Resources.Connectors() {
		conn, err := h.connectionOf(ctx, info.Name)
		if err != nil {
			return nil, err
		}
		st := connectorState{ConnectorInfo: info, Connection: conn}
		st.AuthFailed = conn != nil && conn.LastAuthFail != nil && conn.LastAuthFail.After(conn.VerifiedAt)
		out = append(out, st)
	}
	return out, nil
}

// unconnected names the connectors the workspace has no connection to
// ("" when it has one to each).
func unconnected(states []connectorState) string {
	var titles []string
	for _, c := range states {
		if c.Connection == nil {
			titles = append(titles, c.Title)
		}
	}
	return strings.Join(titles, " and ")
}

type overviewPage struct {
	Connectors []connectorState
	ActiveKeys int
	Recent     []mcpgate.AuditEvent
	Steps      []step
	StepsDone  int
	AllDone    bool
	Members    int
}

type step struct {
	Done  bool
	Title string
	Text  string
	Link  string
	Label string
}

func (h *handler) handleOverview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws := workspaceFrom(ctx)
	states, err := h.connectorStates(ctx)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	keys, err := h.svc.Keys.Keys(ctx, actorFrom(ctx))
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	p := overviewPage{Connectors: states}
	now := h.opts.Now()
	for i := range keys {
		if keys[i].Active(now) {
			p.ActiveKeys++
		}
	}
	a := actorFrom(ctx)
	p.Recent, _, err = h.svc.Audit.Audit(ctx, a, mcpgate.AuditFilter{Limit: 6})
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	calls, _, err := h.svc.Audit.Audit(ctx, a, mcpgate.AuditFilter{Kind: mcpgate.KindToolCall, Limit: 1})
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	base := "/app/w/" + ws.ID
	p.Steps = nil
	for _, c := range states {
		p.Steps = append(p.Steps, step{Done: c.Connection != nil, Title: c.Connect.Title, Text: c.Connect.Summary,
			Link: base + "/connections#connect-" + c.Name, Label: c.Connect.Action})
	}
	p.Steps = append(p.Steps, []step{
		{Done: p.ActiveKeys > 0, Title: "Create an MCP key", Text: "Each AI client gets its own key; you can revoke it at any time.",
			Link: base + "/keys", Label: "Create a key"},
		{Done: len(calls) > 0, Title: "Connect your AI client", Text: "Copy the ready-made setup for Claude, Cursor, VS Code and others, then ask “List all my active sandboxes”.",
			Link: base + "/keys#setup", Label: "See client setup"},
	}...)
	if ws.Role.CanAdmin() {
		members, err := h.svc.Workspaces.Members(ctx, actorFrom(ctx))
		if err != nil {
			h.serverError(w, r, err)
			return
		}
		p.Members = len(members)
		p.Steps = append(p.Steps, step{Done: len(members) > 1, Title: "Invite your team (optional)",
			Text: "Teammates get their own keys; you decide which tools they can use.", Link: base + "/settings#members", Label: "Invite"})
	}
	for _, s := range p.Steps {
		if s.Done {
			p.StepsDone++
		}
	}
	p.AllDone = p.StepsDone == len(p.Steps)
	h.render(w, r, http.StatusOK, "overview", h.newView(r, ws.Name, "overview", p))
}

type connectionsPage struct {
	Connectors []connectorState
	// HasKey: the viewer has an active MCP key, so the next step after
	// connecting is a client's setup rather than a key.
	HasKey bool
}

func (h *handler) handleConnections(w http.ResponseWriter, r *http.Request) {
	states, err := h.connectorStates(r.Context())
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	p := connectionsPage{Connectors: states}
	if slices.ContainsFunc(states, func(c connectorState) bool { return c.Connection != nil }) {
		a := actorFrom(r.Context())
		keys, err := h.svc.Keys.Keys(r.Context(), a)
		if err != nil {
			h.serverError(w, r, err)
			return
		}
		now := h.opts.Now()
		p.HasKey = slices.ContainsFunc(keys, func(k mcpgate.APIKey) bool { return k.UserID == a.UserID && k.Active(now) })
	}
	h.render(w, r, http.StatusOK, "connections", h.newView(r, h.connectionsTitle(), "connections", p))
}

type keysPage struct {
	Keys    []mcpgate.APIKey
	Active  int
	Clients []setupClient
	Prompts []string
	MCPURL  string
	// Unconnected names the connectors the workspace has not connected.
	Unconnected string
	// Grants are the OAuth apps connected to the workspace (connected_apps.html).
	Grants []mcpgate.Grant
}

func (h *handler) handleKeys(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	keys, err := h.svc.Keys.Keys(ctx, actorFrom(ctx))
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	states, err := h.connectorStates(ctx)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	// Active keys first, newest first; revoked and expired ones after.
	now := h.opts.Now()
	slices.SortStableFunc(keys, func(a, b mcpgate.APIKey) int {
		if a.Active(now) != b.Active(now) {
			if a.Active(now) {
				return -1
			}
			return 1
		}
		return b.CreatedAt.Compare(a.CreatedAt)
	})
	grants, err := h.svc.Grants.Grants(ctx, actorFrom(ctx))
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	p := keysPage{Keys: keys, Clients: withOAuthSetup(setupClients(h.opts.PublicURL), h.opts.PublicURL), Prompts: examplePrompts,
		MCPURL: h.opts.PublicURL + "/mcp", Unconnected: unconnected(states), Grants: grants}
	for i := range keys {
		if keys[i].Active(now) {
			p.Active++
		}
	}
	h.render(w, r, http.StatusOK, "keys", h.newView(r, "MCP keys", "keys", keyRows{keysPage: p, now: now}))
}

// keyRows adds the per-row state the template needs.
type keyRows struct {
	keysPage
	now time.Time
}

// Rows returns the keys with their state.
func (k keyRows) Rows() []keyRow {
	out := make([]keyRow, 0, len(k.Keys))
	for _, key := range k.Keys {
		row := keyRow{APIKey: key, State: "active"}
		switch {
		case key.RevokedAt != nil:
			row.State = "revoked"
		case key.ExpiresAt != nil && !k.now.Before(*key.ExpiresAt):
			row.State = "expired"
		}
		out = append(out, row)
	}
	return out
}

type keyRow struct {
	mcpgate.APIKey
	State string
}

type settingsPage struct {
	Admin bool
	// Owner may change the workspace's two-factor policy; OwnTOTP says
	// whether they have two-factor sign-in on, as turning it on needs.
	Owner       bool
	OwnTOTP     bool
	Me          string
	Members     []mcpgate.Member
	Invitations []mcpgate.Invitation
	Tools       []mcpgate.ToolInfo
	Kill        *mcpgate.ToolInfo
	Approvals   []mcpgate.Approval
	Guardrails  *mcpgate.Guardrails
	// Notifications and Deliveries are the approval notifications and the
	// latest webhook deliveries (admins only).
	Notifications *mcpgate.NotificationSettings
	Deliveries    []mcpgate.WebhookDelivery
}

func (h *handler) handleSettings(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, u := workspaceFrom(ctx), mcpgate.UserFromContext(ctx)
	p := settingsPage{Admin: ws.Role.CanAdmin(), Owner: ws.Role == mcpgate.RoleOwner, Me: u.ID}
	var err error
	if p.Owner {
		if p.OwnTOTP, err = h.svc.TwoFactor.TOTPEnabled(ctx, u); err != nil {
			h.serverError(w, r, err)
			return
		}
	}
	if p.Members, err = h.svc.Workspaces.Members(ctx, actorFrom(ctx)); err != nil {
		h.serverError(w, r, err)
		return
	}
	if p.Admin {
		invs, err := h.svc.Workspaces.Invitations(ctx, actorFrom(ctx))
		if err != nil {
			h.serverError(w, r, err)
			return
		}
		now := h.opts.Now()
		for _, inv := range invs {
			if inv.AcceptedAt == nil && now.Before(inv.ExpiresAt) {
				p.Invitations = append(p.Invitations, inv)
			}
		}
	}
	if p.Tools, err = h.svc.Tools.Tools(ctx, actorFrom(ctx)); err != nil {
		h.serverError(w, r, err)
		return
	}
	p.Approvals = mcpgate.Approvals
	if p.Guardrails, err = h.svc.Guardrails.Guardrails(ctx, actorFrom(ctx)); err != nil {
		h.serverError(w, r, err)
		return
	}
	if p.Admin && h.svc.Notifications != nil {
		if p.Notifications, err = h.svc.Notifications.Notifications(ctx, actorFrom(ctx)); err != nil {
			h.serverError(w, r, err)
			return
		}
		if p.Deliveries, err = h.svc.Notifications.WebhookDeliveries(ctx, actorFrom(ctx)); err != nil {
			h.serverError(w, r, err)
			return
		}
	}
	// The destructive tool a new workspace keeps off (a kill) gets the
	// guarded switch.
	for i := range p.Tools {
		if p.Tools[i].Destructive && p.Tools[i].OffByDefault && p.Kill == nil {
			p.Kill = &p.Tools[i]
		}
	}
	h.render(w, r, http.StatusOK, "settings", h.newView(r, "Workspace settings", "settings", p))
}

type auditPage struct {
	Admin    bool
	Events   []mcpgate.AuditEvent
	Next     string
	Filter   auditQuery
	Tools    []string
	Actions  []string
	Members  []mcpgate.Member
	Outcomes []mcpgate.Outcome
	Chart    *barChart
	Calls24  int
	Errors24 int
	Filtered bool
	// NewestURL is the first page with the same filters.
	NewestURL string
	NextURL   string
	auditLinks
}

type auditQuery struct {
	Tool, Outcome, Actor, Since, Cursor string
}

var sinceChoices = map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour}

func (h *handler) handleAudit(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws := workspaceFrom(ctx)
	q := r.URL.Query()
	aq := auditQuery{Tool: q.Get("tool"), Outcome: q.Get("outcome"), Actor: q.Get("actor"), Since: q.Get("since"), Cursor: q.Get("cursor")}
	p := auditPage{Admin: ws.Role.CanAdmin(), Filter: aq,
		Outcomes: mcpgate.Outcomes}
	choice, source := auditSource(q)
	f := mcpgate.AuditFilter{Action: aq.Tool, Outcome: mcpgate.Outcome(aq.Outcome), Source: source, Limit: 50}
	if validAuditCursor(aq.Cursor) {
		f.Cursor = aq.Cursor
	}
	if d, ok := sinceChoices[aq.Since]; ok {
		f.Since = h.opts.Now().Add(-d)
	}
	if p.Admin {
		f.ActorID = aq.Actor
		members, err := h.svc.Workspaces.Members(ctx, actorFrom(ctx))
		if err != nil {
			h.serverError(w, r, err)
			return
		}
		p.Members = members
	}
	p.Filtered = aq.Tool != "" || aq.Outcome != "" || aq.Actor != "" || aq.Since != "" || q.Get("source") != ""
	events, next, err := h.svc.Audit.Audit(ctx, actorFrom(ctx), f)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	p.Events, p.Next = events, next
	tools, err := h.svc.Tools.Tools(ctx, actorFrom(ctx))
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	for _, t := range tools {
		p.Tools = append(p.Tools, t.Name)
	}
	if p.Admin {
		for _, a := range mcpgate.AdminActions {
			p.Actions = append(p.Actions, string(a))
		}
	}
	qs := url.Values{}
	for k, v := range map[string]string{"tool": aq.Tool, "outcome": aq.Outcome, "actor": aq.Actor, "since": aq.Since, "source": q.Get("source")} {
		if v != "" {
			qs.Set(k, v)
		}
	}
	base := "/app/w/" + ws.ID + "/audit"
	p.auditLinks = newAuditLinks(ws.ID, base, q, choice, f, p.Admin)
	p.NewestURL = base
	if len(qs) > 0 {
		p.NewestURL += "?" + qs.Encode()
	}
	if next != "" {
		qs.Set("cursor", next)
		p.NextURL = base + "?" + qs.Encode()
	}
	now := h.opts.Now()
	since := now.Truncate(time.Hour).Add(-23 * time.Hour)
	// The chart follows the table: a member's own calls; an admin's whole
	// workspace, or the member filtered on; and the table's source.
	buckets, err := h.auditCallsPerHour(ctx, &p.auditLinks, f.ActorID, f.Source, since)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	p.Chart, p.Calls24, p.Errors24 = hourlyChart(since, buckets)
	h.render(w, r, http.StatusOK, "audit", h.newView(r, "Audit log", "audit", p))
}
