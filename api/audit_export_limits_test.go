package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
)

// exportHold holds every export of a test server in the database: a
// transaction of the test locks audit_log, so that each export's query waits
// for the lock, holding its pool connection as an export to a reader that
// does not read does, until release.
type exportHold struct {
	t  *testing.T
	ts *testServer
	tx pgx.Tx
}

func holdExports(t *testing.T, ts *testServer) *exportHold {
	t.Helper()
	tx, err := ts.db.Pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	h := &exportHold{t: t, ts: ts, tx: tx}
	t.Cleanup(h.release)
	return h
}

func (h *exportHold) release() { _ = h.tx.Rollback(context.Background()) }

// waiting is how many statements on audit_log wait for the lock.
func (h *exportHold) waiting() int {
	h.t.Helper()
	var n int
	err := h.ts.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%audit_log%'`).Scan(&n)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// waitFor fails the test unless waiting() reaches n within 5 s.
func (h *exportHold) waitFor(n int) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.waiting() != n {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d exports wait in the database, want %d", h.waiting(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startExport sends GET .../audit/export for c's personal workspace in the
// background; the channel gets the status once it answers. cancel makes
// the client go away.
func startExport(t *testing.T, c *client, ws string) (status <-chan int, cancel func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req := c.newRequest("GET", "/api/v1/workspaces/"+ws+"/audit/export", nil).WithContext(ctx)
	ch := make(chan int, 1)
	go func() {
		resp, err := c.hc.Do(req)
		if err != nil {
			ch <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ch <- resp.StatusCode
	}()
	t.Cleanup(cancel)
	return ch, cancel
}

func personalWS(t *testing.T, c *client) string {
	t.Helper()
	me := c.mustMe()
	if len(me.Workspaces) == 0 {
		t.Fatal("no workspace")
	}
	return me.Workspaces[0].ID
}

func wantTooMany(t *testing.T, r *response) {
	t.Helper()
	r.wantStatus(t, http.StatusTooManyRequests)
	if code := r.errorCode(t); code != mcpgate.ETooMany {
		t.Errorf("%s code = %s, want %s", r.req, code, mcpgate.ETooMany)
	}
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("%s Retry-After = %q, want seconds", r.req, r.Header.Get("Retry-After"))
	}
}

// TestAuditExport_Limits: a person runs at most two
// exports at once, and the instance no more than the pool's long-read slots
// (a quarter of the pool); beyond either, 429 with Retry-After in the API's
// error shape, at once rather than queued. Before, every export took a pool
// connection for as long as its reader wanted, and a handful of them took
// the whole pool from every tenant.
func TestAuditExport_Limits(t *testing.T) {
	ts := newTestServer(t, api.Options{})
	slots := ts.db.LongReadSlots()
	if slots < 2 || slots >= int(ts.db.MaxConns()) {
		t.Fatalf("LongReadSlots() = %d of a pool of %d, want a share of it", slots, ts.db.MaxConns())
	}
	people := make([]*client, slots/2+2)
	for i := range people {
		people[i] = ts.signedUp(t, fmt.Sprintf("exporter%d@example.com", i))
	}
	hold := holdExports(t, ts)

	// One person: two exports run, the third is refused.
	a, wsA := people[0], personalWS(t, people[0])
	var running []<-chan int
	for range 2 {
		st, _ := startExport(t, a, wsA)
		running = append(running, st)
	}
	hold.waitFor(2)
	wantTooMany(t, a.do("GET", "/api/v1/workspaces/"+wsA+"/audit/export", nil))

	// Others fill the instance's slots; one more person is refused.
	held := 2
	for _, c := range people[1:] {
		ws := personalWS(t, c)
		for range 2 {
			if held == slots {
				break
			}
			st, _ := startExport(t, c, ws)
			running = append(running, st)
			held++
			hold.waitFor(held)
		}
	}
	last := people[len(people)-1]
	wantTooMany(t, last.do("GET", "/api/v1/workspaces/"+personalWS(t, last)+"/audit/export", nil))
	if got := ts.db.Pool.Stat().AcquiredConns(); int(got) > slots+1 {
		t.Errorf("%d pool connections in use with %d exports held, want at most %d (the exports' share and the test's lock)",
			got, slots, slots+1)
	}

	// Once the exports end, the slots are free again.
	hold.release()
	for i, st := range running {
		if s := <-st; s != http.StatusOK {
			t.Errorf("held export %d = %d, want 200", i, s)
		}
	}
	last.do("GET", "/api/v1/workspaces/"+personalWS(t, last)+"/audit/export", nil).wantStatus(t, http.StatusOK)
	a.do("GET", "/api/v1/workspaces/"+wsA+"/audit/export", nil).wantStatus(t, http.StatusOK)
}

// TestAuditExport_ClientGoneCancelsQuery: a client that
// goes away while its export waits in the database ends the export's query
// and gives its connection back to the pool, at once. Before, the export
// ran detached from the request (context.WithoutCancel, for up to an hour).
func TestAuditExport_ClientGoneCancelsQuery(t *testing.T) {
	ts := newTestServer(t, api.Options{})
	c := ts.signedUp(t, "leaver@example.com")
	ws := personalWS(t, c)
	hold := holdExports(t, ts)
	before := ts.db.Pool.Stat().AcquiredConns()
	st, cancel := startExport(t, c, ws)
	hold.waitFor(1)
	cancel()
	if s := <-st; s != 0 {
		t.Fatalf("export answered %d before the lock was released", s)
	}
	gone := time.Now()
	hold.waitFor(0)
	deadline := time.Now().Add(5 * time.Second)
	for ts.db.Pool.Stat().AcquiredConns() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d pool connections in use 5 s after the client went, want %d", ts.db.Pool.Stat().AcquiredConns(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the export's query ended %s after its client went", time.Since(gone).Round(time.Millisecond))
	// The person may export again at once: the export is no longer counted.
	hold.release()
	c.do("GET", "/api/v1/workspaces/"+ws+"/audit/export", nil).wantStatus(t, http.StatusOK)
}
