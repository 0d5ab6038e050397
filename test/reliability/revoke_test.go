package reliability

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// revokeBound is how soon a revoke made on one replica must be honoured on
// every other (README and SECURITY.md promise it).
const revokeBound = time.Second

// revokeLag revokes key on the replica tn talks to, retrying while that
// replica's API answers 503 (right after an outage), and then calls with the
// key on another replica through other until it is refused (see
// refusedAfter). It returns when the revoke that succeeded was sent (the
// commit comes after it) and the time from then to the first refusal.
func revokeLag(t *testing.T, tn *tenant, key keyCreated, other *rpcClient, bound time.Duration) (sent time.Time, lag time.Duration) {
	t.Helper()
	if !eventually(30*time.Second, func() bool {
		sent = time.Now()
		st, _ := tn.try("DELETE", "/api/v1/workspaces/"+tn.ws+"/keys/"+key.ID, nil)
		return st == http.StatusNoContent
	}) {
		t.Fatalf("revoke of %s did not succeed in 30 s", key.ID)
	}
	return sent, refusedAfter(t, other, sent, bound)
}

// refusedAfter calls through c, whose key was revoked at since, until the
// gateway refuses it (401), and returns how long after since that was. It
// fails the test if a call sent later than bound after since was accepted.
func refusedAfter(t *testing.T, c *rpcClient, since time.Time, bound time.Duration) time.Duration {
	t.Helper()
	send := func(i int) rpcResult { return c.call(e2b.ToolListSandboxes, fmt.Sprintf("after-revoke-%d", i)) }
	calls := pollUntil(send, since.Add(bound+10*time.Second), func(r rpcResult) bool { return r.status == http.StatusUnauthorized })
	for _, r := range calls {
		if r.ok() && r.sent.Sub(since) > bound {
			t.Errorf("the revoked key was accepted %s after the revoke (bound %s)", r.sent.Sub(since).Round(time.Millisecond), bound)
		}
	}
	last := calls[len(calls)-1]
	if last.status != http.StatusUnauthorized {
		t.Fatalf("the revoked key is still not refused %s after the revoke: %v", time.Since(since).Round(time.Millisecond), last)
	}
	return last.answered.Sub(since)
}

// revokeUnannounced revokes a key as RevokeKey does but sends no
// notification: a revoke whose notification never reached the replicas.
func revokeUnannounced(t *testing.T, db *pgx.Conn, keyID string) time.Time {
	t.Helper()
	if _, err := db.Exec(context.Background(), `UPDATE api_keys SET revoked_at = now() WHERE id = $1`, keyID); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// TestRevoke_SteadyState: a key revoked on replica 1 is refused by replica 2,
// which had it cached, within revokeBound (LISTEN/NOTIFY).
func TestRevoke_SteadyState(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.NewDatabase(t), startSim(t))
	g2, tn := f.replica(t), f.tn
	var worst time.Duration
	for i := range 5 {
		k := tn.createKey("revoked in steady state")
		c2 := newRPCClient(t, g2.URL, k.Key)
		if r := c2.call(e2b.ToolListSandboxes, "warm-"+k.ID); !r.ok() {
			t.Fatalf("call on replica 2 before the revoke = %v", r)
		}
		_, lag := revokeLag(t, tn, k, c2, revokeBound)
		t.Logf("revoke %d: replica 2 refused the key %s after the revoke was sent", i, lag.Round(time.Millisecond))
		worst = max(worst, lag)
	}
	if worst > revokeBound {
		t.Errorf("worst revoke lag %s, want under %s", worst, revokeBound)
	}
	t.Logf("worst of 5: %s", worst.Round(time.Millisecond))
}

// cacheTTL is how long a replica trusts a cached key without a
// notification (service.Options.CacheTTL's default).
const cacheTTL = 30 * time.Second

// TestRevoke_NotificationLost is the hard case: a revoke committed whose
// notification never reached the replica that has the key cached.
//
// With the database up, the replica reloads the key when its cache entry is
// cacheTTL old: the key lives on at most cacheTTL after the revoke.
//
// If the database goes away right after the revoke, the replica serves the
// key on what it knew through the outage (OUTAGE_GRACE: it cannot tell this
// revoke from no change), and refuses it within revokeBound of the database
// answering again.
func TestRevoke_NotificationLost(t *testing.T) {
	t.Parallel()
	t.Run("database up", func(t *testing.T) {
		t.Parallel()
		dsn := storetest.NewDatabase(t)
		f := newFixture(t, dsn, startSim(t))
		c := f.rc
		if r := c.call(e2b.ToolListSandboxes, "warm"); !r.ok() { // the entry is cacheTTL fresh from now
			t.Fatalf("call before the revoke = %v", r)
		}
		lag := refusedAfter(t, c, revokeUnannounced(t, testutil.MustConnect(t, dsn), f.tn.key.ID), cacheTTL+revokeBound)
		t.Logf("a revoke without its notification took effect after %s (bound: the %s cache TTL)", lag.Round(time.Millisecond), cacheTTL)
	})
	t.Run("outage right after", func(t *testing.T) {
		t.Parallel()
		dir := testutil.ClusterDir(t)
		cluster := mustCluster(t, dir)
		f := newFixture(t, cluster.DSN(), startSim(t))
		c, db := f.rc, testutil.MustConnect(t, cluster.DSN())
		settle(t, f.gw.URL, db)
		if r := c.call(e2b.ToolListSandboxes, "warm"); !r.ok() {
			t.Fatalf("call before the revoke = %v", r)
		}
		revoked := revokeUnannounced(t, db, f.tn.key.ID)
		stopCluster(t, cluster)
		accepted, refused, others := 0, 0, map[string]int{}
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			switch r := c.call(e2b.ToolListSandboxes, "during"); {
			case r.ok():
				accepted++
			case r.status == http.StatusUnauthorized:
				refused++
			default:
				r.tag, r.sent, r.answered = "", time.Time{}, time.Time{}
				others[r.String()]++
			}
		}
		switch {
		case accepted == 0 && len(others) == 0:
			// Refused on a reload: the database was still answering, which
			// is not the case under test (seen once on a loaded machine).
			t.Logf("the key was refused %d times during the outage: the database still answered", refused)
		case accepted == 0:
			t.Errorf("the replica did not serve the cached key during the outage; SECURITY.md says it does (OUTAGE_GRACE); "+
				"it answered %d×401 and %v\n%s", refused, others, tail(f.logs.String(), 4000))
		}
		mustCluster(t, dir)
		back := time.Now()
		lag := refusedAfter(t, c, back, revokeBound)
		if lag > revokeBound {
			t.Errorf("the key was refused %s after the database came back, want under %s", lag, revokeBound)
		}
		t.Logf("a revoke without its notification, then a %s outage: the key worked %d times during the outage and was refused %s "+
			"after the database came back (%s after the revoke)", back.Sub(revoked).Round(100*time.Millisecond), accepted,
			lag.Round(time.Millisecond), back.Add(lag).Sub(revoked).Round(time.Millisecond))
	})
}
