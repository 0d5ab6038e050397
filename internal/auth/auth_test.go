package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// fixture is a fresh database with one person and their workspace.
type fixture struct {
	db        *store.DB
	user      string
	workspace string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t)
	u, err := db.CreateUser(ctx, "owner@example.com", "hash", nil)
	if err != nil {
		t.Fatal(err)
	}
	wss, err := db.WorkspacesOfUser(ctx, u.ID)
	if err != nil || len(wss) != 1 {
		t.Fatalf("WorkspacesOfUser() = %v, %v", wss, err)
	}
	return &fixture{db: db, user: u.ID, workspace: wss[0].ID}
}

// bearer is tok as the MCP endpoint presents an Authorization bearer token.
func bearer(tok string) mcpgate.Presented {
	return mcpgate.Presented{Value: mcpgate.Secret(tok), Bearer: true}
}

// refusedAs reports whether err is a credential refusal with the reason.
func refusedAs(err error, reason string) bool {
	var ae *mcpgate.AuthError
	return errors.As(err, &ae) && ae.Reason == reason
}

// mustKey creates a key of the fixture's person and returns it with its
// secret form.
func (f *fixture) mustKey(t *testing.T, expires *time.Time) (*mcpgate.APIKey, string) {
	t.Helper()
	key, id, hash := mcpgate.NewMCPKey()
	k := &mcpgate.APIKey{ID: id, WorkspaceID: f.workspace, UserID: f.user, Name: "k", Scope: mcpgate.ScopeFull, ExpiresAt: expires}
	if err := f.db.CreateKey(context.Background(), k, hash); err != nil {
		t.Fatalf("CreateKey() err = %v", err)
	}
	return k, key
}

// mustGrant grants the fixture's person's workspace to a client for
// resource and returns the grant's access and refresh tokens.
func (f *fixture) mustGrant(t *testing.T, resource string) (string, string) {
	t.Helper()
	ctx := context.Background()
	c := &mcpgate.OAuthClient{ID: "mcpc_" + strings.ReplaceAll(resource, "/", "_"), Kind: mcpgate.ClientDCR, Name: "Test",
		RedirectURIs: []string{"http://127.0.0.1/cb"}}
	if err := f.db.SaveOAuthClient(ctx, c, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	code, _, _ := mcpgate.NewMCPKey() // any unguessable string
	if err := f.db.CreateOAuthCode(ctx, mcpgate.HashToken(code), store.OAuthCode{ClientID: c.ID, WorkspaceID: f.workspace,
		UserID: f.user, RedirectURI: "http://127.0.0.1/cb", Challenge: "c", Resource: resource, Scope: mcpgate.ScopeReadOnly,
		ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	access, _, _ := mcpgate.NewMCPKey()
	refresh, _, _ := mcpgate.NewMCPKey()
	access, refresh = "mcpat_"+access, "mcprt_"+refresh
	now := time.Now()
	pair := store.TokenPair{AccessHash: mcpgate.HashToken(access), RefreshHash: mcpgate.HashToken(refresh),
		AccessExpires: now.Add(time.Hour), RefreshExpires: now.Add(24 * time.Hour)}
	if _, err := f.db.RedeemOAuthCode(ctx, mcpgate.HashToken(code), now, func(*store.OAuthCode) error { return nil }, pair); err != nil {
		t.Fatalf("RedeemOAuthCode() err = %v", err)
	}
	return access, refresh
}

// notListening is the services' trust while the invalidation listener is
// down: nothing cached is fresh.
type notListening struct{}

func (notListening) Fresh(time.Time) bool      { return false }
func (notListening) Stale(time.Time) bool      { return true }
func (notListening) Failed()                   {}
func (notListening) SkipReload(time.Time) bool { return false }
func (notListening) Revalidate(time.Time) bool { return false }
