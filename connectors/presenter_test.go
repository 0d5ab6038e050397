package connectors_test

import (
	"context"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// bare is a connector with nothing but the required methods.
type bare struct{}

func (bare) Name() string                                          { return "acme" }
func (bare) CheckCredential(context.Context, mcpgate.Secret) error { return nil }
func (bare) CredentialHint(mcpgate.Secret) string                  { return "…" }
func (bare) Tools() []*connectors.Tool                             { return nil }

func TestInfo_GenericGuide(t *testing.T) {
	info := connectors.Info(bare{})
	if info.Name != "acme" || info.Title != "acme" || info.Plural != "" {
		t.Errorf("names = %+v", info)
	}
	if info.Connect.Title != "Connect acme" || info.Connect.Action != "Connect acme" || info.Connect.Label != "acme credential" {
		t.Errorf("generic guide = %+v", info.Connect)
	}
	if info.Guardrails != (mcpgate.GuardrailLabels{}) {
		t.Errorf("a connector without guardrails got labels %+v", info.Guardrails)
	}
}

// detector answers only from its answerAt-th question on.
type detector struct {
	asked, answerAt int
	demo            bool
}

func (d *detector) DetectDemo(context.Context) (demo, answered bool) {
	d.asked++
	return d.demo, d.asked >= d.answerAt
}

func TestDemoProbe(t *testing.T) {
	var nilProbe *connectors.DemoProbe
	if nilProbe.On() {
		t.Errorf("nil probe On() = true")
	}
	var p connectors.DemoProbe
	p.Run(context.Background(), &detector{answerAt: 1, demo: true})
	if !p.On() {
		t.Errorf("probe of a simulator: On() = false")
	}
	var q connectors.DemoProbe
	q.Run(context.Background(), &detector{answerAt: 1})
	if q.On() {
		t.Errorf("probe of a real upstream: On() = true")
	}
	// A simulator that starts after the gateway is found on a retry.
	late := &detector{answerAt: 2, demo: true}
	var r connectors.DemoProbe
	r.Run(context.Background(), late)
	if !r.On() || late.asked != 2 {
		t.Errorf("probe of a simulator that answers late: On() = %v after %d questions", r.On(), late.asked)
	}
	// A cancelled context stops the retries.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	never := &detector{answerAt: 100, demo: true}
	var s connectors.DemoProbe
	s.Run(ctx, never)
	if s.On() || never.asked != 1 {
		t.Errorf("cancelled probe: On() = %v after %d questions", s.On(), never.asked)
	}
}
