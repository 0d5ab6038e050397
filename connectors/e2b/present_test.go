package e2b_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

func TestDetectDemo_SimulatorsHeader(t *testing.T) {
	if e2b.SimulatorHeader != e2bsim.SimulatorHeader || e2b.SimulatorValue != e2bsim.SimulatorHeaderValue {
		t.Fatalf("the connector looks for %s: %s, the simulator sends %s: %s", e2b.SimulatorHeader, e2b.SimulatorValue,
			e2bsim.SimulatorHeader, e2bsim.SimulatorHeaderValue)
	}
	sim := httptest.NewServer(e2bsim.New(e2bsim.Options{}))
	defer sim.Close()
	probe := connectors.DemoProbes(connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: sim.URL})))["e2b"]
	probe.Run(context.Background())
	if !probe.On() {
		t.Errorf("the probe of the real simulator says no demo")
	}
}

func TestDetectDemo(t *testing.T) {
	sim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(e2b.SimulatorHeader, e2b.SimulatorValue)
		http.Error(w, "unauthorized", http.StatusUnauthorized) // any answer counts
	}))
	defer sim.Close()
	real := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(e2b.SimulatorHeader, "something else")
	}))
	defer real.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()

	for _, tc := range []struct {
		name           string
		url            string
		demo, answered bool
	}{
		{"simulator", sim.URL + "/", true, true},
		{"real upstream", real.URL, false, true},
		{"nothing listening", down.URL, false, false},
	} {
		demo, answered := e2b.New(e2b.Options{BaseURL: tc.url}).DetectDemo(context.Background())
		if demo != tc.demo || answered != tc.answered {
			t.Errorf("%s: DetectDemo = %v, %v, want %v, %v", tc.name, demo, answered, tc.demo, tc.answered)
		}
	}
}

// The description the dashboard renders is E2B's own, complete enough for
// the connection page and the guardrails settings.
func TestInfo_E2B(t *testing.T) {
	info := connectors.Info(e2b.New(e2b.Options{}))
	if info.Name != "e2b" || info.Title != "E2B" || info.Plural != "sandboxes" {
		t.Errorf("names = %q %q %q", info.Name, info.Title, info.Plural)
	}
	g := info.Connect
	if g.Title != "Connect your E2B team" || g.Label == "" || g.Placeholder != "e2b_…" || len(g.Steps) == 0 || g.Demo == "" {
		t.Errorf("connect guide = %+v", g)
	}
	l := info.Guardrails
	if l.MaxTimeout == "" || l.MaxRunning == "" || l.AllowedTemplates == "" {
		t.Errorf("guardrail labels = %+v", l)
	}
}
