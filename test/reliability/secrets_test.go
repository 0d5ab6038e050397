package reliability

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pquerna/otp/totp"

	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestNoSecretLeavesItsPlace runs a whole journey through the real gateway
// (sign-up, connect E2B, keys, MCP calls over the header and the connector
// URL, create with env_vars, kill with confirmation, a dashboard tool call,
// the audit log, two-factor enrolment and sign-ins with a code and a recovery
// code, revoke, logout, shutdown) and then scans everything it
// produced: every log line, every response body, every row of every table.
// None may contain the E2B key, an MCP key or its secret part, the session
// JWT, the password, the vault root key, the JWT secret, an env var value, the
// TOTP secret, a recovery code, or any envd/traffic token or other secret E2B
// returned.
func TestNoSecretLeavesItsPlace(t *testing.T) {
	t.Parallel()
	sim := e2bsim.New(e2bsim.Options{})
	simSrv := httptest.NewServer(sim)
	t.Cleanup(simSrv.Close)
	dsn := storetest.NewDatabase(t)
	var logs testutil.LockedBuffer
	rec := &recorder{}
	cfg := newGWConfig(t, dsn, simSrv.URL)
	gw := startGateway(t, cfg, &logs)

	tn := newTenant(t, gw.URL, rec)
	jwt := tn.cookie(api.SessionCookie)
	if jwt == "" {
		t.Fatal("no session cookie after sign-up")
	}
	readOnly := keyCreated{}
	tn.rec = nil // the one response that shows a key, by design
	tn.must("POST", "/api/v1/workspaces/"+tn.ws+"/keys", map[string]any{"name": "ro", "scope": "read_only"}, http.StatusCreated, &readOnly)
	tn.rec = rec
	tn.must("PUT", "/api/v1/workspaces/"+tn.ws+"/tools/"+e2b.ToolKillSandbox, map[string]any{"enabled": true, "needs_confirmation": true}, http.StatusOK, nil)
	// A second sign-in: the JWT of each session is a secret.
	second := newClient(t, gw.URL, rec)
	second.must("POST", "/api/v1/auth/login", map[string]string{"email": tn.email, "password": testPassword}, http.StatusOK, nil)
	jwt2 := second.cookie(api.SessionCookie)

	// Two-factor sign-in: the enrolment and the confirmation are the two
	// answers that show its secret and recovery codes, by design; then a
	// wrong code, a sign-in with a code and one with a recovery code.
	var enrolment struct {
		Secret string `json:"secret"`
	}
	var recovery struct {
		Codes []string `json:"recovery_codes"`
	}
	tn.rec = nil
	tn.must("POST", "/api/v1/me/totp", map[string]string{"current_password": testPassword}, http.StatusCreated, &enrolment)
	first, err := totp.GenerateCode(enrolment.Secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tn.must("POST", "/api/v1/me/totp/confirm", map[string]string{"code": first}, http.StatusOK, &recovery)
	tn.rec = rec
	if len(recovery.Codes) != 10 {
		t.Fatalf("recovery codes = %v", recovery.Codes)
	}
	// The next step's code (within the allowed skew): the first one is spent.
	next, _ := totp.GenerateCode(enrolment.Secret, time.Now().Add(30*time.Second))
	third := newClient(t, gw.URL, rec)
	third.must("POST", "/api/v1/auth/login", map[string]string{"email": tn.email, "password": testPassword}, http.StatusUnauthorized, nil)
	third.must("POST", "/api/v1/auth/login", map[string]string{"email": tn.email, "password": testPassword, "totp_code": first}, http.StatusUnauthorized, nil)
	third.must("POST", "/api/v1/auth/login", map[string]string{"email": tn.email, "password": testPassword, "totp_code": next}, http.StatusOK, nil)
	third.must("POST", "/api/v1/auth/logout", nil, http.StatusNoContent, nil)
	third.must("POST", "/api/v1/auth/login", map[string]string{"email": tn.email, "password": testPassword,
		"recovery_code": recovery.Codes[0]}, http.StatusOK, nil)
	jwt3 := third.cookie(api.SessionCookie)
	third.must("POST", "/api/v1/auth/logout", nil, http.StatusNoContent, nil)

	envValue := "envsecret-" + testutil.RandomHex(16)
	mustOK := func(r callResult, what string) map[string]any {
		t.Helper()
		if !r.ok() {
			t.Fatalf("%s = %v", what, r)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(r.text), &m); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return m
	}
	cs := mustSession(t, gw.URL, tn.key.Key, false)
	created := mustOK(call(cs, 20*time.Second, e2b.ToolCreateSandbox, map[string]any{
		"timeout": 600, "metadata": map[string]any{"app": "scan"}, "env_vars": map[string]any{"API_TOKEN": envValue}}, rec), "create")
	id, _ := created["sandbox_id"].(string)
	mustOK(call(cs, 20*time.Second, e2b.ToolListSandboxes, map[string]any{"metadata": "app=scan"}, rec), "list")
	mustOK(call(cs, 20*time.Second, e2b.ToolGetSandbox, map[string]any{"sandbox_id": id}, rec), "get")
	mustOK(call(cs, 20*time.Second, e2b.ToolGetSandboxLogs, map[string]any{"sandbox_id": id}, rec), "logs")
	mustOK(call(cs, 20*time.Second, e2b.ToolGetSandboxMetrics, map[string]any{"sandbox_id": id}, rec), "metrics")
	mustOK(call(cs, 20*time.Second, e2b.ToolResumeSandbox, map[string]any{"sandbox_id": id}, rec), "resume")

	// Over the connector URL, and with the read-only key.
	viaURL := mustSession(t, gw.URL, tn.key.Key, true)
	mustOK(call(viaURL, 20*time.Second, e2b.ToolListSandboxes, nil, rec), "list via the connector URL")
	ro := mustSession(t, gw.URL, readOnly.Key, true)
	mustOK(call(ro, 20*time.Second, e2b.ToolGetSandbox, map[string]any{"sandbox_id": id}, rec), "get with the read-only key")
	if r := call(ro, 20*time.Second, e2b.ToolCreateSandbox, nil, rec); r.ok() {
		t.Errorf("create with a read-only key succeeded")
	}

	// Kill: first a confirmation token, then the kill.
	pending := mustOK(call(cs, 20*time.Second, e2b.ToolKillSandbox, map[string]any{"sandbox_id": id}, rec), "kill (first step)")
	confirmTok, _ := pending["confirmation_token"].(string)
	if confirmTok == "" {
		t.Fatalf("kill without a token = %v, want a confirmation token", pending)
	}
	mustOK(call(cs, 20*time.Second, e2b.ToolKillSandbox, map[string]any{"sandbox_id": id, "confirmation_token": confirmTok}, rec), "kill (confirmed)")

	// From the dashboard: a create with env vars and a get.
	var dash map[string]any
	tn.must("POST", "/api/v1/workspaces/"+tn.ws+"/tools/"+e2b.ToolCreateSandbox+"/call",
		map[string]any{"arguments": map[string]any{"env_vars": map[string]string{"DB_PASSWORD": envValue}}}, http.StatusOK, &dash)
	tn.must("POST", "/api/v1/workspaces/"+tn.ws+"/tools/"+e2b.ToolGetSandbox+"/call",
		map[string]any{"arguments": map[string]any{"sandbox_id": dash["sandbox_id"]}}, http.StatusOK, nil)

	// Refused keys, one in a connector URL: the path must be redacted.
	bad := "mcpg_abcdefghijkm_" + strings.Repeat("Q", 43)
	if _, err := mcpSession(t, context.Background(), gw.URL, bad, true); err == nil {
		t.Errorf("a wrong key in a connector URL was accepted")
	}
	// Everything a user reads back.
	for _, p := range []string{"/me", "/workspaces", "/workspaces/" + tn.ws, "/workspaces/" + tn.ws + "/keys",
		"/workspaces/" + tn.ws + "/connections/e2b", "/workspaces/" + tn.ws + "/tools", "/workspaces/" + tn.ws + "/audit?limit=200"} {
		tn.must("GET", "/api/v1"+p, nil, http.StatusOK, nil)
	}
	// The dashboard pages, when they are served.
	for _, p := range []string{"/", "/app", "/app/w/" + tn.ws, "/app/w/" + tn.ws + "/keys", "/app/w/" + tn.ws + "/audit"} {
		tn.try("GET", p, nil)
	}
	tn.must("DELETE", "/api/v1/workspaces/"+tn.ws+"/keys/"+readOnly.ID, nil, http.StatusNoContent, nil)
	tn.must("POST", "/api/v1/auth/logout", nil, http.StatusNoContent, nil)
	second.must("POST", "/api/v1/auth/logout", nil, http.StatusNoContent, nil)
	gw.stop() // a clean stop writes the whole audit queue

	secrets := map[string]string{
		"E2B key": tn.e2bKey, "MCP key": tn.key.Key, "read-only MCP key": readOnly.Key,
		"MCP key secret": tn.key.Key[len(tn.key.Key)-43:], "read-only MCP key secret": readOnly.Key[len(readOnly.Key)-43:],
		"session JWT": jwt, "second session JWT": jwt2, "JWT signature": jwt[strings.LastIndexByte(jwt, '.')+1:],
		"password": testPassword, "ENCRYPTION_KEY": cfg.encKey, "JWT_SECRET": cfg.jwt, "env var value": envValue,
		"third session JWT": jwt3, "TOTP secret": enrolment.Secret, "TOTP secret (lower case)": strings.ToLower(enrolment.Secret),
	}
	for i, c := range recovery.Codes {
		secrets["recovery code "+string(rune('a'+i))] = c
		secrets["recovery code "+string(rune('a'+i))+" without dashes"] = strings.ReplaceAll(c, "-", "")
	}
	simSecrets := sim.Secrets()
	if len(simSecrets) < 2 {
		t.Fatalf("e2bsim issued %d secrets, want its envd and traffic tokens", len(simSecrets))
	}
	for i, s := range simSecrets {
		secrets["e2bsim secret "+string(rune('a'+i%26))+s[:min(4, len(s))]] = s
	}

	db := testutil.MustConnect(t, dsn)
	rows := dumpTables(t, db)
	if !strings.Contains(rows, tn.email) || !strings.Contains(rows, e2b.ToolKillSandbox) || !strings.Contains(rows, "== totp_factors\n(") ||
		!strings.Contains(rows, "== totp_recovery_codes\n(") {
		t.Fatalf("the table dump lacks the user or the audit log: the scan would prove nothing")
	}
	if !strings.Contains(rec.all(), id) || !strings.Contains(logs.String(), `"msg":"request"`) {
		t.Fatalf("the recorded responses or the captured log are empty: the scan would prove nothing")
	}
	places := map[string]string{"gateway log": logs.String(), "HTTP and MCP responses": rec.all(), "database rows": rows}
	for place, hay := range places {
		for name, s := range secrets {
			if s == "" {
				continue
			}
			if place == "database rows" && strings.Contains(hay, hex.EncodeToString([]byte(s))) {
				t.Errorf("%s contain the %s as bytea", place, name)
			}
			if strings.Contains(hay, s) {
				i := strings.Index(hay, s)
				t.Errorf("%s contains the %s: …%s…", place, name, hay[max(0, i-200):min(len(hay), i+len(s)+50)])
			}
		}
	}
	// The confirmation token is a response by design, but never logged or
	// stored.
	for _, place := range []string{"gateway log", "database rows"} {
		if strings.Contains(places[place], confirmTok) {
			t.Errorf("%s contains the confirmation token", place)
		}
	}
	if strings.Contains(logs.String(), "/c/mcpg_") {
		t.Errorf("the gateway log holds a connector URL path with a key")
	}
	if !strings.Contains(logs.String(), "/c/[redacted]/mcp") {
		t.Errorf("the gateway log has no redacted connector URL request: the scan of connector URLs proved nothing")
	}
}

// dumpTables returns every row of every table in the public schema as text.
func dumpTables(t *testing.T, db *pgx.Conn) string {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, table := range tables {
		rows, err := db.Query(ctx, `SELECT t::text FROM `+pgx.Identifier{table}.Sanitize()+` t`)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("== " + table + "\n" + strings.Join(lines, "\n") + "\n")
	}
	return b.String()
}
