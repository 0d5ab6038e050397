package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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

// Review proof: text the upstream chooses reaches the admin's error
// message, the server's last_error (shown on the dashboard) and the audit
// row uncut: here a protocolVersion of 100 KiB in the initialize answer.
func TestReview_UpstreamTextInMessagesIsBounded(t *testing.T) {
	ctx := context.Background()
	e := newServersEnv(t, loopbackNetwork)
	long := strings.Repeat("v", 100<<10)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad", http.StatusMethodNotAllowed)
			return
		}
		if req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"protocolVersion":"` + long +
			`","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}}`))
	}))
	t.Cleanup(ts.Close)
	_, admin := e.NewUser(t, "admin@example.com")
	_, err := e.svc.AddServer(ctx, admin, mcpgate.ServerInput{Name: "raw", URL: ts.URL + "/mcp"})
	if err == nil {
		t.Fatal("AddServer() accepted an unknown protocol version")
	}
	if n := len(mcpgate.ErrorMessage(err)); n > 2048 {
		t.Errorf("the error message is %d bytes of the upstream's text", n)
	}
	for _, ev := range e.Audit.Events() {
		if n := len(ev.Message); n > 2048 {
			t.Errorf("audit %s message is %d bytes of the upstream's text", ev.Action, n)
		}
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
