package reliability

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestMCPKeyBruteForceLimited guesses keys from one address: after a burst
// of refusals the gateway answers 429 with Retry-After instead of checking
// more guesses, on the header and on the connector URL alike, and it never
// logs a guessed key.
func TestMCPKeyBruteForceLimited(t *testing.T) {
	t.Parallel()
	simURL := startSim(t)
	var logs testutil.LockedBuffer
	gw := startGateway(t, newGWConfig(t, storetest.NewDatabase(t), simURL), &logs)
	tn := newTenant(t, gw.URL, nil)
	keyID := tn.key.Key[len("mcpg_") : len("mcpg_")+12]

	var guesses []string
	statuses := map[int]int{}
	var retryAfter string
	for i := range 40 {
		// Guesses for the real key's id, so that each one reaches the hash
		// comparison.
		guess := "mcpg_" + keyID + "_" + testutil.RandomHex(21) + "a"
		guesses = append(guesses, guess)
		req, _ := http.NewRequest("POST", gw.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if i%2 == 1 {
			req, _ = http.NewRequest("POST", gw.URL+"/c/"+guess+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		} else {
			req.Header.Set("Authorization", "Bearer "+guess)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests {
			retryAfter = resp.Header.Get("Retry-After")
		}
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("guess %d was accepted", i)
		}
	}
	if statuses[http.StatusTooManyRequests] < 15 || statuses[http.StatusUnauthorized] > 25 {
		t.Errorf("40 guesses answered %v: want at most ~20 checked (401), the rest 429", statuses)
	}
	if n, err := strconv.Atoi(retryAfter); err != nil || n < 1 {
		t.Errorf("429 Retry-After = %q, want whole seconds", retryAfter)
	}
	for _, g := range guesses {
		if strings.Contains(logs.String(), g[len(g)-44:]) {
			t.Fatalf("the gateway logged a guessed key")
		}
	}
}
