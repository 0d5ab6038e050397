package main

// The harness of the end-to-end tests (mcp_*_e2e_test.go): the real program
// (serve) on 127.0.0.1:0 over a fresh test database, the E2B simulator behind
// an httptest server, dashboard users driving the JSON API with a cookie jar
// and the CSRF header, and go-sdk MCP clients. Every response body the tests
// read from the gateway is recorded, so that each test can end by proving
// no secret ever left it (noSecretLeaks).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// e2ePublicURL is PUBLIC_URL of every replica. The replicas listen on random
// ports, so connector URLs are rebased onto the replica a test talks to.
const e2ePublicURL = "http://mcpgate.test"

const e2ePassword = "e2e correct horse battery staple"

// e2eEnv is one deployment: a database, the simulator and the replicas.
type e2eEnv struct {
	t                 *testing.T
	dsn               string
	encKey, jwtSecret string
	sim               *e2bsim.Server
	simURL            string
	simLog            *e2eSimLog
	rec               *e2eRecorder
	replicas          []*e2eReplica
	// env is added to every replica's configuration.
	env map[string]string
}

// newE2EEnv starts the simulator and n replicas of serve on one database.
func newE2EEnv(t *testing.T, n int) *e2eEnv {
	t.Helper()
	return newE2EEnvWith(t, n, nil)
}

// newE2EEnvWith is newE2EEnv with settings of its own for every replica.
func newE2EEnvWith(t *testing.T, n int, env map[string]string) *e2eEnv {
	t.Helper()
	e := &e2eEnv{t: t, dsn: storetest.NewDatabase(t), encKey: testutil.RandomBase64(32), jwtSecret: testutil.RandomBase64(32),
		sim: e2bsim.New(e2bsim.Options{}), simLog: &e2eSimLog{}, rec: &e2eRecorder{secrets: map[string]string{}}, env: env}
	simSrv := httptest.NewServer(e.simLog.wrap(e.sim))
	t.Cleanup(simSrv.Close)
	e.simURL = simSrv.URL
	for range n {
		e.replicas = append(e.replicas, e.startReplica())
	}
	return e
}

// teamKey returns a new E2B team key; the simulator makes each its own team.
func (e *e2eEnv) teamKey() string {
	k := "e2b_" + testutil.RandomHex(20)
	e.rec.secret(k, "E2B team key")
	return k
}

// e2eReplica is one running serve.
type e2eReplica struct {
	url   string
	log   *testutil.LockedBuffer
	watch *logWatch
	stop  func()
}

// startReplica runs serve in-process and waits until it listens.
func (e *e2eEnv) startReplica() *e2eReplica {
	t := e.t
	t.Helper()
	env := map[string]string{
		"DATABASE_URL": e.dsn, "ENCRYPTION_KEY": e.encKey, "JWT_SECRET": e.jwtSecret,
		"LISTEN_ADDR": "127.0.0.1:0", "PUBLIC_URL": e2ePublicURL,
		"E2B_API_URL": e.simURL, "E2B_DASHBOARD_API_URL": e.simURL,
		"LOG_FORMAT": "json", "LOG_LEVEL": "debug",
	}
	maps.Copy(env, e.env)
	in := mustServe(t, env)
	r := &e2eReplica{log: in.logs, watch: in.watch, url: in.base}
	// Stopping early is safe; mustServe's cleanup reports serve's error.
	r.stop = func() { _ = in.stop(t) }
	return r
}

// e2eSimLog records the team key of every request the gateway sent to the
// simulator, so that a test can prove which workspace's E2B key was used.
type e2eSimLog struct {
	mu   sync.Mutex
	reqs []e2eSimRequest
	// hold, when set, runs before each of the gateway's requests is served
	// (a test holds one there, as a slow network would).
	hold func(*http.Request)
}

type e2eSimRequest struct{ key, method, path string }

// e2eDirect marks the tests' own requests to the simulator, which are not
// the gateway's.
const e2eDirect = "X-E2E-Direct"

