package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/password"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// testSecret signs the sessions of every test server.
var testSecret = []byte("api-test-jwt-secret-0123456789abcdef")

// fastParams keep argon2 cheap in tests.
var fastParams = &password.Params{Time: 1, Memory: 1024, Threads: 1}

const testPassword = "correct horse battery staple"

// testServer is the API over a real, freshly migrated database.
type testServer struct {
	*httptest.Server
	db      *store.DB
	handler http.Handler
}

// newTestServer starts the API with opts over the real services on a fresh
// database; unset Services, Sessions, JWTSecret, PublicURL and Ready get test
// values, and edit, when given, adjusts the services' options.
func newTestServer(t *testing.T, opts api.Options, edit ...func(*service.Options)) *testServer {
	t.Helper()
	db := storetest.Open(t)
	if opts.PublicURL == "" {
		opts.PublicURL = "http://localhost:8080"
	}
	// Every test client signs up from 127.0.0.1; the sign-up limit per
	// address has its own tests.
	so := service.Options{DB: db, Registry: connectors.NewRegistry(), PasswordParams: fastParams, PublicURL: opts.PublicURL,
		SignupsPerAddress: 1000}
	for _, e := range edit {
		e(&so)
	}
	if opts.Services.Accounts == nil {
		// servicetest gives the services a vault of their own, as
		// production does (TOTP secrets are sealed).
		env := servicetest.New(t, so)
		opts.Services = apiServices(env.Service)
		if opts.Servers == nil {
			// The upstream server routes are mounted too, so that the tests
			// that walk every route (CSRF, another workspace) cover them.
			opts.Servers = service.NewServers(service.ServersOptions{DB: db, Keyring: env.Keyring, Audit: env.Audit})
		}
	}
	if opts.Sessions == nil {
		opts.Sessions = db
	}
	if opts.JWTSecret == nil {
		opts.JWTSecret = testSecret
	}
	if opts.Ready == nil {
		opts.Ready = db.Ready
	}
	h := api.New(opts).Handler()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testServer{Server: srv, db: db, handler: h}
}

// route is one method and pattern of the router.
type route struct{ method, pattern string }

// mustRoutes walks the server's own router.
func mustRoutes(t *testing.T, h http.Handler) []route {
	t.Helper()
	r, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("Handler() is a %T, want a chi.Routes", h)
	}
	var routes []route
	err := chi.Walk(r, func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes = append(routes, route{method, pattern})
		return nil
	})
	if err != nil {
		t.Fatalf("chi.Walk() err = %v", err)
	}
	return routes
}

// fillPattern replaces a route's {params} with values; unknown params get
// "x".
func fillPattern(pattern string, params map[string]string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(pattern, '{')
		if i < 0 {
			b.WriteString(pattern)
			return b.String()
		}
		j := strings.IndexByte(pattern[i:], '}') + i
		b.WriteString(pattern[:i])
		name, _, _ := strings.Cut(pattern[i+1:j], ":")
		if v, ok := params[name]; ok {
			b.WriteString(v)
		} else {
			b.WriteString("x")
		}
		pattern = pattern[j+1:]
	}
}

func isStateChanging(method string) bool {
	return slices.Contains([]string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}, method)
}

// client is a browser: it keeps cookies and echoes the CSRF cookie in the
// X-CSRF-Token header on every request.
type client struct {
	t   *testing.T
	ts  *testServer
	jar *cookiejar.Jar
	hc  *http.Client
}

func (ts *testServer) newClient(t *testing.T) *client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatalf("cookiejar.New() err = %v", err)
	}
	return &client{t: t, ts: ts, jar: jar, hc: &http.Client{Jar: jar}}
}

// signedUp is a new client signed up as email (mustSignup).
func (ts *testServer) signedUp(t *testing.T, email string) *client {
	t.Helper()
	c := ts.newClient(t)
	c.mustSignup(email)
	return c
}

// loggedIn is a new client logged in as email (mustLogin): another browser
// of someone signed up already.
func (ts *testServer) loggedIn(t *testing.T, email string) *client {
	t.Helper()
	c := ts.newClient(t)
	c.mustLogin(email)
	return c
}

// response is a read response.
type response struct {
	req    string
	Status int
	Header http.Header
	Body   []byte
	resp   *http.Response
}

// errorBody is the API's one error shape.
type errorBody struct {
	Error struct {
		Code    mcpgate.Code `json:"code"`
		Message string       `json:"message"`
	} `json:"error"`
}

type meBody struct {
	User struct {
		ID            string `json:"id"`
		Email         string `json:"email"`
		InstanceAdmin bool   `json:"instance_admin"`
	} `json:"user"`
	Workspaces []mcpgate.Workspace `json:"workspaces"`
}

func (r *response) cookie(name string) *http.Cookie {
	for _, c := range r.resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (r *response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("%s: decode body %q: %v", r.req, r.Body, err)
	}
}

// errorCode returns the code of an error response, checking its shape.
func (r *response) errorCode(t *testing.T) mcpgate.Code {
	t.Helper()
	var raw map[string]map[string]any
	if err := json.Unmarshal(r.Body, &raw); err != nil || len(raw) != 1 || len(raw["error"]) != 2 {
		t.Fatalf("%s: body %s is not {\"error\":{\"code\",\"message\"}}", r.req, r.Body)
	}
	var e errorBody
	r.decode(t, &e)
	if e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("%s: error body %s lacks a code or message", r.req, r.Body)
	}
	return e.Error.Code
}

func (r *response) message(t *testing.T) string {
	t.Helper()
	var e errorBody
	r.decode(t, &e)
	return e.Error.Message
}

