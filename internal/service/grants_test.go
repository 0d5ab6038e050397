package service_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
)

// mustGrant makes a grant of the actor's user in the actor's workspace, as
// the authorization server does when a code is redeemed.
func (f *svcFixture) mustGrant(t *testing.T, a *mcpgate.Actor) string {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	c := &mcpgate.OAuthClient{ID: "mcpc_" + hex.EncodeToString(b), Kind: mcpgate.ClientDCR, Name: "app", RedirectURIs: []string{"http://127.0.0.1/cb"}}
	if err := f.db.SaveOAuthClient(ctx, c, ""); err != nil {
		t.Fatal(err)
	}
	code := make([]byte, 32)
	_, _ = rand.Read(code)
	if err := f.db.CreateOAuthCode(ctx, code, store.OAuthCode{ClientID: c.ID, WorkspaceID: a.WorkspaceID, UserID: a.UserID,
		RedirectURI: "http://127.0.0.1/cb", Challenge: "x", Resource: "http://gw.test/mcp", Scope: mcpgate.ScopeFull,
		ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	h := func() []byte { x := make([]byte, 32); _, _ = rand.Read(x); return x }
	g, err := f.db.RedeemOAuthCode(ctx, code, time.Now(), func(*store.OAuthCode) error { return nil },
		store.TokenPair{AccessHash: h(), RefreshHash: h(), AccessExpires: time.Now().Add(time.Hour), RefreshExpires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return g.ID
}

// Grants follow the keys' visibility: an admin sees and revokes every grant
// of the workspace, a member only their own, and another workspace's grant
// is not found to everyone.
func TestGrants(t *testing.T) {
	f := newSvcFixture(t)
	ctx := context.Background()
	ownerGrant, memberGrant, outsideGrant := f.mustGrant(t, f.owner), f.mustGrant(t, f.member), f.mustGrant(t, f.outside)
	count := func(a *mcpgate.Actor) int {
		gs, err := f.svc.Grants.Grants(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		return len(gs)
	}
	if n := count(f.admin); n != 2 {
		t.Errorf("admin sees %d grants, want 2", n)
	}
	if n := count(f.member); n != 1 {
		t.Errorf("member sees %d grants, want 1 (their own)", n)
	}
	for _, tt := range []struct {
		name  string
		actor *mcpgate.Actor
		id    string
	}{
		{"member revokes the owner's", f.member, ownerGrant},
		{"another workspace's", f.owner, outsideGrant},
		{"outsider revokes into the workspace", f.outside, memberGrant},
		{"not a uuid", f.owner, "nope"},
	} {
		if err := f.svc.Grants.RevokeGrant(ctx, tt.actor, tt.id); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
			t.Errorf("%s: RevokeGrant() err = %v, want not found", tt.name, err)
		}
	}
	if err := f.svc.Grants.RevokeGrant(ctx, f.member, memberGrant); err != nil {
		t.Fatalf("member revokes their own: %v", err)
	}
	if err := f.svc.Grants.RevokeGrant(ctx, f.member, memberGrant); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("revoke twice err = %v, want not found", err)
	}
	if err := f.svc.Grants.RevokeGrant(ctx, f.admin, ownerGrant); err != nil {
		t.Fatalf("admin revokes the owner's: %v", err)
	}
	if n := count(f.owner); n != 0 {
		t.Errorf("owner sees %d live grants after revocations, want 0", n)
	}
	if n := count(f.outside); n != 1 {
		t.Errorf("the other workspace lost its grant: %d", n)
	}
	revoked := 0
	for _, ev := range f.audit.Events() {
		if ev.Action == string(mcpgate.ActionGrantRevoked) {
			revoked++
		}
	}
	if revoked != 2 {
		t.Errorf("grant.revoked audit events = %d, want 2", revoked)
	}
}
