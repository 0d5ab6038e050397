package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// caller makes the i-th call of a worker: even calls list sandboxes, odd
// calls get one.
type caller interface {
	call(ctx context.Context, i int) error
	close()
}

// newTransport keeps one idle connection per client, so that no phase pays
// for new TCP connections.
func newTransport(conns int) *http.Transport {
	return &http.Transport{MaxIdleConns: conns + 16, MaxIdleConnsPerHost: conns + 16, IdleConnTimeout: 90 * time.Second,
		DisableCompression: true}
}

// mcpCaller is one MCP client session (protocol 2026-07-28, the go-sdk
// default) with its own key.
type mcpCaller struct {
	cs        *sdk.ClientSession
	sandboxes []string
	offset    int
}

func dialMCP(ctx context.Context, endpoint, key string, rt http.RoundTripper, sandboxes []string, offset int) (*mcpCaller, error) {
	cl := sdk.NewClient(&sdk.Implementation{Name: "mcpgate-bench", Version: "v0"}, nil)
	cs, err := cl.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint,
		HTTPClient: &http.Client{Transport: testutil.BearerTransport{Key: key, Base: rt}, Timeout: 60 * time.Second}, MaxRetries: -1,
		DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect MCP client: %w", err)
	}
	return &mcpCaller{cs: cs, sandboxes: sandboxes, offset: offset}, nil
}

func (m *mcpCaller) call(ctx context.Context, i int) error {
	p := &sdk.CallToolParams{Name: "e2b_list_sandboxes", Arguments: map[string]any{}}
	if i%2 == 1 {
		p = &sdk.CallToolParams{Name: "e2b_get_sandbox",
			Arguments: map[string]any{"sandbox_id": m.sandboxes[(i/2+m.offset)%len(m.sandboxes)]}}
	}
	res, err := m.cs.CallTool(ctx, p)
	if err != nil {
		return err
	}
	if res.IsError {
		msg := "tool error"
		if len(res.Content) > 0 {
			if t, ok := res.Content[0].(*sdk.TextContent); ok {
				msg = t.Text
			}
		}
		return errors.New(msg)
	}
	return nil
}

func (m *mcpCaller) close() { _ = m.cs.Close() }

// directCaller sends the requests the gateway sends for the same tools
// straight to the simulator, and reads the whole response.
type directCaller struct {
	base      string
	key       string
	http      *http.Client
	sandboxes []string
	offset    int
}

func (d *directCaller) call(ctx context.Context, i int) error {
	u := d.base + "/v2/sandboxes?limit=50"
	if i%2 == 1 {
		u = d.base + "/sandboxes/" + d.sandboxes[(i/2+d.offset)%len(d.sandboxes)]
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", d.key)
	resp, err := d.http.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("e2bsim answered %s", resp.Status)
	}
	return err
}

func (d *directCaller) close() {}

// stats summarise one phase. Latencies are in milliseconds.
type stats struct {
	Calls       int     `json:"calls"`
	Errors      int     `json:"errors"`
	Seconds     float64 `json:"seconds"`
	CallsPerSec float64 `json:"calls_per_sec"`
	P50         float64 `json:"p50_ms"`
	P95         float64 `json:"p95_ms"`
	P99         float64 `json:"p99_ms"`
	Max         float64 `json:"max_ms"`
	ErrorSample string  `json:"error_sample,omitempty"`
}

func summarize(lat []time.Duration, errs int, errSample string, elapsed time.Duration) stats {
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		i := int(p * float64(len(lat)-1))
		return float64(lat[i].Microseconds()) / 1000
	}
	s := stats{Calls: len(lat), Errors: errs, Seconds: elapsed.Seconds(), P50: q(.50), P95: q(.95), P99: q(.99), Max: q(1),
		ErrorSample: errSample}
	if elapsed > 0 {
		s.CallsPerSec = float64(len(lat)) / elapsed.Seconds()
	}
	return s
}

// recorder collects one phase's results from many goroutines.
type recorder struct {
	mu        sync.Mutex
	lat       []time.Duration
	errs      int
	errSample string
}

func (r *recorder) add(lat []time.Duration, errs int, sample string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lat = append(r.lat, lat...)
	r.errs += errs
	if r.errSample == "" && sample != "" {
		r.errSample = sample
	}
}

func shorten(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// closedLoop runs each caller back to back for d: a caller sends its next
// call when the previous one returns. Only successful calls' latencies are
// kept; failures are counted.
func closedLoop(ctx context.Context, callers []caller, d time.Duration) stats {
	var rec recorder
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	// A call in flight at the deadline may finish; none may hang the run.
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(30*time.Second))
	defer cancel()
	for _, c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			errs, sample := 0, ""
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				err := c.call(ctx, i)
				if err != nil {
					errs++
					if sample == "" {
						sample = shorten(err.Error())
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			rec.add(lat, errs, sample)
		}()
	}
	wg.Wait()
	return summarize(rec.lat, rec.errs, rec.errSample, time.Since(start))
}

// openLoop offers rate calls/s for d on a fixed schedule, independent of how
// fast answers come: call k is due at start + k/rate, and its latency is
// measured from that due time, so time spent waiting for a free client
// counts (no coordinated omission). The callers are a pool of sessions.
func openLoop(ctx context.Context, callers []caller, rate float64, d time.Duration) stats {
	n := int(rate * d.Seconds())
	due := make(chan struct {
		k int
		t time.Time
	}, n)
	var rec recorder
	var wg sync.WaitGroup
	start := time.Now().Add(10 * time.Millisecond)
	ctx, cancel := context.WithDeadline(ctx, start.Add(d+30*time.Second))
	defer cancel()
	for _, c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, n/len(callers)+16)
			errs, sample := 0, ""
			for job := range due {
				err := c.call(ctx, job.k)
				if err != nil {
					errs++
					if sample == "" {
						sample = shorten(err.Error())
					}
					continue
				}
				lat = append(lat, time.Since(job.t))
			}
			rec.add(lat, errs, sample)
		}()
	}
	interval := time.Duration(float64(time.Second) / rate)
	for k := range n {
		t := start.Add(time.Duration(k) * interval)
		if w := time.Until(t); w > 0 {
			time.Sleep(w)
		}
		due <- struct {
			k int
			t time.Time
		}{k, t}
	}
	close(due)
	wg.Wait()
	return summarize(rec.lat, rec.errs, rec.errSample, time.Since(start))
}
