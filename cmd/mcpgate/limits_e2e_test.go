package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRateLimits_SharedAcrossReplicas: behind a load balancer the replicas
// together allow one key its configured burst, not a burst each: each
// enforces its share (here two replicas, a burst of 4: two calls on each),
// and a replica that stops is no longer counted.
func TestRateLimits_SharedAcrossReplicas(t *testing.T) {
	// A rate so low that no token comes back during the test.
	e := newE2EEnvWith(t, 2, map[string]string{"MCP_KEY_RATE": "0.0001", "MCP_KEY_BURST": "4"})
	a, b := e.replicas[0], e.replicas[1]
	waitReplicas(t, a.url, 2)
	waitReplicas(t, b.url, 2)

	u, _ := e.signupWithE2B(a.url, "shared-limits@example.com")
	k := u.createKey(u.personal, "agent", "full", nil)
	for _, r := range []*e2eReplica{a, b} {
		cs := e.session(t, r.url+"/mcp", e2eBearer(k.Key), "", nil)
		for range 2 {
			e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
		}
		if msg := e2eCallErr(t, cs, "e2b_list_sandboxes", nil); !strings.Contains(msg, "too many tool calls") {
			t.Fatalf("third call on replica %s = %q, want the key's limit (its share is 2 of 4)", r.url, msg)
		}
	}

	b.stop()
	waitReplicas(t, a.url, 1)
}

// waitReplicas waits until the replica at base counts want replicas
// (mcpgate_replicas on /metrics).
func waitReplicas(t *testing.T, base string, want int) {
	t.Helper()
	line := fmt.Sprintf("mcpgate_replicas %d", want)
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(body)
			if strings.Contains(last, "\n"+line+"\n") {
				cancel()
				return
			}
		}
		cancel()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("replica %s never counted %d replicas; /metrics has %q", base, want, grepLine(last, "mcpgate_replicas "))
}

func grepLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestRateLimits_PersonSetting: MCP_USER_RATE and MCP_USER_BURST reach the
// gateway: a person's keys together get the person's burst.
func TestRateLimits_PersonSetting(t *testing.T) {
	e := newE2EEnvWith(t, 1, map[string]string{"MCP_USER_RATE": "0.0001", "MCP_USER_BURST": "3"})
	base := e.replicas[0].url
	u, _ := e.signupWithE2B(base, "person-limit@example.com")
	first := e.session(t, base+"/mcp", e2eBearer(u.createKey(u.personal, "one", "full", nil).Key), "", nil)
	second := e.session(t, base+"/mcp", e2eBearer(u.createKey(u.personal, "two", "full", nil).Key), "", nil)
	for _, cs := range []*mcp.ClientSession{first, first, second} {
		e2eCallOK(t, cs, "e2b_list_sandboxes", nil)
	}
	if msg := e2eCallErr(t, second, "e2b_list_sandboxes", nil); !strings.Contains(msg, "your keys together") {
		t.Fatalf("fourth call of the person = %q, want the person's limit", msg)
	}
}
