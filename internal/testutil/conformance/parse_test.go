package conformance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeScenario lays out what the suite leaves for one scenario: its
// result directory, with checks.json unless checks is nil.
func writeScenario(t *testing.T, dir, name string, checks []Check) {
	t.Helper()
	d := filepath.Join(dir, "server-"+name+"-2026-12-02T00-43-28-152Z")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if checks == nil {
		return
	}
	b, err := json.Marshal(checks)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "checks.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func check(id, status, msg string) Check {
	return Check{ID: id, Name: id, Status: status, Message: msg}
}

// TestParse_Suite reads a suite run's output: a pass, a failure with its
// message and warning, a scenario whose only checks were skipped, one
// whose only success is the wire check appended to every scenario, and one
// that threw before writing its checks; names that are prefixes of others
// find their own directories.
func TestParse_Suite(t *testing.T) {
	dir := t.TempDir()
	writeScenario(t, dir, "ping", []Check{check("ping", "SUCCESS", ""), check(wireCheck, "SUCCESS", "")})
	writeScenario(t, dir, "tools-call", []Check{check("tools-call", "FAILURE", "no content"), check("meta", "WARNING", "no _meta")})
	writeScenario(t, dir, "tools-call-image", []Check{check("tools-call-image", "SUCCESS", "")})
	writeScenario(t, dir, "tasks", []Check{check("tasks", "SKIPPED", "pending")})
	writeScenario(t, dir, "wire-only", []Check{check(wireCheck, "SUCCESS", ""), check("x", "INFO", "")})
	writeScenario(t, dir, "threw", nil)
	stdout := `Running active suite (6 scenarios) against http://127.0.0.1:1

=== Running scenario: ping ===
=== Running scenario: tools-call ===
=== Running scenario: tools-call-image ===
=== Running scenario: tasks ===
=== Running scenario: wire-only ===
=== Running scenario: threw ===

=== SUMMARY ===
✓ ping: 2 passed, 0 failed
✗ tools-call: 0 passed, 1 failed
✓ tools-call-image: 1 passed, 0 failed
✓ tasks: 0 passed, 0 failed
✓ wire-only: 1 passed, 0 failed
✗ threw: 0 passed, 1 failed

Total: 4 passed, 2 failed
`
	stderr := "Failed to run scenario threw: connect ECONNREFUSED 127.0.0.1:1\n    at stack\n"
	got, err := parse(dir, "", stdout, stderr)
	if err != nil {
		t.Fatalf("parse() err = %v", err)
	}
	want := []struct {
		name    string
		status  Status
		message string
	}{
		{"ping", Passed, ""},
		{"tools-call", Failed, "tools-call: no content; warning meta: no _meta"},
		{"tools-call-image", Passed, ""},
		{"tasks", Skipped, "no check of the scenario passed or failed"},
		{"wire-only", Skipped, "no check of the scenario passed or failed"},
		{"threw", Failed, "the scenario did not run to its end: connect ECONNREFUSED 127.0.0.1:1"},
	}
	if len(got) != len(want) {
		t.Fatalf("parse() = %d results, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if g := got[i]; g.Scenario != w.name || g.Status != w.status || g.Message != w.message {
			t.Errorf("result %d = %s %s %q, want %s %s %q", i, g.Scenario, g.Status, g.Message, w.name, w.status, w.message)
		}
	}
	if diff := cmp.Diff([]string{"ping", "tools-call-image"}, Names(got, Passed)); diff != "" {
		t.Errorf("Names(Passed) (-want +got):\n%s", diff)
	}
	if r := Index(got)["threw"]; r.Status != Failed {
		t.Errorf("Index()[threw] = %+v, want the failure", r)
	}
	if diff := cmp.Diff([]string{"ping"}, Without(Names(got, Passed), "tools-call-image", "absent")); diff != "" {
		t.Errorf("Without() (-want +got):\n%s", diff)
	}
}

// TestParse_Single reads single-scenario runs: a pass counted by the
// "Passed:" line, and a scenario the suite does not apply at the requested
// revision.
func TestParse_Single(t *testing.T) {
	dir := t.TempDir()
	writeScenario(t, dir, "ping", []Check{check("ping", "SUCCESS", ""), check(wireCheck, "SUCCESS", "")})
	got, err := parse(dir, "ping", "Running client scenario 'ping'\nChecks:\n\x1b[32mSUCCESS\x1b[0m\n\nTest Results:\nPassed: 2/2, 0 failed, 0 warnings\n", "")
	if err != nil || len(got) != 1 || got[0].Status != Passed || len(got[0].Checks) != 2 {
		t.Fatalf("parse(ping) = %+v, %v; want one pass with 2 checks", got, err)
	}

	dir = t.TempDir()
	writeScenario(t, dir, "server-stateless", nil)
	line := "SKIPPED: scenario 'server-stateless' is not applicable at spec version 2025-11-25 (introduced in 2026-07-28). Use --force to run it anyway."
	got, err = parse(dir, "server-stateless", line+"\n", "")
	if err != nil || len(got) != 1 || got[0].Status != Skipped || got[0].Message != line {
		t.Fatalf("parse(not applicable) = %+v, %v; want skipped with the suite's line", got, err)
	}
}

// TestParse_Disagreement fails a run whose files and printed counts
// disagree, or that left nothing to read: a change in the suite's output
// must not read as a pass.
func TestParse_Disagreement(t *testing.T) {
	tests := []struct {
		name   string
		stdout string
		lay    func(dir string)
		want   string
	}{
		{
			name:   "counts differ",
			stdout: "=== Running scenario: ping ===\n=== SUMMARY ===\n✓ ping: 3 passed, 0 failed\n",
			lay:    func(dir string) { writeScenario(t, dir, "ping", []Check{check("ping", "SUCCESS", "")}) },
			want:   "the suite printed 3 and 0",
		},
		{
			name:   "no summary",
			stdout: "=== Running scenario: ping ===\n",
			lay:    func(dir string) { writeScenario(t, dir, "ping", []Check{check("ping", "SUCCESS", "")}) },
			want:   "no summary",
		},
		{
			name:   "no directory",
			stdout: "=== Running scenario: ping ===\n=== SUMMARY ===\n✓ ping: 1 passed, 0 failed\n",
			lay:    func(string) {},
			want:   "no result directory",
		},
		{
			name:   "nothing ran",
			stdout: "Validation error:\n",
			lay:    func(string) {},
			want:   "no scenario ran",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.lay(dir)
			if _, err := parse(dir, "", tt.stdout, ""); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parse() err = %v, want %q", err, tt.want)
			}
		})
	}
}
