package auth_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/store"
)

// TestKeys_Authenticate: a key is verified wherever it was presented and
// names its owner, workspace and scope; every other credential of the
// right shape or not is refused with the reason, and none is left for
// another authenticator.
func TestKeys_Authenticate(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	past := time.Now().Add(-time.Minute)
	k, key := f.mustKey(t, nil)
	_, expired := f.mustKey(t, &past)
	keys := auth.NewKeys(auth.KeysOptions{Store: f.db})
	defer keys.Close()
	for _, p := range []mcpgate.Presented{bearer(key), {Value: mcpgate.Secret(key)}} {
		a, err := keys.Authenticate(ctx, p)
		if err != nil || a == nil || a.KeyID != k.ID || a.UserID != f.user || a.Email != "owner@example.com" ||
			a.WorkspaceID != f.workspace || a.Scope != mcpgate.ScopeFull || a.GrantID != "" || a.Source != mcpgate.SourceMCP {
			t.Fatalf("Authenticate(%+v) = %+v, %v", p.Bearer, a, err)
		}
	}
	if a, err := keys.Authenticate(ctx, mcpgate.Presented{}); a != nil || err != nil {
		t.Errorf("Authenticate(nothing) = %v, %v, want nil, nil", a, err)
	}
	other, _, _ := mcpgate.NewMCPKey()
	swap := "a"
	if key[len(key)-1] == 'a' {
		swap = "b"
	}
	wrongSecret := key[:len(key)-1] + swap // the key's id, another secret
	for _, tt := range []struct{ name, value, reason string }{
		{"not a key", "mcpat_abc", "malformed"},
		{"unknown key", other, "unknown"},
		{"wrong secret", wrongSecret, "unknown"},
		{"expired", expired, "expired"},
	} {
		if _, err := keys.Authenticate(ctx, bearer(tt.value)); !refusedAs(err, tt.reason) {
			t.Errorf("%s: Authenticate() err = %v, want refused as %s", tt.name, err, tt.reason)
		}
	}
	if err := f.db.RevokeKey(ctx, f.workspace, k.ID); err != nil {
		t.Fatal(err)
	}
	keys.Invalidate(store.InvalidateGrants, f.workspace) // not about keys: the cached key stands
	if a, err := keys.Authenticate(ctx, bearer(key)); err != nil || a == nil {
		t.Fatalf("cached key after a grants invalidation = %v, %v; want it still cached", a, err)
	}
	keys.Invalidate(store.InvalidateKeys, f.workspace)
	if _, err := keys.Authenticate(ctx, bearer(key)); !refusedAs(err, "revoked") {
		t.Fatalf("revoked key after its invalidation err = %v, want refused as revoked", err)
	}
}

// TestKeys_InvalidateDuringLoad: a key read from the database just before
// its revocation commits, and cached just after the revocation's
// notification was handled, must not stay cached: the revocation would be
// ignored on this replica until the cache TTL ran out.
func TestKeys_InvalidateDuringLoad(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	k, key := f.mustKey(t, nil)
	var keys *auth.Keys
	var fired atomic.Bool
	keys = auth.NewKeys(auth.KeysOptions{Store: f.db, BeforeStore: func() {
		if fired.CompareAndSwap(false, true) { // the key was read: revoke it, and deliver the notification
			if err := f.db.RevokeKey(ctx, f.workspace, k.ID); err != nil {
				t.Error(err)
			}
			keys.Invalidate(store.InvalidateKeys, f.workspace)
		}
	}})
	defer keys.Close()
	_, _ = keys.Authenticate(ctx, bearer(key)) // loads the key, racing the revocation
	if !fired.Load() {
		t.Fatal("the race was not staged")
	}
	if a, err := keys.Authenticate(ctx, bearer(key)); a != nil || !refusedAs(err, "revoked") {
		t.Fatalf("revoked key after its invalidation = %v, %v; want refused as revoked", a, err)
	}
}

// TestKeys_FollowsTrust: with the listener down nothing cached is fresh, so
// a revocation whose notification is lost holds on the next use.
func TestKeys_FollowsTrust(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	k, key := f.mustKey(t, nil)
	keys := auth.NewKeys(auth.KeysOptions{Store: f.db, Trust: notListening{}})
	defer keys.Close()
	if a, err := keys.Authenticate(ctx, bearer(key)); err != nil || a == nil {
		t.Fatalf("Authenticate() = %v, %v", a, err)
	}
	if err := f.db.RevokeKey(ctx, f.workspace, k.ID); err != nil {
		t.Fatal(err)
	}
	// No Invalidate: the notification is lost.
	if _, err := keys.Authenticate(ctx, bearer(key)); !refusedAs(err, "revoked") {
		t.Fatalf("revoked key, listener down: err = %v, want refused as revoked", err)
	}
}

// TestKeys_LastUsed: a use is recorded off the call path, and written by
// Close at the latest.
func TestKeys_LastUsed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	k, key := f.mustKey(t, nil)
	keys := auth.NewKeys(auth.KeysOptions{Store: f.db})
	if _, err := keys.Authenticate(ctx, bearer(key)); err != nil {
		t.Fatal(err)
	}
	keys.Close()
	got, err := f.db.FindKey(ctx, f.workspace, k.ID)
	if err != nil || got.LastUsedAt == nil {
		t.Fatalf("FindKey() = %+v, %v; want a last use", got, err)
	}
}
