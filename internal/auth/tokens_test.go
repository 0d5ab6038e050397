package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/store"
)

// ownsGW is the resource check of a gateway at https://gw.example.com.
func ownsGW(res string) bool {
	return res == "https://gw.example.com/mcp" || res == "https://gw.example.com"
}

func TestTokens_Authenticate(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	access, refresh := f.mustGrant(t, "https://gw.example.com/mcp")
	tokens := auth.NewTokens(auth.TokensOptions{Store: f.db, OwnsResource: ownsGW})
	defer tokens.Close()

	a, err := tokens.Authenticate(ctx, bearer(access))
	if err != nil || a == nil || a.WorkspaceID != f.workspace || a.UserID != f.user || a.Scope != mcpgate.ScopeReadOnly ||
		a.GrantID == "" || a.ClientName != "Test" || a.KeyID != "" || a.Source != mcpgate.SourceMCP {
		t.Fatalf("Authenticate(access) = %+v, %v", a, err)
	}
	// Not its kind of credential: the next authenticator decides. An access
	// token counts only as a bearer token (never in the connector URL or
	// X-API-Key).
	key, _, _ := mcpgate.NewMCPKey()
	for _, p := range []mcpgate.Presented{bearer(key), bearer(refresh), {Value: mcpgate.Secret(access)}, {}} {
		if a, err := tokens.Authenticate(ctx, p); a != nil || err != nil {
			t.Errorf("Authenticate(not an access token: %+v) = %v, %v, want nil, nil", p.Bearer, a, err)
		}
	}
	if _, err := tokens.Authenticate(ctx, bearer(auth.AccessTokenPrefix+"unknown")); !refusedAs(err, "oauth_unknown") {
		t.Errorf("Authenticate(unknown) err = %v, want refused as oauth_unknown", err)
	}

	// A token bound to another resource is refused (RFC 8707).
	other, _ := f.mustGrant(t, "https://other.example.com/mcp")
	if _, err := tokens.Authenticate(ctx, bearer(other)); !refusedAs(err, "oauth_audience") {
		t.Errorf("Authenticate(token for another resource) err = %v, want refused as oauth_audience", err)
	}

	// Without a resource check nothing is this gateway's.
	blind := auth.NewTokens(auth.TokensOptions{Store: f.db})
	defer blind.Close()
	if _, err := blind.Authenticate(ctx, bearer(access)); !refusedAs(err, "oauth_audience") {
		t.Errorf("Authenticate() without OwnsResource err = %v, want refused as oauth_audience", err)
	}

	// Revocation: the cached token goes with the invalidation, of grants
	// or of memberships (removing a member deletes their grants).
	if err := f.db.RevokeGrant(ctx, f.workspace, a.GrantID); err != nil {
		t.Fatal(err)
	}
	if a, err := tokens.Authenticate(ctx, bearer(access)); err != nil || a == nil {
		t.Fatalf("cached token before the invalidation = %v, %v; want it still cached (the test's premise)", a, err)
	}
	tokens.Invalidate(store.InvalidateKeys, f.workspace)
	if _, err := tokens.Authenticate(ctx, bearer(access)); !refusedOAuth(err) {
		t.Errorf("Authenticate(revoked) err = %v, want an OAuth refusal", err)
	}
}

// With the listener down, a token is checked against the database on every
// use, so a revocation made on another replica (whose notification this one
// may never get) is honoured at once, as for keys.
func TestTokens_FollowsTrust(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tokens := auth.NewTokens(auth.TokensOptions{Store: f.db, OwnsResource: ownsGW, Trust: notListening{}})
	defer tokens.Close()
	access, _ := f.mustGrant(t, "https://gw.example.com/mcp")
	a, err := tokens.Authenticate(ctx, bearer(access))
	if err != nil || a == nil {
		t.Fatalf("Authenticate() = %v, %v", a, err)
	}
	if err := f.db.RevokeGrant(ctx, f.workspace, a.GrantID); err != nil {
		t.Fatal(err)
	}
	// No Invalidate: the notification is lost.
	if _, err := tokens.Authenticate(ctx, bearer(access)); !refusedOAuth(err) {
		t.Errorf("Authenticate(revoked, listener down) err = %v, want an OAuth refusal", err)
	}
}

// refusedOAuth reports whether err refuses an access token (whose grant
// may be revoked, or gone with its tokens).
func refusedOAuth(err error) bool {
	var ae *mcpgate.AuthError
	return errors.As(err, &ae) && strings.HasPrefix(ae.Reason, "oauth_")
}
