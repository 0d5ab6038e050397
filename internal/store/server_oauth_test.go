package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// TestOAuthGrants_SealedBoundAndRotated: an upstream OAuth grant and a DCR
// client secret are sealed, follow key rotation (the re-seal job binds the
// owner the store computes in SQL), and a person's grant is apart from the
// workspace's.
func TestOAuthGrants_SealedBoundAndRotated(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	k := mustKeyringOn(t, db, testRoot)
	ws, user := mustWorkspace(t, db, "ada@example.com")
	mustPutServer(t, db, k, ws, "files", "files_read")
	const issuer = "https://as.example/tenant|1" // '|' in an issuer cannot shift the binding
	if err := db.PutServerOAuth(ctx, k, ws, "files", store.ServerOAuth{Resource: "https://mcp.example/files", Issuer: issuer,
		Metadata: []byte(`{}`), ClientID: "c1", ClientSecret: "client-secret-0123456789", Registration: "dcr"}); err != nil {
		t.Fatal(err)
	}
	o, err := db.FindServerOAuth(ctx, ws, "files")
	if err != nil || o == nil || o.Issuer != issuer {
		t.Fatalf("FindServerOAuth() = %+v, %v", o, err)
	}
	at := time.Now().Add(time.Hour)
	for _, owner := range []string{"", user.ID} {
		if err := db.PutOAuthGrant(ctx, k, store.OAuthGrant{WorkspaceID: ws, ServerID: o.ServerID, Issuer: issuer, UserID: owner,
			Tokens: store.OAuthTokens{AccessToken: mcpgate.Secret("at-" + owner), RefreshToken: "rt"}, ExpiresAt: &at}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := k.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if moved, failed, err := db.ResealOld(ctx, k, 10, nil); err != nil || len(failed) != 0 || moved < 3 {
		t.Fatalf("ResealOld() = %d, %v, %v; want both grants and the client secret moved", moved, failed, err)
	}
	for _, owner := range []string{"", user.ID} {
		g, err := db.FindOAuthGrant(ctx, k, ws, o.ServerID, issuer, owner)
		if err != nil || g.Tokens.AccessToken.Reveal() != "at-"+owner {
			t.Errorf("grant of %q after re-seal = %+v, %v", owner, g, err)
		}
	}
	if err := db.OpenServerOAuthClientSecret(ctx, k, o); err != nil || o.ClientSecret != "client-secret-0123456789" {
		t.Errorf("client secret after re-seal = %v", err)
	}
	// The person's ciphertext in the workspace's row does not open.
	if _, err := db.Pool.Exec(ctx, `UPDATE upstream_oauth_grants SET sealed = (SELECT sealed FROM upstream_oauth_grants WHERE user_id IS NOT NULL)
		WHERE user_id IS NULL`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.FindOAuthGrant(ctx, k, ws, o.ServerID, issuer, ""); err == nil {
		t.Error("a person's grant opened as the workspace's")
	}
}
