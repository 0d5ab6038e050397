package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/password"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/mcp"
)

// stack is the whole HTTP surface over a real database, as serve wires it,
// with e2bsim as E2B; owner is a signed-in workspace owner.
type stack struct {
	db     *store.DB
	h      http.Handler
	sim    *e2bsim.Server
	owner  stackUser
	ws     string
	keyID  string
	secret []byte
}

// stackUser is a session: its cookies, sent by hand.
type stackUser struct {
	id, session, csrf string
}

func newStack(tb testing.TB) *stack {
	tb.Helper()
	sim := e2bsim.New(e2bsim.Options{})
	simSrv := httptest.NewServer(sim)
	tb.Cleanup(simSrv.Close)
	registry := connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: simSrv.URL, DashboardURL: simSrv.URL}))
	env := servicetest.New(tb, service.Options{Registry: registry, PublicURL: "http://localhost:8080",
		PasswordParams: &password.Params{Time: 1, Memory: 1024, Threads: 1}, CallTimeout: 5 * time.Second})
	db, svc := env.DB, env.Service
	keys := auth.NewKeys(auth.KeysOptions{Store: db, Trust: svc.CacheTrust()})
	tb.Cleanup(keys.Close)
	gw := mcp.New(mcp.Options{Tools: svc.Tools, Registry: registry, Authenticators: []mcpgate.Authenticator{keys}, Tokens: db,
		PublicURL: "http://localhost:8080", ConfirmationSecret: []byte("stack-confirmation-secret-0123456789")})
	tb.Cleanup(gw.Close)
	secret := []byte("stack-jwt-secret-0123456789abcdefghij")
	srv := api.New(api.Options{Services: apiServices(svc), Sessions: db, JWTSecret: secret,
		PublicURL: "http://localhost:8080", Ready: db.Ready, MCP: gw.Handler()})
	s := &stack{db: db, h: srv.Handler(), sim: sim, secret: secret}
	s.owner = s.signup(tb, "owner@example.com", "")
	var me struct {
		Workspaces []mcpgate.Workspace `json:"workspaces"`
	}
	s.mustJSON(tb, s.owner, "GET", "/api/v1/me", nil, http.StatusOK, &me)
	s.ws = me.Workspaces[0].ID
	s.mustJSON(tb, s.owner, "PUT", "/api/v1/workspaces/"+s.ws+"/connections/e2b", map[string]string{"api_key": "e2b_00112233445566778899"}, http.StatusOK, nil)
	var k struct{ ID string }
	s.mustJSON(tb, s.owner, "POST", "/api/v1/workspaces/"+s.ws+"/keys", map[string]string{"name": "k"}, http.StatusCreated, &k)
	s.keyID = k.ID
	return s
}

// serve runs one request through the handler as user (zero: anonymous).
func (s *stack) serve(u stackUser, method, path, contentType string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "http://localhost:8080/", bytes.NewReader(body))
	r.URL.Path = path
	r.RequestURI = ""
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	if u.session != "" {
		r.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: u.session})
		r.AddCookie(&http.Cookie{Name: api.CSRFCookie, Value: u.csrf})
		r.Header.Set(api.CSRFHeader, u.csrf)
	}
	r.RemoteAddr = "192.0.2.10:5555"
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, r)
	return w
}

