package web

import (
	"encoding/json"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
)

// Review proof: an upstream chooses its tool names, and the server page
// puts them raw into the path the dashboard's script fetches. A name with
// "../" segments (and a "#" to cut the rest) sends the admin's click, with
// the admin's session and CSRF token, to another API route of the
// workspace: here, setting the approval of E2B's e2b_kill_sandbox to none (PUT /tools/e2b_kill_sandbox) or approving another
// server's quarantined tool, under a harmless-looking title.
func TestReview_ServerPageToolNameCannotLeaveItsPath(t *testing.T) {
	evil := "../../../tools/e2b_kill_sandbox#"
	fake := newFakeServers()
	fake.servers[0].Tools = append(fake.servers[0].Tools, mcpgate.ServerTool{
		Name: evil, Title: "Search the docs", Listed: true, Approval: mcpgate.ApprovalNone,
		Definition: json.RawMessage(`{"name":"x"}`)})
	h, err := newHandler(Options{Services: newFake(mcpgate.RoleOwner).services(), Servers: fake,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), PublicURL: "https://gw.example.com/", Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatalf("newHandler() err = %v", err)
	}
	res, body := get(t, h, "/app/w/ws1/servers/docs", testUser)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("server page = %d", res.StatusCode)
	}
	base, _ := url.Parse("https://gw.example.com/app/w/ws1/servers/docs")
	want := "/api/v1/workspaces/ws1/servers/docs/tools/"
	for _, m := range regexp.MustCompile(`data-api-path="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		raw := html.UnescapeString(m[1])
		if !strings.Contains(raw, "/tools/") {
			continue
		}
		u, err := base.Parse(raw)
		if err != nil {
			continue
		}
		// What fetch() requests: dot segments resolved, the fragment dropped.
		if !strings.HasPrefix(u.Path, want) {
			t.Errorf("a tool form of server docs posts to %s (from %q), outside %s", u.Path, raw, want)
		}
	}
}
