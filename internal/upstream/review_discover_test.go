package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// reviewPager is a hand-written MCP server whose tools/list answers pages
// of tools forever (well: maxPages of them), each page just under the cap.
func reviewPager(t *testing.T, pageBytes int, name func(page int) string) string {
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

// Review proof: the byte cap holds per list request, and a list may have
// maxPages (100) pages, for each of tools, prompts, resources and
// templates: one discovery may hold 400 times MaxAnswerBytes (4 GiB at the
// 10 MiB default) in memory, then in the database and in every API answer
// and dashboard page of the server. Nothing bounds the catalog as a whole.
func TestReview_DiscoveryCatalogIsBounded(t *testing.T) {
	const limit = 64 << 10
	url := reviewPager(t, limit-1024, func(page int) string { return fmt.Sprintf("t%d", page) })
	p := newPool(t, Options{Limits: Limits{MaxAnswerBytes: limit}})
	c, err := p.Discover(context.Background(), Target{URL: url})
	if err != nil {
		return // refused: bounded
	}
	total := 0
	for _, tool := range c.Tools {
		total += len(tool.Raw)
	}
	if total > 4*limit {
		t.Errorf("Discover() kept %d tools, %d bytes of definitions, with a %d-byte answer cap (%dx)", len(c.Tools), total, limit, total/limit)
	}
}

// Review proof (low): the pin's canonical form writes numbers as float64
// (RFC 8785), so two schemas that an arbitrary-precision validator (Python's
// jsonschema, Postgres numeric) reads differently pin alike: a maximum
// moved from 2^53+1 to 2^53 is no change to the pin.
func TestReview_PinSeesEveryNumber(t *testing.T) {
	a, err := ParseTool(json.RawMessage(`{"name":"pay","inputSchema":{"type":"object","properties":{"cents":{"type":"integer","maximum":9007199254740993}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseTool(json.RawMessage(`{"name":"pay","inputSchema":{"type":"object","properties":{"cents":{"type":"integer","maximum":9007199254740992}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := Pin(a)
	pb, _ := Pin(b)
	if pa == pb {
		t.Errorf("Pin() is %s for both maxima 9007199254740993 and 9007199254740992", pa)
	}
}
