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
	p := connectors.NewDemoProbe(&detector{answerAt: 1, demo: true})
	p.Run(context.Background())
	if !p.On() {
		t.Errorf("probe of a simulator: On() = false")
	}
	q := connectors.NewDemoProbe(&detector{answerAt: 1})
	q.Run(context.Background())
	if q.On() {
		t.Errorf("probe of a real upstream: On() = true")
	}
	// A simulator that starts after the gateway is found on a retry.
	late := &detector{answerAt: 2, demo: true}
	r := connectors.NewDemoProbe(late)
	r.Run(context.Background())
	if !r.On() || late.asked != 2 {
		t.Errorf("probe of a simulator that answers late: On() = %v after %d questions", r.On(), late.asked)
	}
	// A cancelled context stops the retries.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	never := &detector{answerAt: 100, demo: true}
	s := connectors.NewDemoProbe(never)
	s.Run(ctx)
	if s.On() || never.asked != 1 {
		t.Errorf("cancelled probe: On() = %v after %d questions", s.On(), never.asked)
	}
}

func TestDemoProbes_OnlyConnectorsThatDetect(t *testing.T) {
	probes := connectors.DemoProbes(connectors.NewRegistry(bare{}))
	if len(probes) != 0 {
		t.Errorf("a connector without DemoDetector got a probe: %v", probes)
	}
	if probes["acme"].On() {
		t.Errorf("a missing probe says demo")
	}
}
