package web

import (
	"html"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
)

// The audit page shows the AI's calls by default, says so, and offers the
// switch to every source; a chosen tool widens the default to every source;
// the downloads carry the page's filters and a member's never name another
// actor.
func TestAudit_SourceDefaultToggleAndExport(t *testing.T) {
	tests := []struct {
		name, path  string
		role        mcpgate.Role
		wantSource  string // the filter the store is asked for
		wantChoice  string // the option selected
		wantToggle  string // part of the switch's URL
		wantExports []string
		notExport   string
	}{
		{name: "default: AI clients", path: "/app/w/ws1/audit", role: mcpgate.RoleOwner,
			wantSource: "mcp", wantChoice: "mcp", wantToggle: "source=all",
			wantExports: []string{"/api/v1/workspaces/ws1/audit/export?format=csv&amp;source=mcp"}},
		{name: "every source", path: "/app/w/ws1/audit?source=all&since=1h", role: mcpgate.RoleOwner,
			wantChoice: "all", wantToggle: "since=1h&amp;source=mcp",
			wantExports: []string{"since=" + strings.ReplaceAll(testNow.Add(-time.Hour).Format(time.RFC3339), ":", "%3A")}, notExport: "source="},
		{name: "dashboard only", path: "/app/w/ws1/audit?source=dashboard", role: mcpgate.RoleOwner,
			wantSource: "dashboard", wantChoice: "dashboard", wantToggle: "source=all"},
		{name: "a tool chosen: every source", path: "/app/w/ws1/audit?tool=e2b_kill_sandbox", role: mcpgate.RoleOwner,
			wantChoice: "all", wantToggle: "source=mcp&amp;tool=e2b_kill_sandbox",
			wantExports: []string{"tool=e2b_kill_sandbox"}},
		{name: "admin filters a member", path: "/app/w/ws1/audit?actor=u2", role: mcpgate.RoleAdmin,
			wantSource: "mcp", wantChoice: "mcp", wantToggle: "actor=u2", wantExports: []string{"actor=u2"}},
		{name: "member's export names no actor", path: "/app/w/ws1/audit?actor=u2", role: mcpgate.RoleMember,
			wantSource: "mcp", wantChoice: "mcp", wantToggle: "source=all", notExport: "actor="},
		{name: "malformed cursor starts at the newest", path: "/app/w/ws1/audit?cursor=12", role: mcpgate.RoleOwner,
			wantSource: "mcp", wantChoice: "mcp", wantToggle: "source=all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(tt.role)
			h := mustHandler(t, f)
			resp, body := get(t, h, tt.path, testUser)
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s = %d", tt.path, resp.StatusCode)
			}
			if string(f.lastAudit.Source) != tt.wantSource {
				t.Errorf("ListAudit source = %q, want %q", f.lastAudit.Source, tt.wantSource)
			}
			if f.lastAudit.Cursor != "" && !validAuditCursor(f.lastAudit.Cursor) {
				t.Errorf("ListAudit cursor = %q passed on", f.lastAudit.Cursor)
			}
			if !strings.Contains(body, `<option value="`+tt.wantChoice+`" selected>`) {
				t.Errorf("source option %q not selected", tt.wantChoice)
			}
			toggle := between(body, `href="`, `" id="audit-source-toggle"`)
			if !strings.Contains(toggle, tt.wantToggle) {
				t.Errorf("source switch = %q, want it to contain %q", toggle, tt.wantToggle)
			}
			csv := between(body, `href="`, `" download id="export-csv"`)
			nd := between(body, `href="`, `" download id="export-ndjson"`)
			if !strings.HasPrefix(csv, "/api/v1/workspaces/ws1/audit/export?") || !strings.Contains(csv, "format=csv") ||
				!strings.Contains(nd, "format=ndjson") {
				t.Errorf("downloads = %q, %q", csv, nd)
			}
			for _, want := range tt.wantExports {
				if !strings.Contains(csv, want) && !strings.Contains(html.UnescapeString(csv), html.UnescapeString(want)) {
					t.Errorf("CSV download %q lacks %q", csv, want)
				}
			}
			if tt.notExport != "" && strings.Contains(csv, tt.notExport) {
				t.Errorf("CSV download %q has %q", csv, tt.notExport)
			}
		})
	}
}

// The source is labelled: an AI client's call is marked as such.
func TestAudit_SourceLabels(t *testing.T) {
	f := newFake(mcpgate.RoleOwner)
	f.audit = append(f.audit, mcpgate.AuditEvent{ID: 2, Kind: "admin", Action: "tool.enabled", Outcome: mcpgate.OutcomeOK,
		Source: "dashboard", CreatedAt: testNow},
		mcpgate.AuditEvent{ID: 3, Kind: mcpgate.KindToolCall, Action: "e2b_list_sandboxes", Outcome: mcpgate.OutcomeOK,
			Source: "mcp", GrantID: "g1", ClientName: "Claude", CreatedAt: testNow})
	_, body := get(t, mustHandler(t, f), "/app/w/ws1/audit?source=all", testUser)
	if !strings.Contains(body, `<span class="muted small">app Claude</span>`) {
		t.Errorf("a connected app's call does not name the app")
	}
	if !strings.Contains(body, `<span class="audit-source audit-source-mcp">AI client</span>`) ||
		!strings.Contains(body, `<span class="audit-source">dashboard</span>`) {
		t.Errorf("audit rows lack their source labels")
	}
	if !strings.Contains(body, `<option value="audit.exported"`) {
		t.Errorf("admin action filter lacks audit.exported")
	}
}

// between returns the text of s that ends at the first end and starts after
// the last start before it.
func between(s, start, end string) string {
	i := strings.Index(s, end)
	if i < 0 {
		return ""
	}
	j := strings.LastIndex(s[:i], start)
	if j < 0 {
		return ""
	}
	return s[j+len(start) : i]
}

// The chart counts the table's source, and its title says which; for
// every source it counts every call.
func TestAudit_ChartFollowsSource(t *testing.T) {
	f := newFake(mcpgate.RoleMember)
	_, body := get(t, mustHandler(t, f), "/app/w/ws1/audit", testUser)
	if f.lastSource != "mcp" || !strings.Contains(body, "Tool calls from AI clients, last 24 hours") ||
		!strings.Contains(body, "2 calls") {
		t.Errorf("default chart: source %q; title or count missing", f.lastSource)
	}
	_, body = get(t, mustHandler(t, f), "/app/w/ws1/audit?source=all", testUser)
	if f.lastSource != "" || !strings.Contains(body, ">Tool calls, last 24 hours<") || !strings.Contains(body, "5 calls") {
		t.Errorf("every source: chart asked for source %q or mislabelled", f.lastSource)
	}
}
