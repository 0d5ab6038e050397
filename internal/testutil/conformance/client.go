package conformance

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// RunClient runs one of the suite's client scenarios (an "auth/..." one)
// with drive as the client under test, and returns its Result. The suite
// starts the scenario's servers and runs a client command with the MCP
// server's URL; the command RunClient gives it only hands that URL to the
// test and waits, so that drive, in the test's own process, does what the
// client would (here: a gateway signing in to the server as its upstream)
// and the suite judges what reached its servers once drive returns.
// specVersion is the suite's --spec-version ("" its default).
//
// drive is also given the scenario's context (MCP_CONFORMANCE_CONTEXT, a
// JSON object or empty): what a scenario hands its client, such as the
// credentials of a client registered beforehand.
func (s Suite) RunClient(t testing.TB, scenario, specVersion string, timeout time.Duration, drive func(serverURL string, context []byte)) Result {
	t.Helper()
	dir := t.TempDir()
	urlFile, doneFile, ctxFile := filepath.Join(dir, "url"), filepath.Join(dir, "done"), filepath.Join(dir, "context")
	script := filepath.Join(dir, "client.sh")
	// The suite appends the server's URL as the last argument.
	body := `printf '%s' "$MCP_CONFORMANCE_CONTEXT" > "` + ctxFile + `"
echo "$1" > "` + urlFile + `.tmp" && mv "` + urlFile + `.tmp" "` + urlFile + `"
while [ ! -e "` + doneFile + `" ]; do sleep 0.05; done
`
	if err := os.WriteFile(script, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	args := []string{s.CLI, "client", "--command", "sh " + script, "--scenario", scenario, "-o", out}
	if specVersion != "" {
		args = append(args, "--spec-version", specVersion)
	}
	if timeout > 0 {
		args = append(args, "--timeout", strconv.FormatInt(timeout.Milliseconds(), 10))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Node, args...)
	cmd.Dir = filepath.Dir(s.CLI)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("conformance suite: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// The command ends when drive does, even when drive fails the test.
	defer func() { _ = os.WriteFile(doneFile, nil, 0o600) }()
	var err error
	waited := false
	for deadline := time.Now().Add(time.Minute); ; {
		if b, rerr := os.ReadFile(urlFile); rerr == nil {
			c, _ := os.ReadFile(ctxFile)
			drive(string(bytes.TrimSpace(b)), c)
			break
		}
		select {
		case err = <-exited:
			waited = true
		case <-time.After(20 * time.Millisecond):
		}
		if waited || time.Now().After(deadline) {
			break
		}
	}
	_ = os.WriteFile(doneFile, nil, 0o600)
	if !waited {
		err = <-exited
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("conformance suite: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	resultDir := filepath.Join(out, filepath.Dir(scenario))
	entries, rerr := os.ReadDir(resultDir)
	if rerr != nil {
		t.Fatalf("conformance suite (exit %v): %v\nstdout:\n%s\nstderr:\n%s", err, rerr, stdout.String(), stderr.String())
	}
	r, perr := readResultAs(resultDir, entries, filepath.Base(scenario), scenario, stripANSI(stdout.String()), stripANSI(stderr.String()))
	if perr != nil {
		t.Fatalf("conformance suite (exit %v): %v\nstdout:\n%s\nstderr:\n%s", err, perr, stdout.String(), stderr.String())
	}
	return r
}