func (l *e2eSimLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(e2eDirect) == "" {
			l.mu.Lock()
			l.reqs = append(l.reqs, e2eSimRequest{r.Header.Get("X-API-Key"), r.Method, r.URL.Path})
			hold := l.hold
			l.mu.Unlock()
			if hold != nil {
				hold(r)
			}
		}
		h.ServeHTTP(w, r)
	})
}

// mark returns a position; since lists the requests after it.
func (l *e2eSimLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

func (l *e2eSimLog) since(mark int) []e2eSimRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs[mark:])
}

// simDo calls the simulator's REST API directly with a team key (not through
// the gateway, and not recorded as gateway output).
func (e *e2eEnv) simDo(teamKey, method, path string, body any) (int, map[string]any) {
	e.t.Helper()
	status, raw := e.simDoRaw(teamKey, method, path, body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return status, out
}

// simDoRaw is simDo returning the raw body.
func (e *e2eEnv) simDoRaw(teamKey, method, path string, body any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.simURL+path, rd)
	req.Header.Set("X-API-Key", teamKey)
	req.Header.Set(e2eDirect, "1")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return e2eSend(e.t, http.DefaultClient, req)
}

// simSandbox creates a sandbox in a team directly on the simulator.
func (e *e2eEnv) simSandbox(teamKey string, body map[string]any) string {
	e.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	if body["templateID"] == nil {
		body["templateID"] = "base"
	}
	if body["timeout"] == nil {
		body["timeout"] = 3600
	}
	status, out := e.simDo(teamKey, http.MethodPost, "/sandboxes", body)
	if status != http.StatusCreated {
		e.t.Fatalf("simulator create sandbox = %d %v", status, out)
	}
	for _, k := range []string{"envdAccessToken", "trafficAccessToken"} {
		if v, _ := out[k].(string); v != "" {
			e.rec.secret(v, "simulator "+k)
		}
	}
	return out["sandboxID"].(string)
}

// simSandboxState returns a sandbox's state and end time as the simulator
// sees it, or "" when it does not exist (in that team).
func (e *e2eEnv) simSandboxState(teamKey, id string) (state, endAt string) {
	e.t.Helper()
	status, out := e.simDo(teamKey, http.MethodGet, "/sandboxes/"+id, nil)
	if status == http.StatusNotFound {
		return "", ""
	}
	if status != http.StatusOK {
		e.t.Fatalf("simulator get sandbox %s = %d %v", id, status, out)
	}
	if v, _ := out["envdAccessToken"].(string); v != "" {
		e.rec.secret(v, "simulator envdAccessToken")
	}
	state, _ = out["state"].(string)
	endAt, _ = out["endAt"].(string)
	return state, endAt
}

// e2eRecorder keeps the secrets to look for and every response body read.
type e2eRecorder struct {
	mu      sync.Mutex
	bodies  []*e2eBody
	secrets map[string]string // value -> what it is
}

type e2eBody struct {
	label string
	mu    sync.Mutex
	b     bytes.Buffer
}

func (r *e2eRecorder) secret(v, what string) {
	if v == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets[v] = what
}

// tee returns a body that copies what is read of rc into a new record.
func (r *e2eRecorder) tee(label string, rc io.ReadCloser) io.ReadCloser {
	b := &e2eBody{label: label}
	r.mu.Lock()
	r.bodies = append(r.bodies, b)
	r.mu.Unlock()
	return &e2eTeeBody{rc: rc, b: b}
}

// leaks lists every secret found in any recorded body or in extra texts.
func (r *e2eRecorder) leaks(extra map[string]string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	texts := map[string]string{}
	for i, b := range r.bodies {
		b.mu.Lock()
		texts[fmt.Sprintf("response %d (%s)", i, b.label)] = b.b.String()
		b.mu.Unlock()
	}
	for k, v := range extra {
		texts[k] = v
	}
	var found []string
	for where, text := range texts {
		for v, what := range r.secrets {
			if strings.Contains(text, v) {
				found = append(found, fmt.Sprintf("%s found in %s", what, where))
			}
		}
	}
	slices.Sort(found)
	return found
}

// saw reports whether any recorded body contains s.
func (r *e2eRecorder) saw(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bodies {
		b.mu.Lock()
		found := strings.Contains(b.b.String(), s)
		b.mu.Unlock()
		if found {
			return true
		}
	}
	return false
}

