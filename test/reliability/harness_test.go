// Package reliability holds tests that run the real mcpgate and e2bsim
// binaries as subprocesses, so that faults are real: a PostgreSQL server
// stopped under the gateway, kill -9 in the middle of a write, an upstream
// that resets connections. TestMain builds both binaries once.
package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// bin holds the paths of the binaries TestMain built.
var bin struct{ mcpgate, e2bsim string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpgate-reliability-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.mcpgate = filepath.Join(dir, "mcpgate")
	bin.e2bsim = filepath.Join(dir, "e2bsim")
	for pkg, out := range map[string]string{"github.com/mcpgate/mcpgate/cmd/mcpgate": bin.mcpgate, "github.com/mcpgate/mcpgate/cmd/e2bsim": bin.e2bsim} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n", pkg, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freeAddr returns a loopback address nothing listens on, so that a
// restarted gateway comes back on the same URL.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// gwConfig is how a gateway process is started; the same config restarts
// the same instance.
type gwConfig struct {
	dsn, e2bURL, addr, encKey, jwt string
	// extra are more VAR=value settings, after the defaults (the last
	// value of a variable wins).
	extra []string
}

func newGWConfig(t *testing.T, dsn, e2bURL string) gwConfig {
	return gwConfig{dsn: dsn, e2bURL: e2bURL, addr: freeAddr(t), encKey: testutil.RandomBase64(32), jwt: testutil.RandomBase64(48)}
}

func (c gwConfig) env(dataDir string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dataDir,
		"DATABASE_URL=" + c.dsn, "DATA_DIR=" + dataDir,
		"LISTEN_ADDR=" + c.addr, "PUBLIC_URL=http://" + c.addr,
		"ENCRYPTION_KEY=" + c.encKey, "JWT_SECRET=" + c.jwt,
		"E2B_API_URL=" + c.e2bURL, "E2B_DASHBOARD_API_URL=" + c.e2bURL,
		"LOG_FORMAT=json", "LOG_LEVEL=debug", "SIGNUP=open",
		// These tests drive calls as fast as failures come back; the per-key,
		// per-person and per-workspace limits (tested in cmd/mcpgate's
		// end-to-end suite; the soak sets the key's) would turn an outage's
		// clear errors into "too many tool calls".
		"MCP_KEY_RATE=10000", "MCP_KEY_BURST=10000", "MCP_USER_RATE=10000", "MCP_USER_BURST=10000",
		"MCP_WORKSPACE_RATE=10000", "MCP_WORKSPACE_BURST=10000",
	}, c.extra...)
}

// gateway is a running `mcpgate serve`.
type gateway struct {
	t    *testing.T
	cfg  gwConfig
	URL  string
	cmd  *exec.Cmd
	logs *testutil.LockedBuffer
	done chan struct{}
}

// startGateway starts `mcpgate serve` with cfg, appending its output to logs
// (shared across restarts, so that a test scans everything), and waits until
// /healthz answers.
func startGateway(t *testing.T, cfg gwConfig, logs *testutil.LockedBuffer) *gateway {
	t.Helper()
	return startGatewayIn(t, cfg, logs, t.TempDir())
}

