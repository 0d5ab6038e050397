package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The real program's /metrics is scrapeable and counts what happened: here a
// refused MCP key, by reason, with no key in any label.
func TestMetrics_ScrapedFromTheRealGateway(t *testing.T) {
	srv, _ := mustGatewayRoutes(t)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer mcpg_notarealkeyatall")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST /mcp with a bad key = %d, want 401", res.StatusCode)
	}
	res, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d, want 200", res.StatusCode)
	}
	for _, want := range []string{
		`mcpgate_build_info{`,
		`mcpgate_auth_failures_total{reason="malformed"} 1`,
		`mcpgate_audit_queue_depth `,
		`mcpgate_db_pool_`,
		`go_gc_gogc_percent `,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(string(body), "notarealkey") {
		t.Error("/metrics contains the presented key")
	}
}