type e2eTeeBody struct {
	rc io.ReadCloser
	b  *e2eBody
}

func (t *e2eTeeBody) Read(p []byte) (int, error) {
	n, err := t.rc.Read(p)
	t.b.mu.Lock()
	t.b.b.Write(p[:n])
	t.b.mu.Unlock()
	return n, err
}

func (t *e2eTeeBody) Close() error { return t.rc.Close() }

type e2eNoRecordKey struct{}

// e2eNoRecord marks a request whose answer legitimately carries a secret
// (a new MCP key, shown once), so that it is not recorded.
func e2eNoRecord(ctx context.Context) context.Context {
	return context.WithValue(ctx, e2eNoRecordKey{}, true)
}

// e2eTransport adds headers to every request and records every response
// body.
type e2eTransport struct {
	base   http.RoundTripper
	rec    *e2eRecorder
	header http.Header
}

func (tr *e2eTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(tr.header) > 0 {
		r = r.Clone(r.Context())
		for k, v := range tr.header {
			r.Header[k] = v
		}
	}
	resp, err := tr.base.RoundTrip(r)
	if err != nil || r.Context().Value(e2eNoRecordKey{}) != nil {
		return resp, err
	}
	resp.Body = tr.rec.tee(r.Method+" "+e2eRedactPath(r.URL.Path), resp.Body)
	return resp, nil
}

func e2eRedactPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "/c/"); ok {
		if _, tail, ok := strings.Cut(rest, "/"); ok {
			return "/c/<key>/" + tail
		}
	}
	return p
}

// e2eFrom returns a transport whose connections come from a loopback source
// address (127.0.0.x), so that per-address limits of one test do not touch
// the others.
func e2eFrom(addr string) http.RoundTripper {
	if addr == "" {
		return http.DefaultTransport
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}, Timeout: 10 * time.Second}
	return &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 100}
}

// httpClient returns a client that records bodies and sends header.
func (e *e2eEnv) httpClient(header http.Header, source string) *http.Client {
	return &http.Client{Transport: &e2eTransport{base: e2eFrom(source), rec: e.rec, header: header}, Timeout: 30 * time.Second}
}

// e2eUser is a dashboard user talking to one replica's JSON API.
type e2eUser struct {
	env      *e2eEnv
	t        *testing.T
	email    string
	id       string
	personal string // the personal workspace's id
	base     string
	client   *http.Client
}

// signup creates an account (with an invitation when one is given).
func (e *e2eEnv) signup(base, email, invitation string) *e2eUser {
	e.t.Helper()
	jar, _ := cookiejar.New(nil)
	u := &e2eUser{env: e, t: e.t, email: email, base: base,
		client: &http.Client{Jar: jar, Transport: &e2eTransport{base: http.DefaultTransport, rec: e.rec}, Timeout: 30 * time.Second}}
	body := map[string]any{"email": email, "password": e2ePassword}
	if invitation != "" {
		body["invitation"] = invitation
	}
	var me struct {
		User struct {
			ID string `json:"id"`
		} `json:"user"`
		Workspaces []struct {
			ID       string `json:"id"`
			Personal bool   `json:"personal"`
		} `json:"workspaces"`
	}
	u.decode(u.api(http.MethodPost, "/api/v1/auth/signup", body, http.StatusCreated), &me)
	u.id = me.User.ID
	for _, w := range me.Workspaces {
		if w.Personal {
			u.personal = w.ID
		}
	}
	if u.id == "" || u.personal == "" {
		e.t.Fatalf("signup(%s) = %+v, want a user and a personal workspace", email, me)
	}
	pu, _ := url.Parse(base)
	for _, c := range jar.Cookies(pu) {
		e.rec.secret(c.Value, "cookie "+c.Name+" of "+email)
	}
	return u
}

// signupWithE2B signs email up and connects a new E2B team to their
// personal workspace; it returns the user and the team's key.
func (e *e2eEnv) signupWithE2B(base, email string) (*e2eUser, string) {
	e.t.Helper()
	u := e.signup(base, email, "")
	team := e.teamKey()
	u.connectE2B(u.personal, team)
	return u, team
}