// wantStatus fails the test unless the response has status want.
func (r *response) wantStatus(t *testing.T, want int) *response {
	t.Helper()
	if r.Status != want {
		t.Fatalf("%s status = %d, want %d; body %s", r.req, r.Status, want, r.Body)
	}
	return r
}

// csrfToken returns the mcpgate_csrf cookie the jar holds for the server.
func (c *client) csrfToken() string { return c.cookieValue(api.CSRFCookie) }

func (c *client) cookieValue(name string) string {
	u, _ := url.Parse(c.ts.URL)
	for _, ck := range c.jar.Cookies(u) {
		if ck.Name == name {
			return ck.Value
		}
	}
	return ""
}

// setCookie puts a cookie in the jar, replacing one of the same name.
func (c *client) setCookie(name, value string) {
	u, _ := url.Parse(c.ts.URL)
	c.jar.SetCookies(u, []*http.Cookie{{Name: name, Value: value, Path: "/"}})
}

// newRequest builds a request. A string or []byte body is sent as it is,
// anything else as JSON; a body is labelled application/json.
func (c *client) newRequest(method, path string, body any) *http.Request {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		case []byte:
			rd = bytes.NewReader(b)
		default:
			j, err := json.Marshal(b)
			if err != nil {
				c.t.Fatalf("marshal %T: %v", body, err)
			}
			rd = bytes.NewReader(j)
		}
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.ts.URL+path, rd)
	if err != nil {
		c.t.Fatalf("NewRequest(%s %s) err = %v", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// do sends a request with the CSRF header.
func (c *client) do(method, path string, body any) *response {
	c.t.Helper()
	req := c.newRequest(method, path, body)
	if tok := c.csrfToken(); tok != "" {
		req.Header.Set(api.CSRFHeader, tok)
	}
	return c.send(req)
}

// send sends req as it is (cookies from the jar are added).
func (c *client) send(req *http.Request) *response {
	c.t.Helper()
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s err = %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	return &response{req: req.Method + " " + req.URL.Path, Status: resp.StatusCode, Header: resp.Header, Body: b, resp: resp}
}

// mustSignup signs up with testPassword and returns /me's body.
func (c *client) mustSignup(email string) *meBody {
	c.t.Helper()
	return c.mustAuth("/api/v1/auth/signup", email, http.StatusCreated)
}

// mustLogin logs in with testPassword and returns /me's body.
func (c *client) mustLogin(email string) *meBody {
	c.t.Helper()
	return c.mustAuth("/api/v1/auth/login", email, http.StatusOK)
}

// mustAuth posts email and testPassword to path, wants status and returns
// the body.
func (c *client) mustAuth(path, email string, status int) *meBody {
	c.t.Helper()
	var me meBody
	c.do("POST", path, map[string]string{"email": email, "password": testPassword}).
		wantStatus(c.t, status).decode(c.t, &me)
	return &me
}

func (c *client) mustMe() *meBody {
	c.t.Helper()
	var me meBody
	c.do("GET", "/api/v1/me", nil).wantStatus(c.t, http.StatusOK).decode(c.t, &me)
	return &me
}

// mustWorkspace creates a workspace and returns its id.
func (c *client) mustWorkspace(name string) string {
	c.t.Helper()
	var ws mcpgate.Workspace
	c.do("POST", "/api/v1/workspaces", map[string]string{"name": name}).wantStatus(c.t, http.StatusCreated).decode(c.t, &ws)
	if ws.ID == "" || ws.Role != mcpgate.RoleOwner {
		c.t.Fatalf("POST /workspaces = %+v, want an id and role owner", ws)
	}
	return ws.ID
}

type invitationBody struct {
	mcpgate.Invitation
	Token     string `json:"token"`
	AcceptURL string `json:"accept_url"`
}

// mustInvite invites email to workspace ws with role and returns the
// invitation with its token.
func (c *client) mustInvite(ws, email string, role mcpgate.Role) *invitationBody {
	c.t.Helper()
	var inv invitationBody
	c.do("POST", "/api/v1/workspaces/"+ws+"/invitations", map[string]any{"email": email, "role": role}).
		wantStatus(c.t, http.StatusCreated).decode(c.t, &inv)
	if inv.Token == "" || inv.ID == "" {
		c.t.Fatalf("POST invitations = %+v, want an id and a token", inv)
	}
	return &inv
}

func (c *client) mustAccept(token string) {
	c.t.Helper()
	c.do("POST", "/api/v1/invitations/"+token+"/accept", nil).wantStatus(c.t, http.StatusOK)
}

// mustStoreUser creates a user directly in the store with testPassword.
func mustStoreUser(t *testing.T, db *store.DB, email string) *mcpgate.User {
	t.Helper()
	hash, err := password.Hash(testPassword, *fastParams)
	if err != nil {
		t.Fatalf("password.Hash() err = %v", err)
	}
	u, err := db.CreateUser(context.Background(), email, hash, nil)
	if err != nil {
		t.Fatalf("CreateUser(%s) err = %v", email, err)
	}
	return u
}

// roleIn returns the role me has in workspace ws, or "".
func roleIn(me *meBody, ws string) mcpgate.Role {
	for _, w := range me.Workspaces {
		if w.ID == ws {
			return w.Role
		}
	}
	return ""
}

// apiServices gives the API the services of set it takes, as the wiring
// does.
func apiServices(set *service.Set) api.Services {
	return api.Services{Accounts: set.Accounts, TwoFactor: set.TwoFactor, Workspaces: set.Workspaces, Keys: set.Keys,
		Connections: set.Connections, Tools: set.Tools, Guardrails: set.Tools, Audit: set.Audit, Approvals: set.Approvals,
		Grants: set.Grants, Notifications: set.Notifications}
}
