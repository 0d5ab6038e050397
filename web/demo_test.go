package web

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
)

func TestConnections_SaysDemoMode(t *testing.T) {
	for _, demo := range []bool{false, true} {
		f := newFake(mcpgate.RoleOwner)
		var asked []string
		h, err := newHandler(Options{Services: f.services(), Logger: slog.New(slog.DiscardHandler), PublicURL: "http://localhost:8080",
			Now: func() time.Time { return testNow }, Demo: func(c string) bool { asked = append(asked, c); return demo }})
		if err != nil {
			t.Fatal(err)
		}
		_, body := get(t, h, "/app/w/ws1/connections", testUser)
		if got := strings.Contains(body, `id="demo-e2b"`) && strings.Contains(body, "simulator"); got != demo {
			t.Errorf("demo %v: connections page shows the demo notice: %v", demo, got)
		}
		if demo && !strings.Contains(body, `data-set-value="#key-e2b" data-value="e2b_0123456789abcdef"`) {
			t.Errorf("demo notice without the connector's demo key")
		}
		if len(asked) != 1 || asked[0] != "e2b" {
			t.Errorf("demo asked about %q, want the registered connector", asked)
		}
		if _, body := get(t, h, "/app/w/ws1/keys", testUser); strings.Contains(body, `id="demo-e2b"`) {
			t.Errorf("demo notice on the keys page")
		}
	}
}
