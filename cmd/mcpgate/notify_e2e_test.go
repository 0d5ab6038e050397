package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

// e2eHookReceiver is a team's webhook endpoint: it checks each POST's
// signature with the secret itself and keeps the events.
type e2eHookReceiver struct {
	secret string
	mu     sync.Mutex
	events []map[string]any
	bad    int
}

func (rv *e2eHookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	m := hmac.New(sha256.New, []byte(rv.secret))
	m.Write(raw)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if r.Header.Get("X-Mcpgate-Signature") != "sha256="+hex.EncodeToString(m.Sum(nil)) || r.Header.Get("X-Mcpgate-Event") != body["event"] ||
		r.Header.Get("X-Mcpgate-Delivery") == "" {
		rv.bad++
	}
	rv.events = append(rv.events, body)
	w.WriteHeader(http.StatusOK)
}

func (rv *e2eHookReceiver) wait(t *testing.T, event, approval string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		rv.mu.Lock()
		for _, ev := range rv.events {
			if a, _ := ev["approval"].(map[string]any); ev["event"] == event && a["id"] == approval {
				rv.mu.Unlock()
				return
			}
		}
		rv.mu.Unlock()
		time.Sleep(20 * time.Millisecond) // the receiver is another goroutine's server
	}
	t.Fatalf("no %s webhook for %s within 10 s", event, approval)
}

// TestApprovalNotifyEndToEnd: a kill asked for by an unattended agent on
// one replica reaches the team's signed webhook; the approval given on the
// other replica does too; the deliveries show in the API; the webhook
// secret is in no answer, log line or audit row.
func TestApprovalNotifyEndToEnd(t *testing.T) {
	e := newE2EEnvWith(t, 2, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8"})
	r1, r2 := e.replicas[0], e.replicas[1]
	alice := e.signup(r1.url, "alice@example.com", "")
	team := e.teamKey()
	ws := alice.workspace("Notified")
	alice.connectE2B(ws, team)
	carol := e.signup(r1.url, "carol@example.com", alice.invite(ws, "carol@example.com", "member"))
	alice.setTool(ws, toolKill, map[string]any{"enabled": true})
	secret := "whsec_" + testutil.RandomHex(24)
	e.rec.secret(secret, "webhook secret")
	rv := &e2eHookReceiver{secret: secret}
	hook := httptest.NewServer(rv)
	defer hook.Close()
	base := "/api/v1/workspaces/" + ws
	alice.api(http.MethodPut, base+"/notifications", map[string]any{"webhook_url": hook.URL + "/mcpgate", "webhook_secret": secret}, http.StatusOK)

	key := carol.createKey(ws, "nightly cleanup", "full", nil)
	cs := e.session(t, r1.url+"/mcp", e2eBearer(key.Key), "2025-11-25", nil)
	sb := e.simSandbox(team, nil)
	ap := e2eRequestApproval(t, cs, toolKill, map[string]any{"sandbox_id": sb})
	rv.wait(t, "approval.requested", ap.ID)
	alice2 := *alice
	alice2.base = r2.url
	alice2.api(http.MethodPost, base+"/approvals/"+ap.ID+"/approve", nil, http.StatusOK)
	rv.wait(t, "approval.approved", ap.ID)
	rv.mu.Lock()
	if rv.bad != 0 {
		t.Errorf("%d webhooks with a bad signature or headers", rv.bad)
	}
	first, _ := rv.events[0]["approval"].(map[string]any)
	rv.mu.Unlock()
	if first["url"] != ap.URL || first["tool"] != toolKill || !strings.Contains(first["requested_by"].(string), "nightly cleanup") {
		t.Errorf("approval in the webhook = %v", first)
	}
	var deliveries struct {
		Deliveries []struct{ Event, State string } `json:"deliveries"`
	}
	alice2.decode(alice2.api(http.MethodGet, base+"/notifications/deliveries", nil, http.StatusOK), &deliveries)
	if len(deliveries.Deliveries) != 2 {
		t.Errorf("deliveries = %+v, want 2", deliveries.Deliveries)
	}
	alice.auditUntil(ws, "kind=admin", func(items []e2eAuditItem) bool {
		n := 0
		for _, it := range items {
			if it.Action == "notification.sent" {
				n++
			}
		}
		return n == 2
	})
	var rows string
	if err := e.dbConn(t).QueryRow(context.Background(), `SELECT coalesce(string_agg(a::text, E'\n'), '') FROM audit_log a`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	for _, leak := range e.rec.leaks(map[string]string{"audit_log": rows, "log of replica 1": r1.log.String(), "log of replica 2": r2.log.String()}) {
		t.Error(leak)
	}
}
