package service_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/vault"
)

const (
	credGoodKey   = "e2b_0123456789abcdef0123456789abcdef0a1b"
	credGoodKey2  = "e2b_fedcba9876543210fedcba9876543210c2d3"
	credUnknown   = "e2b_00000000000000000000000000000000dead" // the right shape; E2B does not know it
	credPersonal  = "sk_e2b_0123456789abcdef0123456789abcdef"
	credMalformed = "e2b_NOT-HEX-0123456789"
)

var credAllKeys = []string{credGoodKey, credGoodKey2, credUnknown, credPersonal, credMalformed}

// credBackend is the store and the keyring as serve wires them.
type credBackend struct {
	*store.DB
	keyring *vault.Keyring
}

func (b credBackend) OpenCredential(ctx context.Context, workspaceID, connector string) (mcpgate.Secret, error) {
	return b.DB.OpenCredential(ctx, b.keyring, workspaceID, connector)
}

// credGateway calls the services as the workspace's owner.
type credGateway struct{ *service.Set }

func ownerOf(ws, userID string) *mcpgate.Actor {
	return &mcpgate.Actor{UserID: userID, WorkspaceID: ws, Role: mcpgate.RoleOwner, Scope: mcpgate.ScopeFull, Source: mcpgate.SourceAPI}
}

func (g credGateway) PutCredential(ctx context.Context, ws, userID, connector string, c mcpgate.Secret) (*mcpgate.Connection, error) {
	return g.Connections.PutConnection(ctx, ownerOf(ws, userID), connector, c)
}

func (g credGateway) Connection(ctx context.Context, ws, connector string) (*mcpgate.Connection, error) {
	return g.Connections.Connection(ctx, ownerOf(ws, ""), connector)
}

func (g credGateway) DeleteCredential(ctx context.Context, ws, userID, connector string) error {
	return g.Connections.DeleteConnection(ctx, ownerOf(ws, userID), connector)
}

func (g credGateway) CallTool(ctx context.Context, ws, userID, tool string, args json.RawMessage, confirmed bool) (json.RawMessage, error) {
	return g.Tools.CallTool(ctx, ownerOf(ws, userID), mcpgate.ToolCall{Tool: tool, Arguments: args, Confirmed: confirmed})
}

// credFixture is a database, a keyring, a workspace with its owner, and a
// log that every gateway built here writes to.
type credFixture struct {
	backend credBackend
	ws      string
	user    *mcpgate.User
	logs    *testutil.LockedBuffer
}

func newCredFixture(t *testing.T) *credFixture {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t)
	k, err := vault.Open(ctx, []byte("mcp-credential-test-root-key-032"), db.VaultKeys(), vault.Options{})
	if err != nil {
		t.Fatalf("vault.Open() err = %v", err)
	}
	u, err := db.CreateUser(ctx, "owner@example.com", "hash", nil)
	if err != nil {
		t.Fatalf("CreateUser() err = %v", err)
	}
	ws, err := db.WorkspacesOfUser(ctx, u.ID)
	if err != nil || len(ws) != 1 {
		t.Fatalf("WorkspacesOfUser() = %v, %v", ws, err)
	}
	return &credFixture{backend: credBackend{db, k}, ws: ws[0].ID, user: u, logs: &testutil.LockedBuffer{}}
}

// gateway returns a gateway whose E2B connector talks to baseURL, and the
// auditor it records to.
func (f *credFixture) gateway(t *testing.T, baseURL string) (credGateway, *servicetest.Recorder) {
	t.Helper()
	aud := &servicetest.Recorder{}
	g := service.New(service.Options{
		DB: f.backend.DB, Keyring: f.backend.keyring,
		Registry:  connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: baseURL, DashboardURL: baseURL, Timeout: 5 * time.Second})),
		Audit:     aud,
		Logger:    slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		PublicURL: "http://gateway.test",
	})
	return credGateway{g}, aud
}

func (f *credFixture) stored(t *testing.T) string {
	t.Helper()
	s, err := f.backend.OpenCredential(context.Background(), f.ws, "e2b")
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
		return ""
	}
	if err != nil {
		t.Fatalf("OpenCredential() err = %v", err)
	}
	return s.Reveal()
}

func credSimServer(t *testing.T, keys ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(e2bsim.New(e2bsim.Options{TeamKeys: keys}))
	t.Cleanup(srv.Close)
	return srv
}

func credClosedServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(nil)
	url := srv.URL
	srv.Close()
	return url
}

