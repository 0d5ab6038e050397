package web

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
)

// Browsers ask for /favicon.ico by themselves; a 404 there is a console
// error on every page.
func TestFavicon_Served(t *testing.T) {
	h := mustHandler(t, newFake(mcpgate.RoleOwner))
	for _, p := range []string{"/", "/app/w/ws1"} {
		_, body := get(t, h, p, testUser)
		icon := regexp.MustCompile(`<link rel="icon" href="(/static/favicon\.[0-9a-f]{12}\.svg)" type="image/svg\+xml">`).FindStringSubmatch(body)
		if icon == nil {
			t.Fatalf("GET %s has no <link rel=icon> to the hashed SVG", p)
		}
		if res, _ := get(t, h, icon[1], nil); res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "image/svg+xml" {
			t.Errorf("GET %s = %d %q, want 200 image/svg+xml", icon[1], res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
	res, body := get(t, h, "/favicon.ico", nil)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(body, "<svg") {
		t.Errorf("GET /favicon.ico = %d %q, want 200 with the SVG icon", res.StatusCode, res.Header.Get("Content-Type"))
	}
}