// with returns the same user failing tt instead of the parent test.
func (u *e2eUser) with(t *testing.T) *e2eUser {
	c := *u
	c.t = t
	return &c
}

// do sends a JSON API request and returns the status and body.
func (u *e2eUser) do(ctx context.Context, method, path string, body any) (int, []byte) {
	u.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			u.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.base+path, rd)
	if err != nil {
		u.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := e2eCookie(u.client.Jar, u.base, api.CSRFCookie); tok != "" {
		req.Header.Set(api.CSRFHeader, tok)
	}
	return e2eSend(u.t, u.client, req)
}

// e2eSend sends req through hc and returns the status and the whole body;
// a request that cannot be sent or read fails t. Every JSON client of these
// tests (e2eUser, apiBrowser, the simulator's) sends through it.
func e2eSend(t testing.TB, hc *http.Client, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	return resp.StatusCode, raw
}

// e2eCookie returns the value of the cookie name that jar holds for base,
// or "".
func e2eCookie(jar http.CookieJar, base, name string) string {
	u, _ := url.Parse(base)
	for _, c := range jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// invite invites email to ws with role and returns the invitation's token.
func (u *e2eUser) invite(ws, email, role string) string {
	u.t.Helper()
	var inv struct {
		Token string `json:"token"`
	}
	u.decode(u.api(http.MethodPost, "/api/v1/workspaces/"+ws+"/invitations",
		map[string]any{"email": email, "role": role}, http.StatusCreated), &inv)
	return inv.Token
}

// api sends a request and fails the test unless the status is want.
func (u *e2eUser) api(method, path string, body any, want int) []byte {
	u.t.Helper()
	status, raw := u.do(context.Background(), method, path, body)
	if status != want {
		u.t.Fatalf("%s %s as %s = %d %s, want %d", method, path, u.email, status, raw, want)
	}
	return raw
}

func (u *e2eUser) decode(raw []byte, v any) {
	u.t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		u.t.Fatalf("decode %s: %v", raw, err)
	}
}

// workspace creates a workspace and returns its id.
func (u *e2eUser) workspace(name string) string {
	u.t.Helper()
	var ws struct {
		ID string `json:"id"`
	}
	u.decode(u.api(http.MethodPost, "/api/v1/workspaces", map[string]any{"name": name}, http.StatusCreated), &ws)
	return ws.ID
}

// connectE2B stores an E2B team key for a workspace.
func (u *e2eUser) connectE2B(ws, teamKey string) {
	u.t.Helper()
	u.api(http.MethodPut, "/api/v1/workspaces/"+ws+"/connections/e2b", map[string]any{"api_key": teamKey}, http.StatusOK)
}

// setTool changes a tool's policy.
func (u *e2eUser) setTool(ws, tool string, body map[string]any) map[string]any {
	u.t.Helper()
	var out map[string]any
	u.decode(u.api(http.MethodPut, "/api/v1/workspaces/"+ws+"/tools/"+tool, body, http.StatusOK), &out)
	return out
}

// e2eKey is a created MCP key.
type e2eKey struct {
	ID           string `json:"id"`
	Key          string `json:"key"`
	Scope        string `json:"scope"`
	ConnectorURL string `json:"connector_url"`
}

// createKey creates an MCP key in a workspace; its answer is the one place
// the key is shown, so it is not recorded.
func (u *e2eUser) createKey(ws, name, scope string, expiresAt *time.Time) e2eKey {
	u.t.Helper()
	body := map[string]any{"name": name}
	if scope != "" {
		body["scope"] = scope
	}
	if expiresAt != nil {
		body["expires_at"] = expiresAt.UTC().Format(time.RFC3339Nano)
	}
	status, raw := u.do(e2eNoRecord(context.Background()), http.MethodPost, "/api/v1/workspaces/"+ws+"/keys", body)
	if status != http.StatusCreated {
		u.t.Fatalf("create key = %d %s, want 201", status, raw)
	}
	var k e2eKey
	u.decode(raw, &k)
	if !strings.HasPrefix(k.Key, "mcpg_") || k.ID == "" || k.ConnectorURL != e2ePublicURL+"/c/"+k.Key+"/mcp" {
		u.t.Fatalf("create key = %s, want an mcpg_ key and its connector URL", raw)
	}
	u.env.rec.secret(k.Key, "MCP key "+name)
	return k
}

