package conformance_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil/conformance"
)

// generations are the two protocol generations, each served as the suite
// runs the reference server for it.
var generations = []struct {
	spec string
	opts conformance.ReferenceOptions
}{
	{spec: "2025-11-25", opts: conformance.ReferenceOptions{Stateless: false}},
	{spec: "2026-07-28", opts: conformance.ReferenceOptions{Stateless: true}},
}

// TestReference_Baseline runs the suite's active server scenarios against
// the reference server directly, for each protocol generation, and logs
// the scenarios that pass: the baseline the gateway's per-server endpoint
// must match. The baseline is computed here, not listed; the reference
// server failing one of them means the reference (or the suite) moved and
// the baseline must be read again.
func TestReference_Baseline(t *testing.T) {
	suite := conformance.Install(t)
	for _, g := range generations {
		t.Run(g.spec, func(t *testing.T) {
			url := conformance.StartReference(t, g.opts)
			start := time.Now()
			results := suite.Run(t, url, conformance.Options{SpecVersion: g.spec})
			t.Logf("%d scenarios in %s", len(results), time.Since(start).Round(time.Millisecond))
			var table strings.Builder
			for _, r := range results {
				fmt.Fprintf(&table, "  %-8s %-32s %d checks %s\n", r.Status, r.Scenario, len(r.Checks), r.Message)
			}
			t.Logf("against the reference server:\n%s", table.String())
			passed := conformance.Names(results, conformance.Passed)
			t.Logf("baseline (%d passed): %s", len(passed), strings.Join(passed, " "))
			if len(passed) == 0 {
				t.Fatal("no scenario passed against the reference server")
			}
			for _, r := range results {
				if r.Status == conformance.Failed {
					t.Errorf("the reference server fails %s: %s", r.Scenario, r.Message)
				}
			}
		})
	}
}

// TestReference_Subset runs chosen scenarios one suite process each, in
// the order given: one that the reference server passes, and one that the
// suite does not apply at the revision, which is skipped with its reason
// (each process costs a Node start, so two).
func TestReference_Subset(t *testing.T) {
	suite := conformance.Install(t)
	url := conformance.StartReference(t, conformance.ReferenceOptions{})
	chosen := []string{"tools-call-simple-text", "server-stateless"}
	start := time.Now()
	got := suite.Run(t, url, conformance.Options{Scenarios: chosen, SpecVersion: "2025-11-25"})
	t.Logf("%d scenarios one process each in %s", len(chosen), time.Since(start).Round(time.Millisecond))
	if len(got) != len(chosen) {
		t.Fatalf("Run(%v) = %d results, want %d", chosen, len(got), len(chosen))
	}
	for i, want := range []conformance.Status{conformance.Passed, conformance.Skipped} {
		if got[i].Scenario != chosen[i] || got[i].Status != want {
			t.Errorf("result %d = %s %s (%s), want %s %s", i, got[i].Scenario, got[i].Status, got[i].Message, chosen[i], want)
		}
	}
	if !strings.Contains(got[1].Message, "not applicable") {
		t.Errorf("skip message = %q, want the suite's reason", got[1].Message)
	}
}

// TestEverything_Baseline runs the active suite against the npm
// everything server under Node and logs what passes there directly: a
// second baseline, from a server that is not the suite's reference (most
// scenarios name tools it lacks), so only some pass and none is required;
// the failures show the harness reading them.
func TestEverything_Baseline(t *testing.T) {
	suite := conformance.Install(t)
	url := conformance.StartEverything(t)
	start := time.Now()
	results := suite.Run(t, url, conformance.Options{})
	passed := conformance.Names(results, conformance.Passed)
	t.Logf("%d scenarios in %s; baseline (%d passed): %s", len(results), time.Since(start).Round(time.Millisecond), len(passed), strings.Join(passed, " "))
	if len(passed) == 0 {
		t.Fatal("no scenario passed against the everything server")
	}
	// Its failures are read with the suite's reasons (here, mostly the
	// reference's tool names it lacks).
	failed := conformance.Names(results, conformance.Failed)
	if len(failed) == 0 {
		t.Errorf("no scenario failed against a server that lacks the reference's tools")
	}
	for _, r := range results {
		if r.Status == conformance.Failed && r.Message == "" {
			t.Errorf("%s failed with no message: %+v", r.Scenario, r.Checks)
		}
	}
	t.Logf("failed there (%d): %s", len(failed), strings.Join(failed, " "))
}
