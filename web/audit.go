package web

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
)

// The audit page's source choice. Opening a sandbox page makes three or four
// tool calls of its own, so by default the page shows what AI clients did
// (source "mcp"), with a visible switch to every source. Once a tool or
// action is chosen the person is looking for that, wherever it came from (a
// kill from the dashboard, an admin change), so the default becomes every
// source. An explicit choice always wins.
const (
	auditSourceAI        = "mcp"
	auditSourceDashboard = "dashboard"
	auditSourceAll       = "all"
)

// auditSource returns the page's effective source choice and the filter
// for it ("" for every source).
func auditSource(q url.Values) (choice string, filter mcpgate.Source) {
	switch s := q.Get("source"); s {
	case auditSourceAI, auditSourceDashboard:
		return s, mcpgate.Source(s)
	case auditSourceAll:
		return auditSourceAll, ""
	}
	if q.Get("tool") != "" {
		return auditSourceAll, ""
	}
	return auditSourceAI, mcpgate.SourceMCP
}

// validAuditCursor reports whether s has the store's cursor shape
// ("<unix µs>_<id>"); anything else starts from the newest page instead of
// failing the page.
func validAuditCursor(s string) bool {
	t, id, ok := strings.Cut(s, "_")
	_, err1 := strconv.ParseUint(t, 10, 63)
	_, err2 := strconv.ParseUint(id, 10, 63)
	return ok && err1 == nil && err2 == nil
}

// auditLinks are the page's links that keep its filters: the source switch
// and the downloads.
type auditLinks struct {
	// SourceChoice is the effective source: "mcp", "dashboard" or "all".
	SourceChoice string
	// ToggleURL switches between AI calls only and every source.
	ToggleURL string
	// ExportCSV and ExportNDJSON download every matching row (the JSON API's
	// export, which applies the same visibility as the page).
	ExportCSV, ExportNDJSON string
	// ChartSource is the source the chart counts ("" for every source).
	ChartSource string
}

// auditCallsPerHour counts the chart's calls: those of the table's source,
// so that the chart and the table tell the same story.
func (h *handler) auditCallsPerHour(ctx context.Context, l *auditLinks, userID string, source mcpgate.Source, since time.Time) ([]mcpgate.HourCount, error) {
	l.ChartSource = string(source)
	return h.svc.Audit.CallsPerHour(ctx, actorFrom(ctx), userID, source, since)
}

// newAuditLinks builds the links for the page at base (/app/w/{ws}/audit)
// showing filter f with the page's query aq.
func newAuditLinks(wsID, base string, aq url.Values, choice string, f mcpgate.AuditFilter, admin bool) auditLinks {
	l := auditLinks{SourceChoice: choice}
	toggle := url.Values{}
	for _, k := range []string{"tool", "outcome", "actor", "since"} {
		if v := aq.Get(k); v != "" {
			toggle.Set(k, v)
		}
	}
	if choice == auditSourceAll {
		toggle.Set("source", auditSourceAI)
	} else {
		toggle.Set("source", auditSourceAll)
	}
	l.ToggleURL = base + "?" + toggle.Encode()
	ex := url.Values{}
	for k, v := range map[string]string{"tool": f.Action, "outcome": string(f.Outcome), "source": string(f.Source)} {
		if v != "" {
			ex.Set(k, v)
		}
	}
	if admin && f.ActorID != "" {
		ex.Set("actor", f.ActorID)
	}
	if !f.Since.IsZero() {
		ex.Set("since", f.Since.UTC().Format(time.RFC3339))
	}
	api := "/api/v1/workspaces/" + url.PathEscape(wsID) + "/audit/export?"
	ex.Set("format", "csv")
	l.ExportCSV = api + ex.Encode()
	ex.Set("format", "ndjson")
	l.ExportNDJSON = api + ex.Encode()
	return l
}
