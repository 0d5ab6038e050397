package mcp

// The one fixture of the mcp tests: the real services on a fresh database,
// wired to the endpoint as serve wires them, with the registry and clock a
// test chooses. It is exported (in a _test file) so that the external
// mcp_test package uses the same one.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/upstream"
	"github.com/mcpgate/mcpgate/vault"
)

// FixtureOptions choose what a Fixture serves.
type FixtureOptions struct {
	Registry *connectors.Registry
	// Credential, when set, is stored for every connector of the registry
	// without checking it upstream.
	Credential  string
	Audit       service.Auditor
	CallTimeout time.Duration
	Now         func() time.Time
	// KeyRate and KeyBurst set the per-key limit (default: the gateway's).
	KeyRate  rate.Limit
	KeyBurst int
	// UserRate, UserBurst, WorkspaceRate and WorkspaceBurst set the
	// per-person and per-workspace limits (default: the gateway's).
	UserRate, WorkspaceRate   rate.Limit
	UserBurst, WorkspaceBurst int
	// WaitTimer makes the timers of approval waits (default: real ones).
	WaitTimer service.WaitTimer
	// Upstreams relays upstream servers' tools (nil: none can be added).
	Upstreams *upstream.Pool[service.UpstreamKey]
}

// Fixture is one workspace with its owner, served over HTTP.
type Fixture struct {
	DB        *store.DB
	Keyring   *vault.Keyring
	Service   *service.Set
	Keys      *auth.Keys
	Gateway   *Gateway
	URL       string
	server    *httptest.Server
	Workspace string
	UserID    string
	Audit     *servicetest.Recorder
}

// NewFixture builds a fixture; it is closed at cleanup.
func NewFixture(tb testing.TB, o FixtureOptions) *Fixture {
	tb.Helper()
	env := servicetest.New(tb, service.Options{Registry: o.Registry, Audit: o.Audit,
		PublicURL: "http://gateway.test", CallTimeout: o.CallTimeout, Now: o.Now, WaitTimer: o.WaitTimer, Upstreams: o.Upstreams})
	u, owner := env.NewUser(tb, "owner@example.com")
	f := &Fixture{DB: env.DB, Keyring: env.Keyring, Service: env.Service, Workspace: owner.WorkspaceID, UserID: u.ID, Audit: env.Audit}
	f.Keys = auth.NewKeys(auth.KeysOptions{Store: env.DB, Trust: env.Service.CacheTrust(), Now: o.Now})
	if o.Credential != "" {
		for _, name := range o.Registry.Names() {
			c := &mcpgate.Connection{WorkspaceID: f.Workspace, Connector: name, KeyHint: "test", VerifiedAt: time.Now(), UpdatedBy: u.ID}
			if err := env.DB.PutConnection(context.Background(), env.Keyring, c, mcpgate.Secret(o.Credential)); err != nil {
				tb.Fatalf("PutConnection() err = %v", err)
			}
		}
	}
	audit := o.Audit
	if audit == nil {
		audit = env.Audit
	}
	f.Gateway = New(Options{Tools: f.Service.Tools, Approvals: f.Service.Approvals, Registry: o.Registry, Authenticators: []mcpgate.Authenticator{f.Keys},
		Tokens: env.DB, Audit: audit, PublicURL: "http://gateway.test", Version: "test",
		ConfirmationSecret: []byte("fixture-confirmation-secret-0123456789"), Now: o.Now,
		KeyRate: o.KeyRate, KeyBurst: o.KeyBurst,
		UserRate: o.UserRate, UserBurst: o.UserBurst, WorkspaceRate: o.WorkspaceRate, WorkspaceBurst: o.WorkspaceBurst})
	f.server = httptest.NewServer(f.Gateway.Handler())
	tb.Cleanup(f.Close)
	f.URL = f.server.URL
	return f
}

// Close stops what the fixture started in this process (the database is
// dropped at cleanup); it may be called more than once.
func (f *Fixture) Close() {
	f.server.Close()
	f.Gateway.Close()
	f.Keys.Close()
}

// Owner is the workspace's owner as a dashboard actor.
func (f *Fixture) Owner() *mcpgate.Actor {
	return &mcpgate.Actor{UserID: f.UserID, WorkspaceID: f.Workspace, Role: mcpgate.RoleOwner, Scope: mcpgate.ScopeFull,
		Source: mcpgate.SourceDashboard}
}

// AddKey creates a key of the owner with the given scope.
func (f *Fixture) AddKey(tb testing.TB, scope mcpgate.Scope) (key, id string) {
	tb.Helper()
	k, key, err := f.Service.Keys.CreateKey(context.Background(), f.Owner(), mcpgate.NewKey{Name: "test", Scope: scope})
	if err != nil {
		tb.Fatalf("CreateKey() err = %v", err)
	}
	return key, k.ID
}

// BearerTransport sends an MCP key as a bearer token (testutil's, under
// the name this package's tests use).
type BearerTransport = testutil.BearerTransport

// KeyRequest is a request to /mcp that presents key as a bearer token, for
// calling an authenticator directly.
func KeyRequest(key string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	return r
}
