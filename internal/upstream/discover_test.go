package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ptr(b bool) *bool { return &b }

// TestDiscover_GoSDKServer discovers a go-sdk server, stateful (2025-11-25
// with a session) and stateless (2026-07-28): every capability, every page
// (the server pages by 3), and the annotations as declared.
func TestDiscover_GoSDKServer(t *testing.T) {
	for _, tt := range []struct {
		name      string
		stateless bool
		version   string
	}{
		{name: "stateful", version: "2025-11-25"},
		{name: "stateless", stateless: true, version: "2026-07-28"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			f := &fixture{stateless: tt.stateless}
			ts := f.serve(t)
			p := newPool(t, Options{})
			c, err := p.Discover(context.Background(), Target{URL: ts.URL})
			if err != nil {
				t.Fatalf("Discover() err = %v", err)
			}
			if c.ProtocolVersion != tt.version {
				t.Errorf("ProtocolVersion = %q, want %q", c.ProtocolVersion, tt.version)
			}
			var names []string
			byName := map[string]Tool{}
			for _, tool := range c.Tools {
				names = append(names, tool.Name)
				byName[tool.Name] = tool
			}
			want := []string{"bare", "big", "count", "delete", "fail", "media", "meta", "read", "silent", "sum", "wait", "write"}
			if diff := cmp.Diff(want, sortStrings(names)); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			if len(c.Prompts) != 1 || len(c.Resources) != 1 || len(c.ResourceTemplates) != 1 {
				t.Errorf("prompts, resources, templates = %d, %d, %d; want 1 each", len(c.Prompts), len(c.Resources), len(c.ResourceTemplates))
			}
			var init map[string]json.RawMessage
			if json.Unmarshal(c.Init, &init) != nil || init["capabilities"] == nil {
				t.Errorf("Init = %s, want the raw initialize result with capabilities", c.Init)
			}
			// go-sdk v1.8.0 always sends readOnlyHint and idempotentHint
			// (plain bools) once a tool has annotations, and omits a nil
			// destructiveHint/openWorldHint: those stay unset.
			checks := []struct {
				tool                               string
				readOnly, destructive, openWorld   *bool
				effReadOnly, effDestr, effOpenWrld bool
			}{
				{tool: "bare", effDestr: true, effOpenWrld: true},
				{tool: "read", readOnly: ptr(true), openWorld: ptr(false), effReadOnly: true, effDestr: true},
				{tool: "delete", readOnly: ptr(false), destructive: ptr(true), effDestr: true, effOpenWrld: true},
				{tool: "write", readOnly: ptr(false), destructive: ptr(false), effOpenWrld: true},
			}
			for _, ck := range checks {
				a := byName[ck.tool].Annotations
				if diff := cmp.Diff([]*bool{ck.readOnly, ck.destructive, ck.openWorld}, []*bool{a.ReadOnly, a.Destructive, a.OpenWorld}); diff != "" {
					t.Errorf("%s declared hints (-want +got):\n%s", ck.tool, diff)
				}
				if a.ReadOnlyHint() != ck.effReadOnly || a.DestructiveHint() != ck.effDestr || a.OpenWorldHint() != ck.effOpenWrld {
					t.Errorf("%s effective hints = %v %v %v", ck.tool, a.ReadOnlyHint(), a.DestructiveHint(), a.OpenWorldHint())
				}
			}
			if byName["sum"].OutputSchema == nil || byName["bare"].OutputSchema != nil {
				t.Errorf("output schemas: sum %s, bare %s; want one on sum only", byName["sum"].OutputSchema, byName["bare"].OutputSchema)
			}
			if p.Sessions() != 0 {
				t.Errorf("Sessions() = %d after Discover, want 0 (discovery uses a session of its own)", p.Sessions())
			}
		})
	}
}

// pagedServer is a hand-written MCP server whose tools/list answers
// maxPages pages of one tool each, whose description is pageBytes long.
func pagedServer(t *testing.T, pageBytes int, name func(page int) string) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad", http.StatusMethodNotAllowed)
			return
		}
		if req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var body string
		switch req.Method {
		case "initialize":
			body = `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"pager","version":"1"}}}`
		case "tools/list":
			page, _ := strconv.Atoi(req.Params.Cursor)
			next := ""
			if page+1 < maxPages {
				next = fmt.Sprintf(`,"nextCursor":"%d"`, page+1)
			}
			desc := strings.Repeat("d", pageBytes)
			body = `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"tools":[{"name":"` + name(page) +
				`","description":"` + desc + `","inputSchema":{"type":"object"}}]` + next + `}}`
		default:
			body = `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32601,"message":"method not found"}}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// One discovery reads at most MaxAnswerBytes in all: a cap per request
// alone let a server send maxPages answers just under it, for each of
// four lists (400 times the cap in memory, then in the database).
func TestDiscover_CatalogIsBoundedAsAWhole(t *testing.T) {
	const limit = 64 << 10
	url := pagedServer(t, limit-1024, func(page int) string { return fmt.Sprintf("t%d", page) })
	p := newPool(t, Options{Limits: Limits{MaxAnswerBytes: limit}})
	c, err := p.Discover(context.Background(), Target{URL: url})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindTooLarge {
		t.Fatalf("Discover() = %+v, err %v; want a %s error", c, err, KindTooLarge)
	}
	if !strings.Contains(e.Message, "catalog") {
		t.Errorf("Discover() message = %q, want it to name the catalog", e.Message)
	}
}

// A tool whose definition or description is beyond the per-tool bounds is
// marked invalid, with the reason, as other unreadable definitions are.
func TestDiscover_OversizedToolIsInvalid(t *testing.T) {
	def := func(name string, desc int) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"name": name, "description": strings.Repeat("d", desc)})
		return b
	}
	big, _ := json.Marshal(map[string]any{"name": "big", "inputSchema": map[string]any{"type": "object", "x": strings.Repeat("s", MaxToolDefinitionBytes)}})
	tools, invalid := parseTools([]json.RawMessage{def("ok", 100), def("wordy", MaxToolDescription+1), big})
	if len(tools) != 1 || tools[0].Name != "ok" {
		t.Errorf("parseTools() tools = %v, want only ok", tools)
	}
	if len(invalid) != 2 || !strings.Contains(invalid[0].Reason, "description") || !strings.Contains(invalid[1].Reason, "larger than") {
		t.Errorf("parseTools() invalid = %+v, want wordy (description) and big (size)", invalid)
	}
}
