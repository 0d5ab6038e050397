package service_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/upstream/upstreamtest"
)

// Review proof: the URL's query is treated as a credential by the audit
// (auditURL) and the hop's redactor, yet every member reads it whole in
// the API answer (and the dashboard, which shows Server.URL).
func TestReview_URLQueryCredentialNotShownToMembers(t *testing.T) {
	ctx := context.Background()
	e := newServersEnv(t, loopbackNetwork)
	up := upstreamtest.New(t, fixtureTools()...)
	_, admin := e.NewUser(t, "admin@example.com")
	if _, err := e.svc.AddServer(ctx, admin, mcpgate.ServerInput{Name: "files", URL: up.URL + "?api_key=q-secret-0123456789"}); err != nil {
		t.Fatal(err)
	}
	member := *admin
	member.Role = mcpgate.RoleMember
	srv, err := e.svc.Server(ctx, &member, "files")
	if err != nil {
		t.Fatal(err)
	}
	list, _ := e.svc.Servers(ctx, &member)
	if b := mustServerJSON(t, []any{srv, list}); strings.Contains(b, "q-secret-0123456789") {
		t.Errorf("a member's answer holds the URL's api_key: %s", srv.URL)
	}
}

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
