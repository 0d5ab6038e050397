package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/upstream/upstreamtest"
)

// TestServersE2E_HopPolicy: the program as it ships reaches an upstream
// server only where its settings allow. Without UPSTREAM_PRIVATE_NETWORKS
// a server on this machine is refused, over plain http at input and over
// https at the dial (a name resolving to loopback); with loopback listed
// the same server is added. The credential is in no answer, log line or
// audit row.
func TestServersE2E_HopPolicy(t *testing.T) {
	token := "e2e-upstream-" + testutil.RandomHex(16)
	up := upstreamtest.New(t, &sdk.Tool{Name: "search", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}})
	port := mustPort(t, up.URL)
	add := func(u *e2eUser, rawURL string, want int) (string, []byte) {
		t.Helper()
		raw := u.api(http.MethodPost, "/api/v1/workspaces/"+u.personal+"/servers", map[string]any{"name": "local", "url": rawURL,
			"headers": map[string]string{"Authorization": "Bearer " + token}}, want)
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		return e.Error.Message, raw
	}

	closed := newE2EEnv(t, 1)
	closed.rec.secret(token, "upstream credential")
	u := closed.signup(closed.replicas[0].url, "hop@example.com", "")
	if msg, _ := add(u, up.URL, http.StatusBadRequest); !strings.Contains(msg, "UPSTREAM_PRIVATE_NETWORKS") {
		t.Errorf("plain http to loopback without the setting: %q", msg)
	}
	if msg, _ := add(u, "https://localhost:"+port+"/mcp", http.StatusBadRequest); !strings.Contains(msg, "not one the gateway may reach") {
		t.Errorf("https to a name resolving to loopback without the setting: %q", msg)
	}
	var list struct{ Servers []any }
	u.decode(u.api(http.MethodGet, "/api/v1/workspaces/"+u.personal+"/servers", nil, http.StatusOK), &list)
	if len(list.Servers) != 0 {
		t.Errorf("refused servers were stored: %+v", list.Servers)
	}
	for _, h := range up.Received() {
		if strings.Contains(h.Get("Authorization"), token) {
			t.Error("the credential reached the upstream although the hop was refused")
		}
	}

	open := newE2EEnvWith(t, 1, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8"})
	open.rec.secret(token, "upstream credential")
	v := open.signup(open.replicas[0].url, "hop@example.com", "")
	_, raw := add(v, up.URL, http.StatusCreated)
	var srv struct {
		Name      string `json:"name"`
		ToolCount int    `json:"tool_count"`
	}
	v.decode(raw, &srv)
	if srv.Name != "local" || srv.ToolCount != 1 {
		t.Errorf("added server = %s", raw)
	}
	v.auditUntil(v.personal, "kind=admin", func(items []e2eAuditItem) bool {
		for _, it := range items {
			if it.Action == "server.added" {
				return true
			}
		}
		return false
	})
	for _, e := range []*e2eEnv{closed, open} {
		var rows string
		if err := e.dbConn(t).QueryRow(context.Background(), `SELECT coalesce(string_agg(a::text, E'\n'), '') FROM audit_log a`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		for _, leak := range e.rec.leaks(map[string]string{"audit_log": rows, "log": e.replicas[0].log.String()}) {
			t.Error(leak)
		}
	}
}

func mustPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Port() == "" {
		t.Fatalf("no port in %q", raw)
	}
	return u.Port()
}
