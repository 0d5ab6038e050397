package main

// End-to-end test that no secret leaves the gateway: every kind of secret
// E2B returns, read through the gateway, found in no response, log or table.

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

func TestMCPEndToEnd_NoSecretAnywhere(t *testing.T) {
	f := newMCPFixture(t)
	e, r2, teamA, keyA := f.e, f.r2, f.teamA, f.keyA

	t.Run("NoSecretAnywhere", func(t *testing.T) {
		// A sandbox with every kind of secret E2B returns, read through
		// the gateway: get, list, resume (connect mints tokens).
		sb := e.simSandbox(teamA, map[string]any{"secure": true, "network": map[string]any{
			"allowPublicTraffic": false,
			"egressProxy":        map[string]any{"address": "proxy.example:3128", "username": "proxyuser-" + testutil.RandomHex(6), "password": "proxypass-" + testutil.RandomHex(6)},
			"rules":              map[string]any{"api.example.com": []any{map[string]any{"transform": map[string]any{"headers": map[string]any{"Authorization": "Bearer hdr-" + testutil.RandomHex(8)}}}}},
		}})
		cs := e.session(t, r2.url+"/mcp", e2eBearer(keyA.Key), "2025-06-18", nil)
		e2eCallOK(t, cs, "e2b_get_sandbox", map[string]any{"sandbox_id": sb})
		e2eCallOK(t, cs, toolList, nil)
		e2eCallOK(t, cs, "e2b_resume_sandbox", map[string]any{"sandbox_id": sb, "timeout": 600})
		e2eCallOK(t, cs, "e2b_pause_sandbox", map[string]any{"sandbox_id": sb})
		e2eCallOK(t, cs, "e2b_get_sandbox", map[string]any{"sandbox_id": sb})
		e2eCallOK(t, cs, "e2b_resume_sandbox", map[string]any{"sandbox_id": sb})
		// Something for the connector URL's path to be logged.
		e2eCallOK(t, e.session(t, e2eConnectorURL(r2.url, keyA), nil, "", nil), toolList, nil)

		if !e.rec.saw(`\"sandbox_id\":\"` + sb + `\"`) {
			t.Fatalf("the tool outputs were not recorded; the test setup is broken")
		}
		for _, s := range e.sim.Secrets() {
			e.rec.secret(s, "a secret the simulator issued or was given")
		}
		if len(e.rec.secrets) < 10 {
			t.Fatalf("only %d secrets to look for; the test setup is broken", len(e.rec.secrets))
		}
		// Every response, log and table; the replicas are stopped first,
		// so that the calls just before the shutdown were written by it.
		extra := e.noSecretLeaks(t)
		db := e.dbConn(t)
		var rows int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM audit_log
			WHERE key_id = $1 AND action = 'e2b_resume_sandbox' AND outcome = 'ok'`, keyA.ID).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 2 {
			t.Errorf("audit_log has %d of the 2 resume calls made just before shutdown", rows)
		}
		if log := extra["log of replica 2"]; !strings.Contains(log, "/c/[redacted]/mcp") {
			t.Errorf("replica 2's log has no redacted connector URL path; was the request logged?")
		}
	})
}
