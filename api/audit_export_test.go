package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/internal/service"
)

// recordingAuditor keeps what the API records.
type recordingAuditor struct {
	mu     sync.Mutex
	events []mcpgate.AuditEvent
}

func (a *recordingAuditor) Record(_ context.Context, ev mcpgate.AuditEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, ev)
}

func (a *recordingAuditor) Saturated() bool { return false }

func (a *recordingAuditor) find(action string) *mcpgate.AuditEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.events {
		if a.events[i].Action == action {
			return &a.events[i]
		}
	}
	return nil
}

// auditFixture is a team whose workspace has tool calls by the owner (MCP)
// and the member (one MCP, one dashboard), and an owner's personal
// workspace with calls of its own that the team's export must never show.
func auditFixture(t *testing.T) (*testServer, *team, *recordingAuditor, string) {
	t.Helper()
	rec := &recordingAuditor{}
	ts := newTestServer(t, api.Options{}, func(o *service.Options) { o.Audit = rec })
	tm := mustTeam(t, ts)
	ctx := context.Background()
	wss, err := ts.db.WorkspacesOfUser(ctx, tm.ownerID)
	if err != nil {
		t.Fatal(err)
	}
	personal := ""
	for _, w := range wss {
		if w.ID != tm.ws {
			personal = w.ID
		}
	}
	now := time.Now().UTC().Truncate(time.Second)
	ev := func(ws, actor, src, msg string, ago time.Duration) mcpgate.AuditEvent {
		return mcpgate.AuditEvent{WorkspaceID: ws, ActorID: actor, Kind: "tool_call", Action: "e2b_list_sandboxes",
			Arguments: map[string]any{"state": "running"}, Outcome: mcpgate.OutcomeOK, Message: msg, Source: mcpgate.Source(src),
			DurationMS: 1.5, CreatedAt: now.Add(-ago)}
	}
	if err := ts.db.InsertAudit(ctx, []mcpgate.AuditEvent{
		ev(tm.ws, tm.ownerID, "mcp", "", 3*time.Hour),
		ev(tm.ws, tm.memberID, "mcp", "=HYPERLINK(\"http://evil\")", 2*time.Hour),
		ev(tm.ws, tm.memberID, "dashboard", "", time.Hour),
		ev(personal, tm.ownerID, "mcp", "personal", time.Hour),
	}); err != nil {
		t.Fatalf("InsertAudit() err = %v", err)
	}
	return ts, tm, rec, personal
}

