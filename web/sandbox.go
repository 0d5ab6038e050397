package web

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

// The resource pages (a connector's sandboxes) show what the connector's own view
// of them returns: the connector reads them through its tools, under the
// workspace's policy and audit, so a person sees exactly what the AI sees.
// Nothing here names a connector's tool or reads its output.

// browsable returns the first connector whose resources the dashboard can
// show.
func (h *handler) browsable() (mcpgate.ConnectorInfo, bool) {
	for _, c := range h.svc.Resources.Connectors() {
		if c.Plural != "" {
			return c, true
		}
	}
	return mcpgate.ConnectorInfo{}, false
}

type resourcesPage struct {
	Connection *mcpgate.Connection
	Kind       mcpgate.ConnectorInfo
	Error      string
	Resources  []mcpgate.Resource
	// Counts are how many are in each state, in the order first seen.
	Counts  []stateCount
	Note    string
	NextURL string
	Paged   bool
}

type stateCount struct {
	State string
	N     int
}

func (h *handler) handleSandboxes(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws := workspaceFrom(ctx)
	kind, ok := h.browsable()
	if !ok {
		h.notFound(w, r)
		return
	}
	conn, err := h.connectionOf(ctx, kind.Name)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	p := resourcesPage{Connection: conn, Kind: kind, Counts: []stateCount{{"running", 0}, {"paused", 0}}}
	if conn != nil {
		next := r.URL.Query().Get("next")
		if len(next) >= 512 {
			next = ""
		}
		p.Paged = next != ""
		page, err := h.svc.Resources.Resources(ctx, actorFrom(ctx), kind.Name, next)
		if err != nil {
			h.logToolError(r, err)
			p.Error = mcpgate.ErrorMessage(err)
		} else {
			p.Resources, p.Note = page.Resources, page.Note
			for _, res := range page.Resources {
				p.Counts = countState(p.Counts, res.State)
			}
			if page.Next != "" {
				p.NextURL = "/app/w/" + ws.ID + "/sandboxes?next=" + url.QueryEscape(page.Next)
			}
		}
	}
	h.render(w, r, http.StatusOK, "sandboxes", h.newView(r, titleCase(kind.Plural), "sandboxes", p))
}

func countState(counts []stateCount, state string) []stateCount {
	for i := range counts {
		if counts[i].State == state {
			counts[i].N++
			return counts
		}
	}
	return append(counts, stateCount{state, 1})
}

// titleCase capitalises a connector's resource name for a heading.
func titleCase(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// logToolError logs what the person does not see: an internal error.
func (h *handler) logToolError(r *http.Request, err error) {
	if mcpgate.ErrorCode(err) == mcpgate.EInternal {
		h.log.ErrorContext(r.Context(), "dashboard resource read", "err", err)
	}
}

type resourcePage struct {
	ID       string
	Kind     mcpgate.ConnectorInfo
	Resource *mcpgate.ResourceDetail
	Error    string
	NotFound bool
	Charts   []*lineChart
	// Disabled are the actions the workspace has turned off.
	Disabled []mcpgate.ResourceAction
	Actions  []mcpgate.ResourceAction
}

func (h *handler) handleSandbox(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := chi.URLParam(r, "id")
	kind, ok := h.browsable()
	if !ok {
		h.notFound(w, r)
		return
	}
	p := resourcePage{ID: id, Kind: kind}
	title := titleCase(kind.Singular) + " " + id
	d, err := h.svc.Resources.Resource(ctx, actorFrom(ctx), kind.Name, id)
	if err != nil {
		h.logToolError(r, err)
		p.Error = mcpgate.ErrorMessage(err)
		p.NotFound = mcpgate.ErrorCode(err) == mcpgate.ENotFound
		status := http.StatusOK
		if p.NotFound {
			status = http.StatusNotFound
		}
		h.render(w, r, status, "sandbox", h.newView(r, title, "sandboxes", p))
		return
	}
	p.Resource = d
	for _, a := range d.Actions {
		if a.Enabled {
			p.Actions = append(p.Actions, a)
		} else {
			p.Disabled = append(p.Disabled, a)
		}
	}
	for _, s := range d.Series {
		p.Charts = append(p.Charts, seriesChart(s))
	}
	h.render(w, r, http.StatusOK, "sandbox", h.newView(r, title, "sandboxes", p))
}

// seriesChart draws one usage series.
func seriesChart(s mcpgate.Series) *lineChart {
	pts := make([]point, len(s.Points))
	for i, p := range s.Points {
		pts[i] = point{p.T, p.V}
	}
	format := func(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + "%" }
	if s.Format == "bytes" {
		format = func(v float64) string { return fmtBytes(int64(v)) }
	}
	c := newLineChart(s.Title, pts, s.Max, format)
	if s.Format == "bytes" && s.Max > 0 {
		c.Unit = "of " + fmtBytes(int64(s.Max))
	}
	return c
}

// connectionOf returns the workspace's connection to a connector, or nil
// when there is none.
func (h *handler) connectionOf(ctx context.Context, connector string) (*mcpgate.Connection, error) {
	c, err := h.svc.Connections.Connection(ctx, actorFrom(ctx), connector)
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
		return nil, nil
	}
	return c, err
}
