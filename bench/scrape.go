package main

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// gatewayTimes is what the gateway's own /metrics says about where the
// time of the calls so far went: inside the gateway's tool handler around
// the upstream call (credential, policy, audit, encoding), and waiting for
// the upstream. Absent when /metrics is not served.
type gatewayTimes struct {
	Calls          float64 `json:"calls"`
	GatewayMeanMS  float64 `json:"handler_gateway_mean_ms"`
	UpstreamMeanMS float64 `json:"handler_upstream_mean_ms"`
	// DBAcquires, DBEmptyAcquires and DBAcquireWaitMeanMS show whether
	// calls queued for a database connection.
	DBMaxConns          float64 `json:"db_max_conns"`
	DBAcquires          float64 `json:"db_acquires"`
	DBEmptyAcquires     float64 `json:"db_empty_acquires"`
	DBAcquireWaitMeanMS float64 `json:"db_acquire_wait_mean_ms"`
}

func scrapeTimes(ctx context.Context, base string) (gatewayTimes, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return gatewayTimes{}, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return gatewayTimes{}, false
	}
	sums := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range []string{"mcpgate_tool_call_gateway_seconds_sum", "mcpgate_tool_call_gateway_seconds_count",
			"mcpgate_tool_call_upstream_seconds_sum", "mcpgate_db_pool_max_connections", "mcpgate_db_pool_acquires_total",
			"mcpgate_db_pool_empty_acquires_total", "mcpgate_db_pool_acquire_wait_seconds_total"} {
			if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				sums[name] += v
			}
		}
	}
	n := sums["mcpgate_tool_call_gateway_seconds_count"]
	if n == 0 {
		return gatewayTimes{}, false
	}
	t := gatewayTimes{Calls: n, GatewayMeanMS: sums["mcpgate_tool_call_gateway_seconds_sum"] / n * 1000,
		UpstreamMeanMS: sums["mcpgate_tool_call_upstream_seconds_sum"] / n * 1000,
		DBMaxConns:     sums["mcpgate_db_pool_max_connections"], DBAcquires: sums["mcpgate_db_pool_acquires_total"],
		DBEmptyAcquires: sums["mcpgate_db_pool_empty_acquires_total"]}
	if t.DBAcquires > 0 {
		t.DBAcquireWaitMeanMS = sums["mcpgate_db_pool_acquire_wait_seconds_total"] / t.DBAcquires * 1000
	}
	return t, true
}
