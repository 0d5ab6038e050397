package reliability

import (
	"net/http"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// revokeBound is how soon a revoke made on one replica must be honoured on
// every other (issue 20; README and SECURITY.md state it).
const revokeBound = time.Second

// revokeLag revokes key on the replica tn talks to, retrying while that
// replica's API answers 503 (right after an outage), and then calls with the
// key on another replica through other until it is refused (401). It
// returns when the revoke that succeeded was sent (the commit comes after
// it) and the time from then to the first refusal, and fails the test if
// other accepted a call sent later than bound after that.
func revokeLag(t *testing.T, tn *tenant, key keyCreated, other *rpcClient, bound time.Duration) (sent time.Time, lag time.Duration) {
	t.Helper()
	if !eventually(30*time.Second, func() bool {
		sent = time.Now()
		st, _ := tn.try("DELETE", "/api/v1/workspaces/"+tn.ws+"/keys/"+key.ID, nil)
		return st == http.StatusNoContent
	}) {
		t.Fatalf("revoke of %s did not succeed in 30 s", key.ID)
	}
	for i := 0; ; i++ {
		r := other.call(e2b.ToolListSandboxes, "revoked-"+key.ID+"-"+string(rune('a'+i%26)))
		if r.ok() && r.sent.Sub(sent) > bound {
			t.Errorf("the other replica accepted the revoked key %s after the revoke (bound %s)", r.sent.Sub(sent).Round(time.Millisecond), bound)
		}
		if r.status == http.StatusUnauthorized {
			return sent, r.answered.Sub(sent)
		}
		if time.Since(sent) > 40*time.Second {
			t.Fatalf("the other replica still does not refuse the revoked key 40 s after the revoke: %v", r)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRevoke_SteadyState: a key revoked on replica 1 is refused by replica 2,
// which had it cached, within revokeBound (LISTEN/NOTIFY).
func TestRevoke_SteadyState(t *testing.T) {
	t.Parallel()
	cfg := newGWConfig(t, storetest.NewDatabase(t), startSim(t))
	var logs testutil.LockedBuffer
	g1 := startGateway(t, cfg, &logs)
	g2 := startGateway(t, cfg.replica(t), &logs)
	tn := newTenant(t, g1.URL, nil)
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