func decodeNDJSON(t *testing.T, body []byte) []mcpgate.AuditEvent {
	t.Helper()
	var out []mcpgate.AuditEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var e mcpgate.AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("NDJSON line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func TestAuditExport_VisibilityFormatsAndScope(t *testing.T) {
	_, tm, rec, personal := auditFixture(t)
	base := "/api/v1/workspaces/" + tm.ws + "/audit/export"

	t.Run("admin gets every row of the workspace, oldest first, and nothing else", func(t *testing.T) {
		tm.admin.t = t
		r := tm.admin.do("GET", base+"?format=ndjson", nil).wantStatus(t, http.StatusOK)
		if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Errorf("Content-Type = %q", ct)
		}
		if cd := r.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, `attachment; filename="audit-`+tm.ws) ||
			!strings.HasSuffix(cd, `.ndjson"`) {
			t.Errorf("Content-Disposition = %q", cd)
		}
		rows := decodeNDJSON(t, r.Body)
		if len(rows) != 3 {
			t.Fatalf("admin export = %d rows, want 3", len(rows))
		}
		for i, e := range rows {
			if e.WorkspaceID != tm.ws || e.Message == "personal" {
				t.Fatalf("admin export has a row of workspace %s", e.WorkspaceID)
			}
			if i > 0 && e.CreatedAt.Before(rows[i-1].CreatedAt) {
				t.Fatalf("export not oldest first")
			}
		}
		if rows[0].Arguments["state"] != "running" || rows[0].DurationMS != 1.5 || rows[0].Source != "mcp" {
			t.Errorf("first row = %+v", rows[0])
		}
	})
	t.Run("member gets only their own rows", func(t *testing.T) {
		tm.member.t = t
		rows := decodeNDJSON(t, tm.member.do("GET", base+"?actor="+tm.ownerID, nil).wantStatus(t, http.StatusOK).Body)
		if len(rows) != 2 {
			t.Fatalf("member export = %d rows, want their 2", len(rows))
		}
		for _, e := range rows {
			if e.ActorID != tm.memberID {
				t.Fatalf("member export has a row of %s", e.ActorID)
			}
		}
	})
	t.Run("filters: source and since", func(t *testing.T) {
		tm.owner.t = t
		rows := decodeNDJSON(t, tm.owner.do("GET", base+"?source=mcp", nil).wantStatus(t, http.StatusOK).Body)
		if len(rows) != 2 {
			t.Fatalf("source=mcp export = %d rows, want 2", len(rows))
		}
		since := time.Now().UTC().Add(-150 * time.Minute).Format(time.RFC3339)
		rows = decodeNDJSON(t, tm.owner.do("GET", base+"?since="+since, nil).wantStatus(t, http.StatusOK).Body)
		if len(rows) != 2 {
			t.Fatalf("since export = %d rows, want 2", len(rows))
		}
	})
	t.Run("csv with a header and formulas defused", func(t *testing.T) {
		tm.owner.t = t
		r := tm.owner.do("GET", base+"?format=csv", nil).wantStatus(t, http.StatusOK)
		if ct := r.Header.Get("Content-Type"); ct != "text/csv; charset=utf-8" {
			t.Errorf("Content-Type = %q", ct)
		}
		recs, err := csv.NewReader(bytes.NewReader(r.Body)).ReadAll()
		if err != nil {
			t.Fatalf("parse CSV: %v", err)
		}
		if len(recs) != 4 || strings.Join(recs[0], ",") != "id,created_at,workspace_id,kind,action,source,actor_id,actor_email,"+
			"key_id,outcome,upstream_status,duration_ms,message,arguments" {
			t.Fatalf("CSV = %q", recs)
		}
		if msg := recs[2][12]; msg != `'=HYPERLINK("http://evil")` {
			t.Errorf("formula cell = %q, want it prefixed with an apostrophe", msg)
		}
		if recs[1][13] != `{"state":"running"}` || recs[1][7] != "owner@example.com" {
			t.Errorf("CSV row = %q", recs[1])
		}
	})
	t.Run("another workspace's export is not found", func(t *testing.T) {
		tm.member.t = t
		tm.member.do("GET", "/api/v1/workspaces/"+personal+"/audit/export", nil).wantStatus(t, http.StatusNotFound)
	})
	t.Run("bad parameters", func(t *testing.T) {
		tm.owner.t = t
		for _, q := range []string{"?format=xml", "?since=yesterday", "?actor=nope"} {
			if code := tm.owner.do("GET", base+q, nil).wantStatus(t, http.StatusBadRequest).errorCode(t); code != mcpgate.EInvalid {
				t.Errorf("GET export%s code = %s", q, code)
			}
		}
	})
	t.Run("the export is itself audited", func(t *testing.T) {
		e := rec.find("audit.exported")
		if e == nil || e.Source != "dashboard" || e.Kind != "admin" || e.WorkspaceID != tm.ws {
			t.Fatalf("audit.exported event = %+v", e)
		}
	})
}

func TestAuditList_SourceFilter(t *testing.T) {
	_, tm, _, _ := auditFixture(t)
	var body struct {
		Items []mcpgate.AuditEvent `json:"items"`
	}
	tm.owner.do("GET", "/api/v1/workspaces/"+tm.ws+"/audit?source=dashboard", nil).wantStatus(t, http.StatusOK).decode(t, &body)
	if len(body.Items) != 1 || body.Items[0].Source != "dashboard" {
		t.Fatalf("GET audit?source=dashboard = %+v, want the one dashboard call", body.Items)
	}
}
