package web

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
)

// A server that is down says so on its page and in the list: since when,
// why, and when the gateway tries again; one that is up says up.
func TestServerPages_ShowHealth(t *testing.T) {
	since, next := testNow.Add(-10*time.Minute), testNow.Add(20*time.Second)
	at := testNow.Add(-time.Hour)
	servers := &fakeServers{servers: []mcpgate.Server{
		{Name: "flaky", URL: "https://flaky.example.com/mcp", Enabled: true, Health: mcpgate.HealthError, DownSince: &since,
			NextCheckAt: &next, LastError: "3 calls in a row failed: the server answered HTTP 503", LastDiscoveredAt: &at},
		{Name: "fine", URL: "https://fine.example.com/mcp", Enabled: true, Health: mcpgate.HealthOK, LastDiscoveredAt: &at,
			NextCheckAt: &next},
	}}
	h, err := newHandler(Options{Services: newFake(mcpgate.RoleOwner).services(), Servers: servers,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), PublicURL: "https://gw.example.com/", Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	res, body := get(t, h, "/app/w/ws1/servers/flaky", testUser)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("server page = %d", res.StatusCode)
	}
	for _, want := range []string{`<span class="pill pill-error">down</span>`, "since 2026-09-01 11:50 UTC",
		"3 calls in a row failed: the server answered HTTP 503", `data-testid="next-check">next try`, "at 2026-09-01 12:00 UTC",
		"its tools are hidden from AI clients until it answers"} {
		if !strings.Contains(body, want) {
			t.Errorf("the down server's page lacks %q", want)
		}
	}
	if strings.Contains(body, "next-rediscovery") {
		t.Error("the down server's page names a re-discovery")
	}
	_, body = get(t, h, "/app/w/ws1/servers/fine", testUser)
	if !strings.Contains(body, `data-testid="next-rediscovery">2026-09-01 12:00 UTC`) {
		t.Error("the up server's page does not say when it is discovered again")
	}
	_, body = get(t, h, "/app/w/ws1/servers", testUser)
	if !strings.Contains(body, `<span class="pill pill-ok">up</span>`) || !strings.Contains(body, "since 2026-09-01 11:50 UTC") {
		t.Errorf("the servers page does not show each server's health: %s", body)
	}
	if strings.Count(body, `data-testid="next-check"`) != 1 {
		t.Error("the next try is shown for a server that is up")
	}
}
