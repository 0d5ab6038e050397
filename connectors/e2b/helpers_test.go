package e2b_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

const testKey = mcpgate.Secret("e2b_0123456789abcdef")

// env is a simulator over real HTTP and a connector pointed at it, sharing
// one manual clock. Every tool output and error text that passes through
// call is scanned for the simulator's secrets when the test ends.
type env struct {
	t     *testing.T
	sim   *e2bsim.Server
	srv   *httptest.Server
	clock *e2bsim.ManualClock
	conn  *e2b.Connector

	mu    sync.Mutex
	texts []string
}

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newEnv(t *testing.T, opts e2bsim.Options) *env {
	t.Helper()
	clock := e2bsim.NewManualClock(epoch)
	if opts.Now == nil {
		opts.Now = clock.Now
	}
	sim := e2bsim.New(opts)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	e := &env{t: t, sim: sim, srv: srv, clock: clock, conn: e2b.New(e2b.Options{
		BaseURL: srv.URL, DashboardURL: srv.URL, HTTPClient: srv.Client(), Timeout: 2 * time.Second, Now: clock.Now,
	})}
	t.Cleanup(e.checkSecrets)
	return e
}

func (e *env) tool(name string) *connectors.Tool {
	e.t.Helper()
	for _, tl := range e.conn.Tools() {
		if tl.Name == name {
			return tl
		}
	}
	e.t.Fatalf("no tool %s", name)
	return nil
}

// call runs a tool with args (any JSON-able value) and returns its output as
// generic JSON.
func (e *env) call(name string, args any) (map[string]any, error) {
	e.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := e.tool(name).Call(context.Background(), testKey, raw)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.texts = append(e.texts, err.Error(), mcpgate.ErrorMessage(err))
		return nil, err
	}
	// Every result of every test must satisfy the schema the tool
	// publishes: MCP clients validate structured content against it.
	if err := e.tool(name).ValidateOutput(out); err != nil {
		e.t.Errorf("%s(%s): %v", name, raw, err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		e.t.Fatalf("%s: marshal output: %v", name, err)
	}
	e.texts = append(e.texts, string(b))
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("%s: output is not a JSON object: %s", name, b)
	}
	return m, nil
}

func (e *env) mustCall(name string, args any) map[string]any {
	e.t.Helper()
	out, err := e.call(name, args)
	if err != nil {
		e.t.Fatalf("%s(%v) err = %v", name, args, err)
	}
	return out
}

// assess decodes args as the gateway does and runs the tool's guard.
func (e *env) assess(tool, args string) (connectors.Assessment, error) {
	e.t.Helper()
	tl := e.tool(tool)
	if tl.Guard == nil {
		e.t.Fatalf("%s has no guard", tool)
	}
	decoded, err := tl.Decode([]byte(args))
	if err != nil {
		e.t.Fatalf("Decode(%s) err = %v", args, err)
	}
	return tl.Guard(context.Background(), testKey, decoded)
}

// pages calls a paged tool, passing each next_token back with the same
// arguments, until a page has none; it returns every page's output.
func (e *env) pages(name string, args map[string]any) []map[string]any {
	e.t.Helper()
	var pages []map[string]any
	for {
		out := e.mustCall(name, args)
		pages = append(pages, out)
		next, ok := out["next_token"].(string)
		if !ok {
			return pages
		}
		if len(pages) > 100 {
			e.t.Fatalf("%s: paging does not end", name)
		}
		args["next_token"] = next
	}
}

// itemIDs collects the field of every item listed under list, over pages.
func itemIDs(pages []map[string]any, list, field string) []string {
	var ids []string
	for _, out := range pages {
		for _, it := range out[list].([]any) {
			ids = append(ids, it.(map[string]any)[field].(string))
		}
	}
	return ids
}

// checkSecrets fails the test if any secret the simulator issued or was
// given appears in any output or error text seen.
func (e *env) checkSecrets() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.sim.Secrets() {
		for _, text := range e.texts {
			if strings.Contains(text, s) {
				e.t.Errorf("secret %q leaked in %s", s, text)
			}
		}
	}
}

// createRaw creates a sandbox straight through the client, with options the
// tools do not expose (network rules, proxy credentials, private traffic).
func (e *env) createRaw(in e2b.NewSandbox) string {
	e.t.Helper()
	s, err := e.conn.Client().CreateSandbox(context.Background(), testKey, in)
	if err != nil {
		e.t.Fatalf("CreateSandbox() err = %v", err)
	}
	return s.SandboxID
}

// create creates a sandbox with the tool and returns its id.
func (e *env) create(args map[string]any) string {
	e.t.Helper()
	return e.mustCall(e2b.ToolCreateSandbox, args)["sandbox_id"].(string)
}

// secretNetwork is a network config carrying every kind of secret E2B
// echoes back.
const secretNetwork = `{"allowPublicTraffic":false,"allowOut":["1.1.1.1"],"denyOut":["10.0.0.0/8"],
 "egressProxy":{"address":"proxy.example.com:1080","username":"proxy-user-s3cr3t","password":"proxy-pass-s3cr3t"},
 "rules":{"api.example.com":[{"transform":{"headers":{"Authorization":"Bearer rule-header-s3cr3t"}}}]}}`

func wantCode(t *testing.T, err error, code mcpgate.Code) {
	t.Helper()
	if got := mcpgate.ErrorCode(err); got != code {
		t.Fatalf("err = %v (code %q), want code %q", err, got, code)
	}
}

func do(t *testing.T, method, url string, key mcpgate.Secret, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", key.Reveal())
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