func (s *stack) mustJSON(tb testing.TB, u stackUser, method, path string, body any, want int, out any) {
	tb.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	w := s.serve(u, method, path, "application/json", b)
	if w.Code != want {
		tb.Fatalf("%s %s = %d %s, want %d", method, path, w.Code, w.Body, want)
	}
	if out != nil {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			tb.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// signup signs email up, accepting invitation when it is not empty.
func (s *stack) signup(tb testing.TB, email, invitation string) stackUser {
	tb.Helper()
	req := map[string]string{"email": email, "password": "correct horse battery staple"}
	if invitation != "" {
		req["invitation"] = invitation
	}
	b, _ := json.Marshal(req)
	w := s.serve(stackUser{}, "POST", "/api/v1/auth/signup", "application/json", b)
	if w.Code != http.StatusCreated {
		tb.Fatalf("signup %s = %d %s", email, w.Code, w.Body)
	}
	var u stackUser
	for _, c := range w.Result().Cookies() {
		switch c.Name {
		case api.SessionCookie:
			u.session = c.Value
		case api.CSRFCookie:
			u.csrf = c.Value
		}
	}
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	_ = json.Unmarshal(w.Body.Bytes(), &me)
	u.id = me.User.ID
	return u
}

// rowCounts counts the rows of every table.
func rowCounts(tb testing.TB, db *store.DB) map[string]int {
	tb.Helper()
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	if err != nil {
		tb.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]int{}
	for _, t := range tables {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{t}.Sanitize()).Scan(&n); err != nil {
			tb.Fatal(err)
		}
		out[t] = n
	}
	return out
}

// as returns who calls path: anonymous for sign-up and login (a login
// replaces the caller's session), the owner otherwise.
func (s *stack) as(path string) stackUser {
	if strings.HasPrefix(path, "/api/v1/auth/") {
		return stackUser{}
	}
	return s.owner
}

// bodyRoutes are the routes that read a JSON body, as the owner calls them.
func (s *stack) bodyRoutes() []struct{ method, path string } {
	ws := "/api/v1/workspaces/" + s.ws
	return []struct{ method, path string }{
		{"POST", "/api/v1/auth/signup"}, {"POST", "/api/v1/auth/login"}, {"POST", "/api/v1/workspaces"},
		{"PATCH", ws + "/members/" + s.owner.id}, {"POST", ws + "/invitations"}, {"PUT", ws + "/connections/e2b"},
		{"PUT", ws + "/tools/" + e2b.ToolKillSandbox}, {"POST", ws + "/tools/" + e2b.ToolListSandboxes + "/call"},
		{"POST", ws + "/tools/" + e2b.ToolCreateSandbox + "/call"}, {"POST", ws + "/keys"},
	}
}

// TestBadBodies sends every JSON route bodies it must refuse: each answers
// 400 in the API's error shape, and no table changes.
func TestBadBodies(t *testing.T) {
	s := newStack(t)
	huge := map[string]string{}
	for i := range 5000 {
		huge[strings.Repeat("k", 8)+string(rune(0x4e00+i))] = "v"
	}
	hugeJSON, _ := json.Marshal(map[string]any{"name": "x", "metadata": huge})
	tests := []struct {
		name, contentType string
		body              []byte
	}{
		{"oversized", "application/json", append([]byte(`{"name":"`), append(bytes.Repeat([]byte("a"), 70<<10), []byte(`"}`)...)...)},
		{"huge map", "application/json", hugeJSON},
		{"no content type", "", []byte(`{"name":"x"}`)},
		{"text/plain", "text/plain", []byte(`{"name":"x"}`)},
		{"form", "application/x-www-form-urlencoded", []byte(`name=x`)},
		{"multipart", "multipart/form-data; boundary=x", []byte("--x\r\n\r\n--x--")},
		{"bad media type", "application/json; ;;=", []byte(`{"name":"x"}`)},
		{"unknown field", "application/json", []byte(`{"name":"x","is_admin":true,"role":"owner","workspace_id":"x"}`)},
		// Every field any route reads, each with invalid UTF-8: no route
		// may store the replacement character instead of refusing.
		{"invalid UTF-8", "application/json", []byte("{\"name\":\"k\xff\"}")},
		{"invalid UTF-8 email", "application/json", []byte("{\"email\":\"a\xff@b.co\",\"password\":\"correct horse battery staple\",\"role\":\"member\"}")},
		{"invalid UTF-8 password", "application/json", []byte("{\"email\":\"new@b.co\",\"password\":\"correct horse \xc3\x28 staple\"}")},
		{"invalid UTF-8 argument", "application/json", []byte("{\"arguments\":{\"metadata\":\"a=\xff\"}}")},
		{"two objects", "application/json", []byte(`{"name":"x"}{"name":"y"}`)},
		{"array", "application/json", []byte(`[{"name":"x"}]`)},
		{"empty", "application/json", nil},
		{"truncated", "application/json", []byte(`{"name":`)},
		{"wrong types", "application/json", []byte(`{"name":5,"email":[],"password":{},"enabled":"yes","arguments":7,"api_key":1,"scope":2,"expires_at":"soon"}`)},
		{"deep nesting", "application/json", append(bytes.Repeat([]byte("["), 100000), bytes.Repeat([]byte("]"), 100000)...)},
	}
	for _, rt := range s.bodyRoutes() {
		for _, tt := range tests {
			t.Run(rt.method+" "+rt.path[strings.LastIndexByte(rt.path, '/')+1:]+"/"+tt.name, func(t *testing.T) {
				before := rowCounts(t, s.db)
				w := s.serve(s.as(rt.path), rt.method, rt.path, tt.contentType, tt.body)
				if w.Code != http.StatusBadRequest {
					t.Fatalf("%s %s = %d %s, want 400", rt.method, rt.path, w.Code, w.Body)
				}
				var e struct {
					Error struct{ Code, Message string }
				}
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code != "invalid" || e.Error.Message == "" {
					t.Errorf("body %s is not an invalid-request error", w.Body)
				}
				if after := rowCounts(t, s.db); !mapsEqual(before, after) {
					t.Errorf("row counts changed: %v -> %v", before, after)
				}
			})
		}
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// FuzzAPIBodies sends arbitrary bodies and content types to every JSON
// route, signed in as the workspace owner: nothing panics and nothing is a
// server error.
func FuzzAPIBodies(f *testing.F) {
	s := newStack(f)
	routes := s.bodyRoutes()
	seeds := []string{`{}`, `{"email":"a@b.co","password":"correct horse battery staple"}`, `{"name":"w"}`,
		`{"role":"member"}`, `{"role":"owner"}`, `{"email":"x@y.z","role":"admin"}`, `{"api_key":"e2b_0011"}`,
		`{"enabled":true,"needs_confirmation":false}`, `{"arguments":{"limit":5}}`, `{"arguments":{"limit":-5},"confirmed":true}`,
		`{"arguments":{"env_vars":{"A":"B"},"timeout":99999999999}}`, `{"name":"k","scope":"read_only","expires_at":"2999-01-01T00:00:00Z"}`,
		`{"name":"k","expires_at":"0001-01-01T00:00:00Z"}`, `{"name":"` + strings.Repeat("\u202e", 100) + `"}`, "\xff", `null`}
	for i, body := range seeds {
		for j := range routes {
			if (i+j)%3 == 0 {
				f.Add(uint8(j), "application/json", []byte(body))
			}
		}
	}
	f.Add(uint8(0), "application/json; charset=utf-16", []byte(`{}`))
	f.Add(uint8(1), "text/html", []byte(`<x>`))
	f.Fuzz(func(t *testing.T, which uint8, contentType string, body []byte) {
		rt := routes[int(which)%len(routes)]
		w := s.serve(s.as(rt.path), rt.method, rt.path, contentType, body)
		if w.Code >= 500 {
			t.Fatalf("%s %s %q %q = %d %s", rt.method, rt.path, contentType, body, w.Code, w.Body)
		}
		if w.Code >= 400 && !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%s %s: error body %q is not JSON", rt.method, rt.path, w.Body)
		}
	})
}
