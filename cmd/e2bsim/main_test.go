package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestParseFlags(t *testing.T) {
	defaults := e2bsim.Options{MaxRunning: 20, Seed: 1, MaxLifetime: 24 * time.Hour, TransitionDelay: 500 * time.Millisecond}
	tests := []struct {
		name    string
		args    []string
		want    config
		wantErr bool
	}{
		{name: "defaults", want: config{listen: "127.0.0.1:3001", plan: "pro", opts: defaults}},
		{name: "all", args: []string{"--listen", ":9", "--team-key", "e2b_aa", "--team-key", "e2b_bb", "--max-running", "3",
			"--latency", "50ms", "--fail-rate", "0.1", "--seed", "7", "--plan", "hobby", "--transition", "0s", "--state", "s.json",
			"--control-listen", "127.0.0.1:9"},
			want: config{listen: ":9", control: "127.0.0.1:9", plan: "hobby", state: "s.json", opts: e2bsim.Options{TeamKeys: []string{"e2b_aa", "e2b_bb"},
				MaxRunning: 3, Latency: 50 * time.Millisecond, FailRate: 0.1, Seed: 7, MaxLifetime: time.Hour}}},
		{name: "fail rate over 1", args: []string{"--fail-rate", "2"}, wantErr: true},
		{name: "max running 0", args: []string{"--max-running", "0"}, wantErr: true},
		{name: "empty key", args: []string{"--team-key", " "}, wantErr: true},
		{name: "unknown plan", args: []string{"--plan", "enterprise"}, wantErr: true},
		{name: "negative transition", args: []string{"--transition", "-1s"}, wantErr: true},
		{name: "control API on the E2B listener", args: []string{"--listen", "127.0.0.1:9", "--control-listen", "127.0.0.1:9"}, wantErr: true},
		{name: "stray argument", args: []string{"serve"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseFlags(tt.args, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseFlags(%q) err = %v, wantErr %v", tt.args, err, tt.wantErr)
			}
			if err == nil {
				if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(config{}), cmpopts.IgnoreFields(e2bsim.Options{}, "Now")); d != "" {
					t.Errorf("parseFlags(%q) (-want +got):\n%s", tt.args, d)
				}
			}
		})
	}
}

// proc is one run of the program.
type proc struct {
	log    *testutil.LockedBuffer
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{log: &testutil.LockedBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- run(ctx, args, io.Discard, slog.New(slog.NewTextHandler(p.log, nil))) }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

var (
	addrRE        = regexp.MustCompile(`msg="e2bsim listening" addr=(\S+)`)
	controlAddrRE = regexp.MustCompile(`msg="e2bsim control API listening" addr=(\S+)`)
)

// addr waits for the "listening" line and returns its address.
func (p *proc) addr(t *testing.T) string {
	t.Helper()
	return p.logged(t, addrRE)
}

// logged waits for a line matching re and returns its first group.
func (p *proc) logged(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(p.log.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-p.done:
			t.Fatalf("run() ended early: %v\n%s", err, p.log)
		default:
		}
	}
	t.Fatalf("no line matching %s:\n%s", re, p.log)
	return ""
}

func (p *proc) stop(t *testing.T) error {
	t.Helper()
	p.cancel()
	select {
	case err, ok := <-p.done:
		if ok {
			close(p.done)
		}
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("run() did not stop")
		return nil
	}
}

func TestRun_shutdown(t *testing.T) {
	p := start(t, "--listen", "127.0.0.1:0")
	p.addr(t)
	if err := p.stop(t); err != nil {
		t.Fatalf("run() err = %v, want a clean shutdown", err)
	}
}