func (u *e2eUser) revokeKey(ws, id string) {
	u.t.Helper()
	u.api(http.MethodDelete, "/api/v1/workspaces/"+ws+"/keys/"+id, nil, http.StatusNoContent)
}

// e2eAuditItem is one row of GET .../audit.
type e2eAuditItem struct {
	WorkspaceID    string         `json:"workspace_id"`
	ActorID        string         `json:"actor_id"`
	KeyID          string         `json:"key_id"`
	Kind           string         `json:"kind"`
	Action         string         `json:"action"`
	Arguments      map[string]any `json:"arguments"`
	Outcome        string         `json:"outcome"`
	Message        string         `json:"message"`
	UpstreamStatus int            `json:"upstream_status"`
	Source         string         `json:"source"`
}

// audit reads every page of a workspace's audit log as this user sees it.
func (u *e2eUser) audit(ws, query string) []e2eAuditItem {
	u.t.Helper()
	var all []e2eAuditItem
	cursor := ""
	for {
		q := url.Values{}
		if query != "" {
			q, _ = url.ParseQuery(query)
		}
		q.Set("limit", "200")
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Items      []e2eAuditItem `json:"items"`
			NextCursor *string        `json:"next_cursor"`
		}
		u.decode(u.api(http.MethodGet, "/api/v1/workspaces/"+ws+"/audit?"+q.Encode(), nil, http.StatusOK), &page)
		all = append(all, page.Items...)
		if page.NextCursor == nil {
			return all
		}
		cursor = *page.NextCursor
	}
}

// auditUntil polls the audit log (written asynchronously) until ok holds.
func (u *e2eUser) auditUntil(ws, query string, ok func([]e2eAuditItem) bool) []e2eAuditItem {
	u.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		items := u.audit(ws, query)
		if ok(items) {
			return items
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(items, "", "  ")
			u.t.Fatalf("audit log of %s as %s never matched; last:\n%s", ws, u.email, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// session connects a go-sdk client to endpoint with header added to every
// request. version "" is the SDK's newest (2026-07-28, stateless).
func (e *e2eEnv) session(t *testing.T, endpoint string, header http.Header, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := e.connect(t, endpoint, header, version, opts)
	if err != nil {
		t.Fatalf("Connect(%s, version %q) err = %v", e2eRedactPath(endpoint), version, err)
	}
	return cs
}

func (e *e2eEnv) connect(t *testing.T, endpoint string, header http.Header, version string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	return e2eConnect(t, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: e.httpClient(header, ""), MaxRetries: -1},
		version, opts, 20*time.Second)
}

// e2eConnect connects a go-sdk client over tr within timeout, at protocol
// version ("" the SDK's newest), and closes the session when t ends.
func e2eConnect(t *testing.T, tr *mcp.StreamableClientTransport, version string, opts *mcp.ClientOptions, timeout time.Duration) (*mcp.ClientSession, error) {
	t.Helper()
	var so *mcp.ClientSessionOptions
	if version != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpgate-e2e", Version: "v0"}, opts).Connect(ctx, tr, so)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, nil
}

// e2eBearer is the header of a key sent as Authorization: Bearer.
func e2eBearer(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

// e2eCall calls a tool and fails the test on a protocol error (tool errors are
// results).
func e2eCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s) err = %v", name, err)
	}
	return res
}

// e2eCallOK calls a tool and returns its structured output, failing on a tool
// error.
func e2eCallOK(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res := e2eCall(t, cs, name, args)
	if res.IsError {
		t.Fatalf("CallTool(%s, %v) = tool error %q", name, args, testutil.ToolText(res))
	}
	return e2eStructured(t, res)
}

// e2eCallErr calls a tool that must fail and returns the error text.
func e2eCallErr(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res := e2eCall(t, cs, name, args)
	if !res.IsError {
		t.Fatalf("CallTool(%s, %v) = %s, want a tool error", name, args, testutil.ToolText(res))
	}
	return testutil.ToolText(res)
}

