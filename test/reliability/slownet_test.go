package reliability

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// slowBound is the most a call may take with every database packet 200 ms
// late: the store's query timeout (5 s). Nothing a call needs waits on a
// slow database longer; a busy key's cached entries are reloaded in the
// background (the callers of a key share one load), so its calls do not
// wait at all.
const slowBound = 5 * time.Second

// TestDatabaseSlow_200msPerPacket: every packet between the gateway and
// PostgreSQL is 200 ms late each way (a round trip is 400 ms), for longer
// than a cache TTL, under an open loop of 20 calls/s with one key. Before,
// every 30 s all the calls at the reload of the key, its policy and its
// credential each loaded them again, the pool ran out (8 of 8) and calls
// waited up to 9.8 s (p99). Now: every call succeeds and is audited, none
// waits longer than the query timeout, and the pool never runs out.
func TestDatabaseSlow_200msPerPacket(t *testing.T) {
	t.Parallel()
	direct := storetest.NewDatabase(t)
	proxy := newHoldProxy(t, hostPort(t, direct))
	f := newFixture(t, proxy.dsn(t, direct), startSim(t))
	db := testutil.MustConnect(t, direct)
	settle(t, f.gw.URL, db)
	if r := f.rc.call(e2b.ToolListSandboxes, "warm"); !r.ok() {
		t.Fatalf("baseline call = %v", r)
	}
	known := f.rc
	known.hc.Timeout = hangBound
	maxConns := metric(f.gw.URL, "mcpgate_db_pool_max_connections")

	proxy.setDelay(200 * time.Millisecond)
	var calls callLog
	stop := make(chan struct{})
	wait := openLoop(20, stop, func(i int) { calls.add(known.call(e2b.ToolListSandboxes, "slow-"+strconv.Itoa(i))) })
	var peak float64
	var mu sync.Mutex
	sample := make(chan struct{})
	go func() {
		defer close(sample)
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			if n := metric(f.gw.URL, "mcpgate_db_pool_acquired_connections"); n >= 0 {
				mu.Lock()
				peak = max(peak, n)
				mu.Unlock()
			}
		}
	}()
	time.Sleep(cacheTTL + 10*time.Second) // past one reload of everything the key's calls use
	close(stop)
	wait()
	<-sample
	proxy.setDelay(0)

	all := calls.all()
	var took []time.Duration
	for _, r := range all {
		d := r.answered.Sub(r.sent)
		took = append(took, d)
		switch {
		case !r.ok():
			t.Errorf("call %v, want success", r)
		case d > slowBound:
			t.Errorf("call %s took %s, want under %s", r.tag, d.Round(time.Millisecond), slowBound)
		}
	}
	slices.Sort(took)
	if len(took) == 0 {
		t.Fatal("no calls made")
	}
	pct := func(p float64) time.Duration {
		return took[min(len(took)-1, int(float64(len(took))*p))].Round(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if maxConns > 0 && peak >= maxConns {
		t.Errorf("the pool ran out: %v of %v connections in use", peak, maxConns)
	}
	// Every answered call is audited once (the audit writer's batches go
	// through the slow link too).
	if !eventually(30*time.Second, func() bool { return len(unaudited(t, db, all)) == 0 }) {
		t.Errorf("%d answered calls have no audit row", len(unaudited(t, db, all)))
	}
	t.Logf("200 ms per packet for %s at 20 calls/s: %d calls, p50 %s, p99 %s, max %s; pool peak %v of %v",
		cacheTTL+10*time.Second, len(all), pct(0.5), pct(0.99), took[len(took)-1].Round(time.Millisecond), peak, maxConns)
}
