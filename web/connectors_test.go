package web

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// acme is a second connector as it describes itself: the dashboard renders
// it from that description alone, beside E2B, with no line of its own.
var acme = mcpgate.ConnectorInfo{Name: "acme", Title: "Acme", Connect: mcpgate.ConnectGuide{
	Title: "Connect your Acme account", Summary: "Paste an Acme token.", Action: "Connect Acme",
	Label: "Acme token", Placeholder: "acme-…", Hint: "Tokens start with acme-.", Steps: []string{"Open Acme settings."},
}}

func TestConnections_EveryConnectorInItsOwnWords(t *testing.T) {
	f := newFake(mcpgate.RoleOwner)
	f.conn = nil
	f.more = []mcpgate.ConnectorInfo{acme}
	h := mustHandler(t, f)
	_, body := get(t, h, "/app/w/ws1/connections", testUser)
	for _, want := range []string{
		`data-api-path="/api/v1/workspaces/ws1/connections/e2b"`, "Connect your E2B team", `placeholder="e2b_…"`,
		`data-api-path="/api/v1/workspaces/ws1/connections/acme"`, "Connect your Acme account", `<label for="key-acme">Acme token</label>`,
		`placeholder="acme-…"`, "Tokens start with acme-.", "Where to find your Acme token", "<li>Open Acme settings.</li>",
		"<h1>Connections</h1>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("connections page lacks %q", want)
		}
	}
	_, body = get(t, h, "/app/w/ws1", testUser)
	for _, want := range []string{"Connect your E2B team", "Connect your Acme account", "Paste an Acme token.",
		`href="/app/w/ws1/connections#connect-acme"`, "Acme connection"} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	_, body = get(t, h, "/app/w/ws1/keys", testUser)
	if !strings.Contains(body, "E2B and Acme is not connected yet") {
		t.Errorf("keys page does not name both unconnected connectors")
	}
}

// With E2B alone, the pages read as they did when they named it
// themselves.
func TestConnections_OneConnectorNamesItself(t *testing.T) {
	f := newFake(mcpgate.RoleOwner)
	h := mustHandler(t, f)
	_, body := get(t, h, "/app/w/ws1/connections", testUser)
	for _, want := range []string{"<h1>E2B connection</h1>", "<title>E2B connection", "Replace the key",
		"Where to find your E2B team API key", `href="https://e2b.dev/dashboard?tab=keys"`} {
		if !strings.Contains(body, want) {
			t.Errorf("connections page lacks %q", want)
		}
	}
	_, body = get(t, h, "/", nil)
	if !strings.Contains(body, "MCP gateway for E2B sandboxes") || !strings.Contains(body, "Connect E2B") {
		t.Errorf("landing page does not name the connector")
	}
}

// The guardrail settings are worded as the connector that enforces them
// describes them.
func TestSettings_GuardrailsInTheConnectorsWords(t *testing.T) {
	f := newFake(mcpgate.RoleOwner)
	h := mustHandler(t, f)
	_, body := get(t, h, "/app/w/ws1/settings", testUser)
	l := connectors.Info(e2bView).Guardrails
	for _, want := range []string{l.Intro, `<label for="g-running">` + l.MaxRunning + `</label>`, l.MaxTimeoutHint, l.AllowedTemplatesHint} {
		if want == "" || !strings.Contains(body, want) {
			t.Errorf("settings page lacks %q", want)
		}
	}
}
