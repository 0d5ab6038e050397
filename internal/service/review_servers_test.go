package service_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/upstream/upstreamtest"
)

// Review proof (low): a header's value is held to 8 KiB, its name to
// nothing but the request body (64 KiB): it is sealed, kept in the hints
// every member reads, and sent on every request to the upstream.
func TestReview_HeaderNameIsBounded(t *testing.T) {
	e := newServersEnv(t, loopbackNetwork)
	up := upstreamtest.New(t, fixtureTools()...)
	_, admin := e.NewUser(t, "admin@example.com")
	name := "X-" + strings.Repeat("a", 16<<10)
	_, err := e.svc.AddServer(context.Background(), admin, mcpgate.ServerInput{Name: "files", URL: up.URL,
		Headers: map[string]mcpgate.Secret{name: "value-0123456789"}})
	if err == nil {
		t.Errorf("AddServer accepted a header name of %d bytes", len(name))
	}
}
