package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

// The upstream server pages: the workspace's remote MCP servers, a form to
// add one, and each server's page (edit, re-discover, disable, remove, its
// tools, a quarantined tool's change to approve, and what of its requests
// to the person's client is relayed). Every form posts to
// the JSON API; the server service decides who may change what.

type serversPage struct {
	Admin   bool
	Servers []mcpgate.Server
	// CallbackURL is the redirect URI of an OAuth client registered by
	// hand for the gateway.
	CallbackURL string
}

func (h *handler) handleServers(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	list, err := h.opts.Servers.Servers(ctx, actorFrom(ctx))
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	p := serversPage{Admin: workspaceFrom(ctx).Role.CanAdmin(), Servers: list, CallbackURL: h.opts.PublicURL + "/oauth/upstream/callback"}
	h.render(w, r, http.StatusOK, "servers", h.newView(r, "Servers", "servers", p))
}

type serverPage struct {
	Admin     bool
	Server    *mcpgate.Server
	Approvals []mcpgate.Approval
	// Quarantined are the tools waiting for an admin, with their change
	// laid out; Tools are the rest, listed first.
	Quarantined []quarantinedTool
	Tools       []mcpgate.ServerTool
	// Aliased are the listed tools that have, or need, an alias.
	Aliased []mcpgate.ServerTool
	// Connected and ConnectError are the outcome of an OAuth connection
	// the browser comes back from (the callback's redirect).
	Connected    bool
	ConnectError string
	// AllowedHosts is the URL-mode elicitation allow-list, one host a
	// line, for its textarea; HostsSeen the hosts the server asked for.
	AllowedHosts string
	HostsSeen    []seenHost
}

// seenHost is a host a server's URL-mode elicitation named: whether the
// allow-list lets it through already and, if not, the list with it added
// (what its "Allow" button sends).
type seenHost struct {
	mcpgate.ElicitationHost
	Allowed   bool
	AllowList string
}

// hostsSeen lays out a server's hosts seen against its allow-list.
func hostsSeen(srv *mcpgate.Server) []seenHost {
	out := make([]seenHost, 0, len(srv.ElicitationHostsSeen))
	for _, h := range srv.ElicitationHostsSeen {
		_, ok := mcpgate.ElicitationHostAllowed(srv.ElicitationURLHosts, "https://"+h.Host+"/")
		out = append(out, seenHost{ElicitationHost: h, Allowed: ok,
			AllowList: strings.Join(append(slices.Clone(srv.ElicitationURLHosts), h.Host), " ")})
	}
	return out
}

// quarantinedTool is a tool whose definition changed after it was
// trusted, with both definitions indented for reading side by side.
type quarantinedTool struct {
	mcpgate.ServerTool
	Before, After string
}

func (h *handler) handleServer(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	srv, err := h.opts.Servers.Server(ctx, actorFrom(ctx), chi.URLParam(r, "name"))
	switch mcpgate.ErrorCode(err) {
	case "":
	case mcpgate.ENotFound, mcpgate.EInvalid:
		h.notFound(w, r)
		return
	default:
		h.serverError(w, r, err)
		return
	}
	p := serverPage{Admin: workspaceFrom(ctx).Role.CanAdmin(), Server: srv, Approvals: mcpgate.Approvals,
		Connected: r.URL.Query().Get("connected") == "1", ConnectError: r.URL.Query().Get("connect_error"),
		AllowedHosts: strings.Join(srv.ElicitationURLHosts, "\n"), HostsSeen: hostsSeen(srv)}
	for _, t := range srv.Tools {
		if t.Quarantined && t.Change != nil {
			p.Quarantined = append(p.Quarantined, quarantinedTool{ServerTool: t, Before: indentJSON(t.Definition),
				After: indentJSON(t.Change.Definition)})
		}
		if t.Listed && (t.Alias != "" || t.NameProblem != "") {
			p.Aliased = append(p.Aliased, t)
		}
	}
	p.Tools = slices.Clone(srv.Tools)
	slices.SortStableFunc(p.Tools, func(a, b mcpgate.ServerTool) int {
		switch {
		case a.Listed == b.Listed:
			return 0
		case a.Listed:
			return -1
		}
		return 1
	})
	h.render(w, r, http.StatusOK, "server", h.newView(r, srv.Name, "servers", p))
}

// indentJSON lays a definition out for reading; one that does not parse is
// shown as it came.
func indentJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