// TestRun_portTaken: a taken port is the error, with no "listening" line
// before it.
func TestRun_portTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var log testutil.LockedBuffer
	err = run(context.Background(), []string{"--listen", ln.Addr().String()}, io.Discard, slog.New(slog.NewTextHandler(&log, nil)))
	if err == nil || !strings.Contains(err.Error(), "cannot listen on "+ln.Addr().String()) {
		t.Fatalf("run() err = %v, want it to say it cannot listen", err)
	}
	if strings.Contains(log.String(), "listening") {
		t.Errorf("log says listening although the port was taken:\n%s", log.String())
	}
}

// TestRun_state: sandboxes survive a restart with --state, and a corrupt
// state file stops the start with an error naming it.
func TestRun_state(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.json")
	const key = "e2b_0123abcd"
	request := func(addr, method, path, body string) *http.Response {
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	p := start(t, "--listen", "127.0.0.1:0", "--state", path)
	addr := p.addr(t)
	resp := request(addr, "POST", "/sandboxes", `{"templateID":"base","timeout":3600}`)
	b, _ := io.ReadAll(resp.Body)
	id := regexp.MustCompile(`"sandboxID":"(i[a-z0-9]{20})"`).FindSubmatch(b)
	if resp.StatusCode != http.StatusCreated || id == nil {
		t.Fatalf("create = %d %s", resp.StatusCode, b)
	}
	if resp.Header.Get("X-E2B-Simulator") != "mcpgate-e2bsim" {
		t.Errorf("X-E2B-Simulator = %q", resp.Header.Get("X-E2B-Simulator"))
	}
	// Saved on the timer, before any shutdown.
	for deadline := time.Now().Add(3 * saveEvery); ; time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, id[1]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("state file not written after a change")
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode = %v, %v; want 0600", fi.Mode(), err)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}

	p = start(t, "--listen", "127.0.0.1:0", "--state", path)
	addr = p.addr(t)
	if got := request(addr, "GET", "/sandboxes/"+string(id[1]), "").StatusCode; got != http.StatusOK {
		t.Errorf("sandbox after restart = %d, want 200", got)
	}
	p.stop(t)

	if err := os.WriteFile(path, []byte(`{"version":1,"sandboxes":[{`), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"--listen", "127.0.0.1:0", "--state", path}, io.Discard, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("run() with a corrupt state file err = %v, want an error naming the file", err)
	}
}

// TestRun_control: with --control-listen, faults switched on the control
// address apply to the E2B listener at once, and the E2B listener itself
// never serves the control API. Without the flag there is no control API.
func TestRun_control(t *testing.T) {
	const key = "e2b_0123abcd"
	status := func(method, url string) int {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	ctx := context.Background()
	p := start(t, "--listen", "127.0.0.1:0", "--control-listen", "127.0.0.1:0")
	api, control := "http://"+p.addr(t), e2bsim.ControlClient{URL: "http://" + p.logged(t, controlAddrRE)}
	if err := control.SetFaults(ctx, e2bsim.Fault{Path: "/v2/sandboxes", Status: 503}); err != nil {
		t.Fatal(err)
	}
	if st := status("GET", api+"/v2/sandboxes"); st != 503 {
		t.Errorf("GET /v2/sandboxes with a 503 switched on = %d", st)
	}
	if st := status("DELETE", api+e2bsim.ControlPath); st != http.StatusNotFound {
		t.Errorf("DELETE %s on the E2B listener = %d, want 404 (no such E2B route)", e2bsim.ControlPath, st)
	}
	if fs, err := control.Faults(ctx); err != nil || len(fs) != 1 {
		t.Errorf("faults after a DELETE on the E2B listener = %v, %v; want the one still in force", fs, err)
	}
	if err := control.SetFaults(ctx); err != nil {
		t.Fatal(err)
	}
	if st := status("GET", api+"/v2/sandboxes"); st != 200 {
		t.Errorf("GET /v2/sandboxes after clearing = %d", st)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}

	p = start(t, "--listen", "127.0.0.1:0")
	p.addr(t)
	if strings.Contains(p.log.String(), "control API") {
		t.Errorf("a control API started without --control-listen:\n%s", p.log)
	}
}