func TestPutCredential(t *testing.T) {
	f := newCredFixture(t)
	ctx := context.Background()
	g, aud := f.gateway(t, credSimServer(t, credGoodKey, credGoodKey2).URL)
	down, downAud := f.gateway(t, credClosedServer(t))

	// Refused keys store nothing, on an empty workspace and over a stored
	// key alike.
	refused := []struct {
		name       string
		gw         credGateway
		key        string
		wantCode   mcpgate.Code
		wantMsg    string
		wantStatus int
	}{
		{name: "personal access token", gw: g, key: credPersonal, wantCode: mcpgate.EInvalid, wantMsg: "mcpgate needs a team API key"},
		{name: "not a key", gw: g, key: credMalformed, wantCode: mcpgate.EInvalid, wantMsg: "not an E2B team API key"},
		{name: "rejected by E2B", gw: g, key: credUnknown, wantCode: mcpgate.EInvalid, wantMsg: "E2B rejected this key", wantStatus: 401},
		{name: "E2B unreachable", gw: down, key: credGoodKey, wantCode: mcpgate.EUnavailable, wantMsg: "E2B is unreachable"},
	}
	checkRefused := func(t *testing.T, wantStored string) {
		for _, tt := range refused {
			t.Run(tt.name, func(t *testing.T) {
				c, err := tt.gw.PutCredential(ctx, f.ws, f.user.ID, "e2b", mcpgate.Secret(tt.key))
				if mcpgate.ErrorCode(err) != tt.wantCode || !strings.Contains(mcpgate.ErrorMessage(err), tt.wantMsg) {
					t.Fatalf("PutCredential() = %+v, err = %v; want %s saying %q", c, err, tt.wantCode, tt.wantMsg)
				}
				for _, k := range credAllKeys {
					if strings.Contains(err.Error(), k) {
						t.Fatalf("PutCredential() error %q repeats a key", err)
					}
				}
				if got := f.stored(t); got != wantStored {
					t.Fatalf("stored credential = %q, want %q", got, wantStored)
				}
				a := aud
				if tt.gw == down {
					a = downAud
				}
				ev := a.Last()
				if ev.Action != "credential.rejected" || ev.Outcome != mcpgate.OutcomeError || ev.WorkspaceID != f.ws ||
					ev.ActorID != f.user.ID || ev.UpstreamStatus != tt.wantStatus {
					t.Fatalf("audit event = %+v, want credential.rejected (upstream %d)", ev, tt.wantStatus)
				}
			})
		}
	}
	t.Run("empty", func(t *testing.T) { checkRefused(t, "") })

	before := time.Now().Add(-time.Second)
	c, err := g.PutCredential(ctx, f.ws, f.user.ID, "e2b", mcpgate.Secret(credGoodKey))
	if err != nil {
		t.Fatalf("PutCredential(good) err = %v", err)
	}
	if c.Connector != "e2b" || c.KeyHint != "e2b_…0a1b" || c.UpdatedBy != "owner@example.com" || c.VerifiedAt.Before(before) ||
		c.LastAuthFail != nil {
		t.Fatalf("PutCredential(good) = %+v", c)
	}
	if got := f.stored(t); got != credGoodKey {
		t.Fatalf("stored credential = %q, want %q", got, credGoodKey)
	}
	if ev := aud.Last(); ev.Action != "credential.stored" || ev.Outcome != mcpgate.OutcomeOK || ev.Arguments["key_hint"] != "e2b_…0a1b" {
		t.Fatalf("audit event = %+v, want credential.stored", ev)
	}
	if got, err := g.Connection(ctx, f.ws, "e2b"); err != nil || got.KeyHint != c.KeyHint {
		t.Fatalf("Connection() = %+v, %v", got, err)
	}
	b, _ := json.Marshal(c)
	if strings.Contains(string(b), credGoodKey) || strings.Contains(string(b), credGoodKey[4:20]) {
		t.Fatalf("the connection's JSON shows the key: %s", b)
	}

	t.Run("stored", func(t *testing.T) { checkRefused(t, credGoodKey) })

	// The stored key works for tools.
	if _, err := g.CallTool(ctx, f.ws, f.user.ID, e2b.ToolListSandboxes, json.RawMessage(`{}`), false); err != nil {
		t.Fatalf("CallTool() with the stored key err = %v", err)
	}

	// E2B stops accepting it: the call fails and the connection says so.
	revoked, _ := f.gateway(t, credSimServer(t, credGoodKey2).URL)
	if _, err := revoked.CallTool(ctx, f.ws, f.user.ID, e2b.ToolListSandboxes, json.RawMessage(`{}`), false); err == nil {
		t.Fatal("CallTool() with a key E2B rejects err = nil")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := g.Connection(ctx, f.ws, "e2b")
		if err != nil {
			t.Fatalf("Connection() err = %v", err)
		}
		if got.LastAuthFail != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Connection().LastAuthFail = nil after E2B rejected the stored key")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Replacing: one row, the new key, the failure mark cleared.
	c, err = g.PutCredential(ctx, f.ws, f.user.ID, "e2b", mcpgate.Secret(credGoodKey2))
	if err != nil {
		t.Fatalf("PutCredential(replace) err = %v", err)
	}
	if c.KeyHint != "e2b_…c2d3" || c.LastAuthFail != nil {
		t.Fatalf("PutCredential(replace) = %+v", c)
	}
	if got := f.stored(t); got != credGoodKey2 {
		t.Fatalf("stored credential = %q, want %q", got, credGoodKey2)
	}
	var rows int
	if err := f.backend.Pool.QueryRow(ctx, `SELECT count(*) FROM connections`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("connections rows = %d, %v; want 1", rows, err)
	}
	if ev := aud.Last(); ev.Action != "credential.replaced" || ev.Arguments["key_hint"] != "e2b_…c2d3" {
		t.Fatalf("audit event = %+v, want credential.replaced", ev)
	}

	// Another workspace sees none of it.
	other, err := f.backend.CreateWorkspace(ctx, f.user.ID, "Other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Connection(ctx, other.ID, "e2b"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("Connection(other workspace) err = %v, want not_found", err)
	}
	if err := g.DeleteCredential(ctx, other.ID, f.user.ID, "e2b"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("DeleteCredential(other workspace) err = %v, want not_found", err)
	}
	if _, err := g.Connection(ctx, f.ws, "nope"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("Connection(unknown connector) err = %v, want not_found", err)
	}
	if _, err := g.PutCredential(ctx, f.ws, f.user.ID, "nope", mcpgate.Secret(credGoodKey)); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("PutCredential(unknown connector) err = %v, want not_found", err)
	}

	// Deleting.
	if err := g.DeleteCredential(ctx, f.ws, f.user.ID, "e2b"); err != nil {
		t.Fatalf("DeleteCredential() err = %v", err)
	}
	if ev := aud.Last(); ev.Action != "credential.removed" || ev.Outcome != mcpgate.OutcomeOK {
		t.Fatalf("audit event = %+v, want credential.removed", ev)
	}
	if _, err := g.Connection(ctx, f.ws, "e2b"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("Connection() after delete err = %v, want not_found", err)
	}
	if err := g.DeleteCredential(ctx, f.ws, f.user.ID, "e2b"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("second DeleteCredential() err = %v, want not_found", err)
	}
	if _, err := g.CallTool(ctx, f.ws, f.user.ID, e2b.ToolListSandboxes, json.RawMessage(`{}`), false); mcpgate.ErrorCode(err) != mcpgate.EInvalid ||
		!strings.Contains(mcpgate.ErrorMessage(err), "No E2B API key is connected") {
		t.Fatalf("CallTool() without a key err = %v", err)
	}

	var changes []string
	for _, ev := range aud.Events() {
		if a := ev.Action; strings.HasPrefix(a, "credential.") && a != "credential.rejected" {
			changes = append(changes, a)
		}
	}
	if got, want := strings.Join(changes, " "), "credential.stored credential.replaced credential.removed"; got != want {
		t.Fatalf("credential changes audited = %q, want %q", got, want)
	}

	// No key, nor a long piece of one, in any audit event or log line.
	for _, a := range []*servicetest.Recorder{aud, downAud} {
		b, err := json.Marshal(a.Events())
		if err != nil {
			t.Fatal(err)
		}
		credNoKeyIn(t, "audit events", string(b))
	}
	credNoKeyIn(t, "the log", f.logs.String())
}

// credNoKeyIn fails if s holds any test key or its secret part.
func credNoKeyIn(t *testing.T, what, s string) {
	t.Helper()
	for _, k := range credAllKeys {
		secret := strings.TrimPrefix(strings.TrimPrefix(k, "sk_"), "e2b_")
		if strings.Contains(s, k) || strings.Contains(s, secret[:len(secret)-4]) {
			t.Fatalf("%s show the key %q:\n%s", what, k, s)
		}
	}
}