// startGatewayIn is startGateway with DATA_DIR at dataDir, so that a
// restart finds what the last run left there.
func startGatewayIn(t *testing.T, cfg gwConfig, logs *testutil.LockedBuffer, dataDir string) *gateway {
	t.Helper()
	cmd := exec.Command(bin.mcpgate, "serve")
	cmd.Env = cfg.env(dataDir)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mcpgate: %v", err)
	}
	g := &gateway{t: t, cfg: cfg, URL: "http://" + cfg.addr, cmd: cmd, logs: logs, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(g.done) }()
	t.Cleanup(func() { g.kill() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-g.done:
			t.Fatalf("mcpgate exited at start-up: %v\n%s", cmd.ProcessState, tail(logs.String(), 3000))
		default:
		}
		if st, _ := httpGet(g.URL + "/healthz"); st == http.StatusOK {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcpgate did not answer /healthz in 60 s\n%s", tail(logs.String(), 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL (a real crash: no deferred code runs) and waits.
func (g *gateway) kill() {
	_ = g.cmd.Process.Signal(syscall.SIGKILL)
	<-g.done
}

// stop sends SIGTERM and waits for a clean shutdown.
func (g *gateway) stop() {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		g.t.Errorf("mcpgate did not stop in 30 s after SIGTERM")
		g.kill()
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func httpGet(u string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// startSim runs the e2bsim binary and returns its URL.
func startSim(t *testing.T, args ...string) string {
	t.Helper()
	return runSim(t, args...).URL
}

// simProc is a running e2bsim with its control API (--control-listen), so
// that a test switches E2B's faults while the gateway talks to it.
type simProc struct {
	t       *testing.T
	URL     string
	control e2bsim.ControlClient
}

// runSim runs the e2bsim binary with its control API on a second address.
func runSim(t *testing.T, args ...string) *simProc {
	t.Helper()
	addr, control := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin.e2bsim, append([]string{"--listen", addr, "--control-listen", control}, args...)...)
	var out testutil.LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	sp := &simProc{t: t, URL: "http://" + addr, control: e2bsim.ControlClient{URL: "http://" + control}}
	for i := 0; ; i++ {
		st, _ := httpGet(sp.URL + "/health")
		if _, err := sp.control.Faults(context.Background()); st != 0 && err == nil {
			return sp
		}
		if i > 200 {
			t.Fatalf("e2bsim did not start\n%s", out.String())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// setFaults replaces the simulator's faults with fs (none: clears them),
// at once, through its control API.
func (sp *simProc) setFaults(fs ...e2bsim.Fault) {
	sp.t.Helper()
	if err := sp.control.SetFaults(context.Background(), fs...); err != nil {
		sp.t.Fatal(err)
	}
}

// faults returns the simulator's faults in force.
func (sp *simProc) faults() []e2bsim.ActiveFault {
	sp.t.Helper()
	fs, err := sp.control.Faults(context.Background())
	if err != nil {
		sp.t.Fatal(err)
	}
	return fs
}

// recorder keeps every response body a test saw, for the secret scan.
type recorder struct {
	mu     sync.Mutex
	bodies []string
}

func (r *recorder) add(s string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, s)
}

func (r *recorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.bodies, "\n")
}

// client is a browser session on the JSON API: it keeps cookies and sends
// the CSRF header.
type client struct {
	t    *testing.T
	base string
	jar  *cookiejar.Jar
	hc   *http.Client
	rec  *recorder
}

func newClient(t *testing.T, base string, rec *recorder) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: base, jar: jar, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}, rec: rec}
}

func (c *client) cookie(name string) string {
	u, _ := url.Parse(c.base)
	for _, ck := range c.jar.Cookies(u) {
		if ck.Name == name {
			return ck.Value
		}
	}
	return ""
}

// try sends a request and returns the status and body; a transport error
// is status 0 with the error as body.
func (c *client) try(method, path string, body any) (int, []byte) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := c.cookie(api.CSRFCookie); tok != "" {
		req.Header.Set(api.CSRFHeader, tok)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	c.rec.add(string(b))
	return resp.StatusCode, b
}

// must sends a request and fails the test unless it answers want.
func (c *client) must(method, path string, body any, want int, out any) {
	c.t.Helper()
	st, b := c.try(method, path, body)
	if st != want {
		c.t.Fatalf("%s %s = %d %s, want %d", method, path, st, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

const testPassword = "reliability tests use this passphrase"

// tenant is a signed-up user with a personal workspace, E2B connected and one
// MCP key.
type tenant struct {
	*client
	email, ws, e2bKey string
	key               keyCreated
}

type keyCreated struct {
	ID           string `json:"id"`
	Key          string `json:"key"`
	ConnectorURL string `json:"connector_url"`
}

func signup(t *testing.T, base string, rec *recorder) *tenant {
	t.Helper()
	return signupWith(t, newClient(t, base, rec))
}

// signupWith is signup with the client c.
func signupWith(t *testing.T, c *client) *tenant {
	t.Helper()
	email := "u" + testutil.RandomHex(4) + "@example.com"
	var me struct {
		Workspaces []struct {
			ID string `json:"id"`
		} `json:"workspaces"`
	}
	c.must("POST", "/api/v1/auth/signup", map[string]string{"email": email, "password": testPassword}, http.StatusCreated, &me)
	if len(me.Workspaces) == 0 {
		t.Fatalf("signup gave no workspace")
	}
	return &tenant{client: c, email: email, ws: me.Workspaces[0].ID}
}

// newTenant signs up, connects E2B with a fresh team key and creates a key.
func newTenant(t *testing.T, base string, rec *recorder) *tenant {
	t.Helper()
	tn := signup(t, base, rec)
	tn.e2bKey = "e2b_" + testutil.RandomHex(20)
	tn.must("PUT", "/api/v1/workspaces/"+tn.ws+"/connections/e2b", map[string]string{"api_key": tn.e2bKey}, http.StatusOK, nil)
	tn.key = tn.createKey("first")
	return tn
}

// createKey creates a key. The one response that shows a key by design is
// left out of the recorder, so that the secret scan covers everything else.
func (tn *tenant) createKey(name string) keyCreated {
	tn.t.Helper()
	var k keyCreated
	rec := tn.rec
	tn.rec = nil
	defer func() { tn.rec = rec }()
	tn.must("POST", "/api/v1/workspaces/"+tn.ws+"/keys", map[string]string{"name": name}, http.StatusCreated, &k)
	return k
}

// on returns the tenant's session on the replica at base: replicas share
// the session secret, and a cookie jar does not tell loopback ports apart.
func (tn *tenant) on(base string) *tenant {
	c := *tn.client
	c.base = base
	other := *tn
	other.client = &c
	return &other
}

// headerTransport adds a header to every request.
type headerTransport struct {
	name, value string
	base        http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.name != "" {
		r.Header.Set(h.name, h.value)
	}
	return h.base.RoundTrip(r)
}

// mcpSession connects an MCP client to the gateway with key in the
// Authorization header, or through the connector URL when viaURL.
func mcpSession(t *testing.T, ctx context.Context, base, key string, viaURL bool) (*sdk.ClientSession, error) {
	t.Helper()
	endpoint := base + "/mcp"
	tr := headerTransport{name: "Authorization", value: "Bearer " + key, base: &http.Transport{}}
	if viaURL {
		endpoint = base + "/c/" + key + "/mcp"
		tr.name = ""
	}
	hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	return sdk.NewClient(&sdk.Implementation{Name: "reliability", Version: "v0"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
}

func mustSession(t *testing.T, base, key string, viaURL bool) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcpSession(t, ctx, base, key, viaURL)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callResult is a tool call's outcome as a client sees it.
type callResult struct {
	err     error // protocol or transport error
	isError bool
	text    string
}

func (r callResult) ok() bool { return r.err == nil && !r.isError }

func (r callResult) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	return fmt.Sprintf("isError=%v %s", r.isError, r.text)
}

func call(cs *sdk.ClientSession, timeout time.Duration, tool string, args map[string]any, rec *recorder) callResult {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		rec.add(err.Error())
		return callResult{err: err}
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	rec.add(text.String())
	return callResult{isError: res.IsError, text: text.String()}
}

func count(t *testing.T, db *pgx.Conn, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// eventually retries cond every 50 ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fixture is the set-up most tests start from: a gateway on a database
// talking to a simulator, a tenant signed up on it (E2B connected, one key),
// and a raw MCP client with that key.
type fixture struct {
	cfg  gwConfig
	logs *testutil.LockedBuffer
	gw   *gateway
	tn   *tenant
	rc   *rpcClient
}

func newFixture(t *testing.T, dsn, simURL string) *fixture {
	t.Helper()
	return newFixtureIn(t, dsn, simURL, t.TempDir())
}

// newFixtureIn is newFixture with the gateway's DATA_DIR at dataDir.
func newFixtureIn(t *testing.T, dsn, simURL, dataDir string) *fixture {
	t.Helper()
	f := &fixture{cfg: newGWConfig(t, dsn, simURL), logs: &testutil.LockedBuffer{}}
	f.gw = startGatewayIn(t, f.cfg, f.logs, dataDir)
	f.tn = newTenant(t, f.gw.URL, nil)
	f.rc = newRPCClient(t, f.gw.URL, f.tn.key.Key)
	return f
}

// replica starts a second replica of the fixture's gateway: the same
// database and secrets (as behind a load balancer), its own address.
func (f *fixture) replica(t *testing.T) *gateway {
	t.Helper()
	return startGateway(t, f.cfg.replica(t), f.logs)
}

// settle returns once the gateway at base has processed every cache
// invalidation notified so far. A notification is processed some time after
// its commit, and one that arrives after a load drops what the load cached
// (rightly: it cannot tell it was sent before), so a test that warms caches
// and then stops the database must wait for those its set-up sent.
// Notifications arrive in commit order on one connection: settle caches a
// key of another workspace, revokes it with a notification of its own, and
// waits until the gateway refuses it, which it does only once it has
// processed that notification or a later-sent one about that workspace,
// and so every one sent before; those still to come concern only that
// other workspace.
func settle(t *testing.T, base string, db *pgx.Conn) {
	t.Helper()
	other := newTenant(t, base, nil)
	c := newRPCClient(t, base, other.key.Key)
	if r := c.call("e2b_list_sandboxes", "settle"); !r.ok() {
		t.Fatalf("settle: call = %v", r)
	}
	if _, err := db.Exec(context.Background(), `WITH k AS (UPDATE api_keys SET revoked_at = now() WHERE id = $1 RETURNING workspace_id)
		SELECT pg_notify('mcpgate_invalidate', 'keys:' || workspace_id) FROM k`, other.key.ID); err != nil {
		t.Fatal(err)
	}
	if !eventually(30*time.Second, func() bool {
		return c.call("e2b_list_sandboxes", "settle").status == http.StatusUnauthorized
	}) {
		t.Fatalf("settle: the gateway did not process a notification in 30 s")
	}
}

// replica is the config of another replica of c: the same database and
// secrets (as behind a load balancer), its own address.
func (c gwConfig) replica(t *testing.T) gwConfig {
	c.addr = freeAddr(t)
	return c
}

// rpcClient sends tools/call as raw HTTP requests, one JSON-RPC message per
// POST, as a stateless MCP client does: unlike go-sdk's client it shows the
// HTTP status and headers of every answer, which the outage rows are about.
type rpcClient struct {
	base, key string
	hc        *http.Client
	next      atomic.Int64
}

func newRPCClient(t *testing.T, base, key string) *rpcClient {
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 200}}
	t.Cleanup(hc.CloseIdleConnections)
	return &rpcClient{base: base, key: key, hc: hc}
}

// rpcResult is one tools/call as the client saw it.
type rpcResult struct {
	tag            string
	sent, answered time.Time
	status         int    // HTTP status; 0: no answer (err says why)
	retryAfter     string // the Retry-After header
	err            error
	rpcError       bool   // a JSON-RPC error instead of a result
	isError        bool   // a tool result with isError
	text           string // the result's text or the JSON-RPC error's message
}

// ok reports whether the call ran and succeeded.
func (r rpcResult) ok() bool {
	return r.err == nil && r.status == http.StatusOK && !r.rpcError && !r.isError
}

func (r rpcResult) String() string {
	if r.err != nil {
		return fmt.Sprintf("%s: no answer: %v", r.tag, r.err)
	}
	return fmt.Sprintf("%s: HTTP %d (Retry-After %q) rpcError=%v isError=%v %q", r.tag, r.status, r.retryAfter, r.rpcError, r.isError, r.text)
}

// mcpRequest is a POST of one JSON-RPC message to the gateway's /mcp with
// key as the bearer, as a stateless MCP client sends it.
func mcpRequest(base, key string, body []byte) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	req.Header.Set("Authorization", "Bearer "+key)
	return req
}

// probeArgs are e2b_list_sandboxes arguments that carry tag into the audit
// row (arguments->>'metadata'), so that each call is matched to its row.
func probeArgs(tag string) map[string]any { return map[string]any{"metadata": "probe=" + tag} }

// call sends one tools/call with tag in its arguments (see probeArgs).
func (c *rpcClient) call(tool, tag string) rpcResult {
	return c.callArgs(tool, tag, probeArgs(tag))
}

func (c *rpcClient) callArgs(tool, tag string, args map[string]any) (res rpcResult) {
	res = rpcResult{tag: tag, sent: time.Now()}
	defer func() { res.answered = time.Now() }()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.next.Add(1), "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	resp, err := c.hc.Do(mcpRequest(c.base, c.key, body))
	if err != nil {
		res.err = err
		return res
	}
	defer resp.Body.Close()
	res.status, res.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		res.err = err
		return res
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The last data line is the answer.
		for line := range strings.Lines(string(b)) {
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
				b = []byte(d)
			}
		}
	}
	var msg struct {
		Result *struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &msg) != nil {
		res.text = string(b)
		return res
	}
	switch {
	case msg.Error != nil:
		res.rpcError, res.text = true, msg.Error.Message
	case msg.Result != nil:
		res.isError = msg.Result.IsError
		for _, c := range msg.Result.Content {
			res.text += c.Text
		}
	}
	return res
}

// pollUntil makes call 0, 1, … with send every 5 ms until done holds for
// an answer or the deadline passes, and returns every call made: the last
// one is the one done held for, unless time ran out. It never fails the
// test, so that several run at once (one per replica) from goroutines.
func pollUntil(send func(i int) rpcResult, deadline time.Time, done func(rpcResult) bool) []rpcResult {
	var calls []rpcResult
	for i := 0; ; i++ {
		r := send(i)
		calls = append(calls, r)
		if done(r) || time.Now().After(deadline) {
			return calls
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// callLog collects the results of an open loop.
type callLog struct {
	mu    sync.Mutex
	calls []rpcResult
}

func (l *callLog) add(rs ...rpcResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, rs...)
}

// all returns the results so far.
func (l *callLog) all() []rpcResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]rpcResult(nil), l.calls...)
}

