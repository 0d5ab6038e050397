package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/password"
)

// TestServe_HashingBurstBounded: a burst of parallel
// sign-ups and logins, from many addresses, leaves the gateway's heap
// bounded by the hashing budget, gets no 5xx other than the hashing 503
// (with Retry-After), and the gateway serves MCP calls throughout. Before
// the budget, 60 parallel sign-ups took the heap past 3.7 GiB and answered
// with 500s.
func TestServe_HashingBurstBounded(t *testing.T) {
	n := 30 // sign-ups, and as many logins
	if v, err := strconv.Atoi(os.Getenv("MCPGATE_BURST")); err == nil && v > 0 {
		n = v
	}
	e := newE2EEnv(t, 1)
	base := e.replicas[0].url
	owner := e.signup(base, "owner@example.com", "")
	k := owner.createKey(owner.personal, "burst", "", nil)
	cs := e.session(t, base+"/mcp", e2eBearer(k.Key), "", nil)

	// serve set GOGC=400, which lets garbage grow to five times the live
	// heap before a collection; measure at Go's default of 100, so that the
	// heap in use follows the live memory (at most twice it).
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseline := ms.HeapInuse
	var peak uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Millisecond):
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapInuse)
			}
		}
	}()

	// MCP calls all through the burst.
	mcpDone := make(chan struct{})
	var mcpOK, mcpFail int
	var mcpErr error
	go func() {
		defer close(mcpDone)
		for {
			select {
			case <-stopSampling:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := cs.ListTools(ctx, &mcp.ListToolsParams{})
			cancel()
			if err != nil {
				mcpFail++
				mcpErr = err
			} else {
				mcpOK++
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	type answer struct {
		status     int
		retryAfter string
	}
	answers := make(chan answer, 2*n)
	var wg sync.WaitGroup
	post := func(source, path string, body map[string]string) {
		defer wg.Done()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Transport: e2eFrom(source), Timeout: 60 * time.Second}).Do(req)
		if err != nil {
			t.Errorf("POST %s from %s: %v", path, source, err)
			return
		}
		resp.Body.Close()
		answers <- answer{resp.StatusCode, resp.Header.Get("Retry-After")}
	}
	start := time.Now()
	for i := range n {
		wg.Add(2)
		go post(fmt.Sprintf("127.0.1.%d", i%250+1), "/api/v1/auth/signup",
			map[string]string{"email": fmt.Sprintf("burst%d@example.com", i), "password": e2ePassword})
		go post(fmt.Sprintf("127.0.2.%d", i%250+1), "/api/v1/auth/login",
			map[string]string{"email": fmt.Sprintf("nobody%d@example.com", i), "password": e2ePassword})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(answers)
	close(stopSampling)
	<-sampled
	<-mcpDone

	counts := map[int]int{}
	for a := range answers {
		counts[a.status]++
		switch a.status {
		case http.StatusCreated, http.StatusUnauthorized, http.StatusTooManyRequests:
		case http.StatusServiceUnavailable:
			if s, err := strconv.Atoi(a.retryAfter); err != nil || s < 1 {
				t.Errorf("503 with Retry-After %q, want seconds", a.retryAfter)
			}
		default:
			t.Errorf("status %d in the burst, want 201, 401, 429 or the hashing 503", a.status)
		}
	}
	growth := int64(peak) - int64(baseline)
	t.Logf("burst of %d sign-ups and %d logins in %v: statuses %v; heap in use %d MiB before, peak %d MiB (+%d MiB); MCP calls %d ok, %d failed",
		n, n, elapsed.Round(time.Millisecond), counts, baseline>>20, peak>>20, growth>>20, mcpOK, mcpFail)
	// Live argon2 memory is bounded by the hashing budget (128 MiB on 2
	// cores, 512 MiB at most); at GOGC=100 the heap in use is at most twice
	// the live heap, plus slack for the requests themselves. Unbounded, the
	// n+n hashes were all live at once (60 x 64 MiB = 3.75 GiB).
	if limit := 2*password.DefaultLimiter.Budget() + 128<<20; growth > limit {
		t.Errorf("heap grew by %d MiB in the burst, want at most %d MiB", growth>>20, limit>>20)
	}
	if mcpFail > 0 || mcpOK == 0 {
		t.Errorf("MCP calls during the burst: %d ok, %d failed (last: %v); want all served", mcpOK, mcpFail, mcpErr)
	}
}
