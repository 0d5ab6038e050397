package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate/api"
)

type gwRoute struct{ method, pattern string }

// mustGatewayRoutes wires the real gateway over a fresh database and returns
// a server over its handler and every route of its router.
func mustGatewayRoutes(t *testing.T) (*httptest.Server, []gwRoute) {
	t.Helper()
	env := serveEnv(t)
	cfg := mustLoadConfig(t, nil, env)
	ctx := context.Background()
	db := mustOpenStore(t, cfg.DB.URL)
	gw, err := newGateway(ctx, cfg, db, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("newGateway() err = %v", err)
	}
	t.Cleanup(gw.Close)
	h := gw.Handler()
	r, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("gateway handler is a %T, want a chi.Routes", h)
	}
	var routes []gwRoute
	err = chi.Walk(r, func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes = append(routes, gwRoute{method, pattern})
		return nil
	})
	if err != nil {
		t.Fatalf("chi.Walk() err = %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, routes
}

// fill replaces a pattern's {params}; unknown ones become "x".
func fillRoute(pattern string, params map[string]string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(pattern, '{')
		if i < 0 {
			return b.String() + pattern
		}
		j := strings.IndexByte(pattern[i:], '}') + i
		name, _, _ := strings.Cut(pattern[i+1:j], ":")
		v, ok := params[name]
		if !ok {
			v = "x"
		}
		b.WriteString(pattern[:i] + v)
		pattern = pattern[j+1:]
	}
}

type meJSON struct {
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	Workspaces []struct {
		ID string `json:"id"`
	} `json:"workspaces"`
}

func (b *apiBrowser) mustSignup(email string) meJSON {
	b.t.Helper()
	var me meJSON
	out := b.want(201, "POST", "/api/v1/auth/signup", `{"email":"`+email+`","password":"a long enough password"}`)
	if err := json.Unmarshal(out, &me); err != nil || len(me.Workspaces) == 0 {
		b.t.Fatalf("signup body %s: %v", out, err)
	}
	return me
}

// The routes of the wired program, including those mounted beyond the
// foundation (credentials, keys, tools, audit): every state-changing one
// under /api/v1 needs the CSRF header, and every one under /workspaces/{ws}
// answers another workspace's user exactly as a missing workspace.
func TestGateway_EveryRouteGuarded(t *testing.T) {
	srv, routes := mustGatewayRoutes(t)
	a := newAPIBrowser(t, srv.URL)
	aMe := a.mustSignup("a@example.com")
	b := newAPIBrowser(t, srv.URL)
	b.mustSignup("b@example.com")
	params := map[string]string{"ws": aMe.Workspaces[0].ID, "user": aMe.User.ID, "id": "7f6c2a51-33a4-4c5e-9a53-8d3b8e0c1f00",
		"token": "inv_x", "name": "sandbox_create", "key": "k", "connector": "e2b"}
	const body = `{"role":"member","email":"b@example.com","name":"x","enabled":false}`

	var csrfRoutes, wsRoutes int
	for _, rt := range routes {
		if !strings.HasPrefix(rt.pattern, "/api/v1/") {
			continue
		}
		isWrite := rt.method == "POST" || rt.method == "PUT" || rt.method == "PATCH" || rt.method == "DELETE"
		exempt := rt.pattern == "/api/v1/auth/signup" || rt.pattern == "/api/v1/auth/login"
		if isWrite && !exempt {
			csrfRoutes++
			t.Run("csrf "+rt.method+" "+rt.pattern, func(t *testing.T) {
				for _, header := range []string{"", strings.Repeat("x", 32)} {
					req, _ := http.NewRequest(rt.method, srv.URL+fillRoute(rt.pattern, params), strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					if header != "" {
						req.Header.Set(api.CSRFHeader, header)
					}
					resp, err := a.hc.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusForbidden {
						t.Fatalf("header %q: status = %d, want 403", header, resp.StatusCode)
					}
				}
			})
		}
		if strings.Contains(rt.pattern, "{ws}") {
			wsRoutes++
			t.Run("other workspace "+rt.method+" "+rt.pattern, func(t *testing.T) {
				b.t = t
				defer func() { b.t = nil }()
				status, got := b.do(rt.method, fillRoute(rt.pattern, params), body)
				p := map[string]string{}
				for k, v := range params {
					p[k] = v
				}
				p["ws"] = "7f6c2a51-33a4-4c5e-9a53-8d3b8e0c1f01"
				_, missing := b.do(rt.method, fillRoute(rt.pattern, p), body)
				if status != http.StatusNotFound || string(got) != string(missing) || strings.Contains(string(got), "no such API route") {
					t.Fatalf("status %d, body %s; want 404 with the missing workspace's body %s", status, got, missing)
				}
			})
		}
	}
	if csrfRoutes < 7 || wsRoutes < 7 {
		t.Fatalf("walk found %d state-changing and %d workspace routes; want at least the foundation's 7 each: %v", csrfRoutes, wsRoutes, routes)
	}
	a.t, b.t = t, t
	// A is still logged in and still the owner of an untouched workspace.
	if out := a.want(200, "GET", "/api/v1/workspaces/"+aMe.Workspaces[0].ID+"/members", ""); strings.Contains(string(out), "b@example.com") {
		t.Fatalf("B joined A's workspace: %s", out)
	}
}
