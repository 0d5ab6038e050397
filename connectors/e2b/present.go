package e2b

import (
	"context"
	"net/http"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// How the dashboard presents E2B: the words are E2B's, so that the dashboard
// itself names no upstream.

var _ connectors.Presenter = (*Connector)(nil)
var _ connectors.DemoDetector = (*Connector)(nil)

// The bundled E2B simulator (cmd/e2bsim) marks every response with this
// header, so the gateway can tell a demo from the real E2B. They are
// internal/e2bsim's SimulatorHeader and SimulatorHeaderValue (a test checks),
// repeated so that the binary does not import the simulator.
const (
	SimulatorHeader = "X-E2B-Simulator"
	SimulatorValue  = "mcpgate-e2bsim"
)

// ConnectGuide implements connectors.Presenter.
func (c *Connector) ConnectGuide() mcpgate.ConnectGuide {
	return mcpgate.ConnectGuide{
		Title:       "Connect your E2B team",
		Summary:     "Paste your E2B team API key; it is checked with E2B and stored encrypted.",
		Action:      "Connect E2B",
		Label:       "E2B team API key",
		Placeholder: "e2b_…",
		Hint:        "It starts with e2b_. A personal access token (sk_e2b_…) will not work: use a team API key.",
		Steps: []string{
			"Open the E2B dashboard at e2b.dev/dashboard and sign in.",
			"Pick the team whose sandboxes you want to manage, then go to Team → API Keys.",
			"Create a key (for example “mcpgate”), copy it, and paste it above. E2B shows it only once.",
		},
		Link: "https://e2b.dev/dashboard?tab=keys",
		Tip:  "Tip: a dedicated key lets you revoke the gateway’s access in E2B without touching your other tools.",
		Demo: "This gateway talks to the bundled E2B simulator, not to E2B: any key shaped like e2b_ followed by hex digits " +
			"works (for example e2b_0123abcd), and its sandboxes are simulated and cost nothing.",
		DemoCredential: "e2b_0123456789abcdef",
	}
}

// GuardrailLabels implements connectors.Presenter: the workspace's
// guardrails are on sandboxes (their timeout, how many run, their template).
func (c *Connector) GuardrailLabels() mcpgate.GuardrailLabels {
	return mcpgate.GuardrailLabels{
		Intro:                "Limits on what AI clients may start or keep running, checked by the gateway before E2B is called.",
		MaxTimeout:           "Longest timeout (seconds)",
		MaxTimeoutHint:       "For creating, extending and resuming a sandbox.",
		MaxRunning:           "Most sandboxes running at once",
		MaxRunningHint:       "Beyond it, creating and resuming are refused.",
		AllowedTemplates:     "Allowed templates",
		AllowedTemplatesHint: "Template IDs or names, separated by commas.",
	}
}

// DetectDemo implements connectors.DemoDetector: it asks E2B_API_URL for
// /health and reads the simulator header from the answer, whatever its
// status.
func (c *Connector) DetectDemo(ctx context.Context) (demo, answered bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.client.base+"/health", nil)
	if err != nil {
		return false, true // a URL that cannot be asked will not become the simulator
	}
	res, err := c.client.http.Do(req)
	if err != nil {
		return false, false
	}
	_ = res.Body.Close()
	return res.Header.Get(SimulatorHeader) == SimulatorValue, true
}