// openLoop offers rate calls per second, each in its own goroutine, whatever
// the answers (an open loop: a slow or failing gateway does not lower the
// offered load, as it would with a fixed number of clients), until stop is
// closed; fn makes call i. The returned function waits for every call.
func openLoop(rate int, stop <-chan struct{}, fn func(i int)) (wait func()) {
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate)))):
			}
			wg.Add(1)
			go func() { defer wg.Done(); fn(i) }()
		}
	}()
	return func() { <-done; wg.Wait() }
}

// closedLoop runs workers goroutines, each calling fn(worker, i) for i = 0,
// 1, ... back to back until stop is closed or fn returns false (the gateway
// is gone, say). The returned wait blocks until every worker has returned.
func closedLoop(workers int, stop <-chan struct{}, fn func(worker, i int) bool) (wait func()) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if !fn(w, i) {
					return
				}
			}
		}()
	}
	return wg.Wait
}

// auditedTags returns, for each probe tag (see probeArgs), how many
// tool-call audit rows the database holds.
func auditedTags(t *testing.T, db *pgx.Conn) map[string]int {
	t.Helper()
	rows, err := db.Query(context.Background(),
		`SELECT arguments->>'metadata' FROM audit_log WHERE kind = 'tool_call' AND arguments->>'metadata' LIKE 'probe=%'`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(m, "probe=")]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// unaudited returns the calls in calls that were answered (an HTTP answer
// with a tool result: the tool ran or was refused by the gateway) but have no
// audit row, and fails the test for any call audited more than once.
func unaudited(t *testing.T, db *pgx.Conn, calls []rpcResult) []rpcResult {
	t.Helper()
	tags := auditedTags(t, db)
	var missing []rpcResult
	for _, c := range calls {
		switch n := tags[c.tag]; {
		case n > 1:
			t.Errorf("call %s has %d audit rows, want 1", c.tag, n)
		case n == 0 && c.status == http.StatusOK && !c.rpcError:
			missing = append(missing, c)
		}
	}
	return missing
}

// metric returns the value of an unlabelled metric on the gateway's
// /metrics, or -1 when it cannot be read.
func metric(base, name string) float64 {
	st, body := httpGet(base + "/metrics")
	if st != http.StatusOK {
		return -1
	}
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}