func e2eStructured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s is not an object: %v", b, err)
	}
	return m
}

// e2eToolNames lists a session's tools.
func e2eToolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools() err = %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// dbConn opens a connection to the test database.
func (e *e2eEnv) dbConn(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		t.Fatalf("connect to the test database: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// rawMCP posts one JSON-RPC request to an MCP endpoint as a plain HTTP client
// from a loopback source address and returns the response (status 0 after a
// transport error, which fails the test).
func (e *e2eEnv) rawMCP(t *testing.T, endpoint string, header http.Header, source string) (*http.Response, []byte) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{},"clientInfo":{"name":"raw","version":"v0"}}}`
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := e.httpClient(nil, source).Do(req)
	if err != nil {
		// Not Fatal: callers run this from several goroutines.
		t.Errorf("POST %s: %v", e2eRedactPath(req.URL.Path), err)
		return &http.Response{Header: http.Header{}}, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}

// e2eConnectorURL rebases a key's connector URL onto a replica.
func e2eConnectorURL(base string, k e2eKey) string {
	return base + strings.TrimPrefix(k.ConnectorURL, e2ePublicURL)
}

// The tools the MCP end-to-end tests call most.
const (
	toolList   = "e2b_list_sandboxes"
	toolCreate = "e2b_create_sandbox"
	toolKill   = "e2b_kill_sandbox"
)

// mcpFixture is where each MCP end-to-end test starts, on a deployment of
// its own: two replicas; alice and bob, each with a personal workspace
// connected to an E2B team of their own and a full key made on replica 1;
// and carol, a member (not an admin) of alice's workspace, with a key there.
// Subtests that make many calls create keys of their own: each key has its
// own rate limit (20/s, burst 40), and a connect costs requests too.
type mcpFixture struct {
	e                 *e2eEnv
	r1, r2            *e2eReplica
	alice, bob, carol *e2eUser
	teamA, teamB      string
	wsA, wsB          string
	keyA, keyB, keyC  e2eKey
}

func newMCPFixture(t *testing.T) *mcpFixture {
	t.Helper()
	e := newE2EEnv(t, 2)
	f := &mcpFixture{e: e, r1: e.replicas[0], r2: e.replicas[1]}
	f.alice, f.teamA = e.signupWithE2B(f.r1.url, "alice@example.com")
	f.bob, f.teamB = e.signupWithE2B(f.r1.url, "bob@example.com")
	f.wsA, f.wsB = f.alice.personal, f.bob.personal
	f.keyA = f.alice.createKey(f.wsA, "alice laptop", "full", nil)
	f.keyB = f.bob.createKey(f.wsB, "bob laptop", "full", nil)
	f.carol = e.signup(f.r1.url, "carol@example.com", f.alice.invite(f.wsA, "carol@example.com", "member"))
	f.keyC = f.carol.createKey(f.wsA, "carol", "full", nil)
	return f
}

// noSecretLeaks stops the replicas (a clean shutdown writes every queued
// audit row and the last log lines) and fails t for every secret of the
// deployment found in a response the tests read, in a replica's log or in a
// table that could hold one. It returns those logs and tables.
func (e *e2eEnv) noSecretLeaks(t *testing.T) map[string]string {
	t.Helper()
	for _, s := range e.sim.Secrets() {
		e.rec.secret(s, "a secret the simulator issued or was given")
	}
	for _, r := range e.replicas {
		r.stop()
	}
	extra := map[string]string{}
	for i, r := range e.replicas {
		extra[fmt.Sprintf("log of replica %d", i+1)] = r.log.String()
	}
	db := e.dbConn(t)
	for _, table := range []string{"audit_log", "api_keys", "connections", "tool_policies", "spent_tokens"} {
		var text string
		if err := db.QueryRow(context.Background(),
			`SELECT coalesce(string_agg(t::text, E'\n'), '') FROM `+table+` t`).Scan(&text); err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		extra["table "+table] = text
	}
	for _, leak := range e.rec.leaks(extra) {
		t.Error(leak)
	}
	return extra
}
