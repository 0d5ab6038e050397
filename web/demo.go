package web

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// The bundled E2B simulator (cmd/e2bsim) marks every response with this
// header, so the gateway can tell a demo from the real E2B. They are
// internal/e2bsim's SimulatorHeader and SimulatorHeaderValue (a test checks),
// repeated so that the binary does not import the simulator.
const (
	SimulatorHeader = "X-E2B-Simulator"
	SimulatorValue  = "mcpgate-e2bsim"
)

// DemoProbe finds out, off the call path, whether E2B_API_URL is the bundled
// simulator; pages ask it with On, which never waits.
type DemoProbe struct {
	on atomic.Bool
}

// On reports whether the E2B API answered as the simulator.
func (p *DemoProbe) On() bool { return p != nil && p.on.Load() }

// Run asks apiURL once for /health and reads the simulator header from the
// answer, whatever its status. Until something answers (the simulator may
// start a moment after the gateway, as in make demo), it retries with a
// growing pause, a few times; it returns then or when ctx ends. A nil client
// gets one with a short timeout.
func (p *DemoProbe) Run(ctx context.Context, client *http.Client, apiURL string) {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	url := strings.TrimRight(apiURL, "/") + "/health"
	wait := 500 * time.Millisecond
	for range 12 {
		if on, answered := probeOnce(ctx, client, url); answered {
			p.on.Store(on)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, 30*time.Second)
	}
}

func probeOnce(ctx context.Context, client *http.Client, url string) (on, answered bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, true // a URL that cannot be asked will not become the simulator
	}
	res, err := client.Do(req)
	if err != nil {
		return false, false
	}
	_ = res.Body.Close()
	return res.Header.Get(SimulatorHeader) == SimulatorValue, true
}
