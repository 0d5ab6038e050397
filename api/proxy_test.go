package api_test

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/internal/httpx"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// loginFrom logs in through a proxy that says the client is addr.
func (ts *testServer) loginFrom(t *testing.T, addr, email, pw string) *response {
	t.Helper()
	c := ts.newClient(t)
	req := c.newRequest("POST", "/api/v1/auth/login", map[string]string{"email": email, "password": pw})
	req.Header.Set("X-Forwarded-For", addr)
	return c.send(req)
}

// TestLogin_BehindTrustedProxy: behind a trusted proxy
// the per-address limit counts the client the proxy names, so one client's
// failures do not lock out everyone; from an untrusted peer the header is
// not believed, so it cannot be used to dodge the limit.
func TestLogin_BehindTrustedProxy(t *testing.T) {
	t.Parallel()
	px, err := httpx.ParseProxies("127.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, api.Options{TrustedProxies: px})
	for i := range 8 {
		mustStoreUser(t, ts.db, "user"+strconv.Itoa(i)+"@example.com")
	}
	// 30 failures from one client, 5 on each of 6 accounts.
	for i := range 6 {
		for range 5 {
			ts.loginFrom(t, "198.51.100.1", "user"+strconv.Itoa(i)+"@example.com", "wrong password").
				wantStatus(t, http.StatusUnauthorized)
		}
	}
	ts.loginFrom(t, "198.51.100.1", "user6@example.com", testPassword).wantStatus(t, http.StatusTooManyRequests)
	// Another client behind the same proxy is not locked out.
	ts.loginFrom(t, "198.51.100.2", "user7@example.com", testPassword).wantStatus(t, http.StatusOK)
	// A spoofed hop left of the one the proxy appended changes nothing.
	ts.loginFrom(t, "203.0.113.9, 198.51.100.1", "user6@example.com", testPassword).wantStatus(t, http.StatusTooManyRequests)

	// Without trusted proxies the header is the client's word: not believed.
	plain := newTestServer(t, api.Options{})
	for i := range 7 {
		mustStoreUser(t, plain.db, "user"+strconv.Itoa(i)+"@example.com")
	}
	for i := range 6 {
		for j := range 5 {
			plain.loginFrom(t, "198.51.100."+strconv.Itoa(i*5+j), "user"+strconv.Itoa(i)+"@example.com", "wrong password").
				wantStatus(t, http.StatusUnauthorized)
		}
	}
	plain.loginFrom(t, "192.0.2.200", "user6@example.com", testPassword).wantStatus(t, http.StatusTooManyRequests)
}

// TestAccessLog_ClientAddress: the access log records the
// client address the limits count, from a trusted proxy's header only.
func TestAccessLog_ClientAddress(t *testing.T) {
	px, _ := httpx.ParseProxies("127.0.0.0/8,::1")
	for _, tt := range []struct {
		name    string
		proxies *httpx.Proxies
		want    string
	}{
		{name: "trusted proxy", proxies: px, want: `"client_address":"198.51.100.9"`},
		{name: "no trusted proxy", want: `"client_address":"127.0.0.1"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs testutil.LockedBuffer
			ts := newTestServer(t, api.Options{TrustedProxies: tt.proxies, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			req, _ := http.NewRequest(http.MethodGet, ts.URL+"/healthz", nil)
			req.Header.Set("X-Forwarded-For", "198.51.100.9")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			req, _ = http.NewRequest(http.MethodGet, ts.URL+"/api/v1/me", nil)
			req.Header.Set("X-Forwarded-For", "198.51.100.9")
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if !strings.Contains(logs.String(), tt.want) {
				t.Errorf("access log lacks %s:\n%s", tt.want, logs.String())
			}
		})
	}
}
