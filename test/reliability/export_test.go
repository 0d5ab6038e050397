package reliability

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// stalledExport is an audit export whose client sent the request and reads
// nothing more than the status line, with a small receive buffer: the
// gateway's writes block once the socket's buffers are full, and the export
// holds whatever it holds until it gives up.
type stalledExport struct {
	conn   net.Conn
	status int
	retry  string
}

// openStalledExport sends GET .../audit/export for ws with the cookies of c,
// and reads the status line and headers only (status 0: none in 20 s).
func openStalledExport(t *testing.T, c *client, ws string) *stalledExport {
	t.Helper()
	u, _ := url.Parse(c.base)
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	t.Cleanup(func() { conn.Close() })
	var cookies []string
	for _, ck := range c.jar.Cookies(u) {
		cookies = append(cookies, ck.Name+"="+ck.Value)
	}
	fmt.Fprintf(conn, "GET /api/v1/workspaces/%s/audit/export?format=ndjson HTTP/1.1\r\nHost: %s\r\nCookie: %s\r\n\r\n",
		ws, u.Host, strings.Join(cookies, "; "))
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReaderSize(conn, 512)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return &stalledExport{conn: conn} // no answer: status 0
	}
	// The body is left unread.
	return &stalledExport{conn: conn, status: resp.StatusCode, retry: resp.Header.Get("Retry-After")}
}

// signupFrom is signup by a client whose requests come from addr (behind
// a trusted proxy).
func signupFrom(t *testing.T, base, addr string) *tenant {
	t.Helper()
	c := newClient(t, base, nil)
	c.hc.Transport = headerTransport{name: "X-Forwarded-For", value: addr, base: &http.Transport{}}
	return signupWith(t, c)
}

// fillAudit inserts n audit rows of about 1.2 KB each into ws, so that an
// export of it is far larger than the sockets' buffers.
func fillAudit(t *testing.T, dsn, ws string, n int) {
	t.Helper()
	db := testutil.MustConnect(t, dsn)
	if _, err := db.Exec(context.Background(), `INSERT INTO audit_log (workspace_id, kind, action, arguments, outcome, source, created_at)
		SELECT $1, 'tool_call', 'e2b_list_sandboxes', jsonb_build_object('cmd', repeat('x', 1100), 'i', i), 'ok', 'mcp', now()
		FROM generate_series(1, $2) AS i`, ws, n); err != nil {
		t.Fatal(err)
	}
}

// TestExports_DoNotStallOtherTenants: twelve people each
// open an export of their own workspace and read nothing, on a gateway with
// a pool of 8 (what it had before). Beyond the pool's long-read share the
// exports are refused with 429 and Retry-After; the held ones never take
// the connections other tenants need: another tenant's tool calls with a
// key the gateway has not cached (so they need the database), a login, a
// key creation and /readyz all answer well within 5 s. Before, the exports
// took all 8 connections and every other tenant's call hung.
func TestExports_DoNotStallOtherTenants(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDatabase(t)
	cfg := newGWConfig(t, dsn, startSim(t))
	// Twelve sign-ups from one address would meet the sign-up limit: each
	// comes through a "proxy" with an address of its own.
	cfg.extra = []string{"DATABASE_MAX_CONNS=8", "TRUSTED_PROXIES=127.0.0.1/32"}
	var logs testutil.LockedBuffer
	gw := startGateway(t, cfg, &logs)
	const exporters = 12
	people := make([]*tenant, exporters)
	for i := range people {
		people[i] = signupFrom(t, gw.URL, fmt.Sprintf("192.0.2.%d", i+1))
		fillAudit(t, dsn, people[i].ws, 8000)
	}
	other := newTenant(t, gw.URL, nil)
	fresh := other.createKey("first used while the exports stall")
	rc := newRPCClient(t, gw.URL, fresh.Key)
	rc.hc.Timeout = 5 * time.Second

	exports := make([]*stalledExport, exporters)
	var wg sync.WaitGroup
	for i, p := range people {
		wg.Go(func() { exports[i] = openStalledExport(t, p.client, p.ws) })
	}
	wg.Wait()
	statuses := map[int]int{}
	for _, e := range exports {
		statuses[e.status]++
		if e.status == http.StatusTooManyRequests {
			if s, err := strconv.Atoi(e.retry); err != nil || s < 1 {
				t.Errorf("429 with Retry-After %q, want seconds", e.retry)
			}
		}
	}
	if statuses[http.StatusOK] == 0 || statuses[http.StatusTooManyRequests] == 0 ||
		statuses[http.StatusOK]+statuses[http.StatusTooManyRequests] != exporters {
		t.Errorf("12 exports answered %v, want some 200 (the pool's long-read share) and the rest 429", statuses)
	}
	// The held exports have filled their sockets and block in a write.
	time.Sleep(time.Second)

	timed := func(name string, fn func() bool) {
		start := time.Now()
		ok := fn()
		d := time.Since(start)
		if !ok {
			t.Errorf("%s while the exports stall: failed after %s", name, d.Round(time.Millisecond))
		}
		t.Logf("%s while %d exports stall: %s", name, statuses[http.StatusOK], d.Round(time.Millisecond))
	}
	for i := range 5 {
		timed(fmt.Sprintf("tool call %d of another tenant", i), func() bool { return rc.call(e2b.ToolListSandboxes, fmt.Sprintf("other-%d", i)).ok() })
	}
	login := newClient(t, gw.URL, nil)
	login.hc.Timeout = 5 * time.Second
	timed("login of another tenant", func() bool {
		st, _ := login.try("POST", "/api/v1/auth/login", map[string]string{"email": other.email, "password": testPassword})
		return st == http.StatusOK
	})
	other.hc.Timeout = 5 * time.Second
	timed("key creation of another tenant", func() bool {
		st, _ := other.try("POST", "/api/v1/workspaces/"+other.ws+"/keys", map[string]string{"name": "during the exports"})
		return st == http.StatusCreated
	})
	timed("/readyz", func() bool { st, _ := httpGet(gw.URL + "/readyz"); return st == http.StatusOK })
	if n := metric(gw.URL, "mcpgate_db_pool_max_connections"); n != 8 {
		t.Errorf("pool size = %v, want DATABASE_MAX_CONNS=8", n)
	}
	t.Logf("pool connections in use while the exports stall: %v of 8", metric(gw.URL, "mcpgate_db_pool_acquired_connections"))

	// The readers go away; their exports end and the slots come back.
	for _, e := range exports {
		e.conn.Close()
	}
	if !eventually(10*time.Second, func() bool {
		e := openStalledExport(t, people[0].client, people[0].ws)
		e.conn.Close()
		return e.status == http.StatusOK
	}) {
		t.Errorf("no export accepted after the stalled readers went away")
	}
}
