package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
)

// The issuer and audience the API puts in its session tokens.
const (
	wantIssuer   = "mcpgate"
	wantAudience = "mcpgate-dashboard"
)

// claimsOf reads a session token's claims without checking it.
func claimsOf(t *testing.T, tok string) *jwt.RegisteredClaims {
	t.Helper()
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil {
		t.Fatalf("ParseUnverified(%q) err = %v", tok, err)
	}
	return &c
}

// mustSign signs claims with method and key.
func mustSign(t testing.TB, method jwt.SigningMethod, key any, claims jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatalf("SignedString(%s) err = %v", method.Alg(), err)
	}
	return s
}

// flipSignature changes one character in the middle of the signature. (The
// last character of a raw base64 HMAC carries unused bits, and flipping it
// may decode to the same bytes.)
func flipSignature(tok string) string {
	i := strings.LastIndexByte(tok, '.') + 5
	b := []byte(tok)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func TestSession_Tokens(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, api.Options{})
	a := ts.signedUp(t, "a@example.com")
	b := ts.newClient(t)
	bMe := b.mustSignup("b@example.com")
	valid := a.cookieValue(api.SessionCookie)
	base := claimsOf(t, valid)
	if base.Issuer != wantIssuer || len(base.Audience) != 1 || base.Audience[0] != wantAudience || base.ID == "" {
		t.Fatalf("session claims = %+v, want issuer %q, audience %q and an id", base, wantIssuer, wantAudience)
	}
	// with returns the valid claims changed by fn.
	with := func(fn func(c *jwt.RegisteredClaims)) jwt.RegisteredClaims {
		c := *base
		fn(&c)
		return c
	}
	hs256 := func(c jwt.RegisteredClaims) string { return mustSign(t, jwt.SigningMethodHS256, testSecret, c) }
	past := jwt.NewNumericDate(time.Now().Add(-time.Minute))

	// A live session row that has expired, behind a token that has not.
	expiredRow := ts.signedUp(t, "c@example.com")
	expiredRowTok := expiredRow.cookieValue(api.SessionCookie)
	if _, err := ts.db.Pool.Exec(context.Background(), `UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = $1`,
		claimsOf(t, expiredRowTok).ID); err != nil {
		t.Fatalf("expire session row: %v", err)
	}

	tests := []struct {
		name       string
		token      string
		wantStatus int
	}{
		{name: "valid", token: valid, wantStatus: 200},
		{name: "re-signed valid claims", token: hs256(*base), wantStatus: 200},
		{name: "tampered signature", token: flipSignature(valid), wantStatus: 401},
		{name: "tampered payload", token: func() string {
			forged := strings.Split(hs256(with(func(c *jwt.RegisteredClaims) { c.Subject = bMe.User.ID })), ".")
			parts := strings.Split(valid, ".")
			return parts[0] + "." + forged[1] + "." + parts[2]
		}(), wantStatus: 401},
		{name: "expired", token: hs256(with(func(c *jwt.RegisteredClaims) { c.ExpiresAt = past })), wantStatus: 401},
		{name: "no expiry", token: hs256(with(func(c *jwt.RegisteredClaims) { c.ExpiresAt = nil })), wantStatus: 401},
		{name: "issued in the future", token: hs256(with(func(c *jwt.RegisteredClaims) {
			c.IssuedAt = jwt.NewNumericDate(time.Now().Add(time.Hour))
		})), wantStatus: 401},
		{name: "alg none", token: mustSign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, *base), wantStatus: 401},
		{name: "alg none header with HS256 signature", token: func() string {
			none := strings.Split(mustSign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, *base), ".")
			return none[0] + "." + none[1] + "." + strings.Split(valid, ".")[2]
		}(), wantStatus: 401},
		{name: "HS512 with the right key", token: mustSign(t, jwt.SigningMethodHS512, testSecret, *base), wantStatus: 401},
		{name: "wrong key", token: mustSign(t, jwt.SigningMethodHS256, []byte("another-secret-0123456789abcdefghij"), *base), wantStatus: 401},
		{name: "wrong audience", token: hs256(with(func(c *jwt.RegisteredClaims) { c.Audience = jwt.ClaimStrings{"mcpgate-mcp"} })), wantStatus: 401},
		{name: "no audience", token: hs256(with(func(c *jwt.RegisteredClaims) { c.Audience = nil })), wantStatus: 401},
		{name: "wrong issuer", token: hs256(with(func(c *jwt.RegisteredClaims) { c.Issuer = "someone-else" })), wantStatus: 401},
		{name: "unknown session id", token: hs256(with(func(c *jwt.RegisteredClaims) { c.ID = "7f6c2a51-33a4-4c5e-9a53-8d3b8e0c1f00" })), wantStatus: 401},
		{name: "session id not a uuid", token: hs256(with(func(c *jwt.RegisteredClaims) { c.ID = "1' OR '1'='1" })), wantStatus: 401},
		{name: "no session id", token: hs256(with(func(c *jwt.RegisteredClaims) { c.ID = "" })), wantStatus: 401},
		{name: "another user's subject", token: hs256(with(func(c *jwt.RegisteredClaims) { c.Subject = bMe.User.ID })), wantStatus: 401},
		{name: "expired session row", token: expiredRowTok, wantStatus: 401},
		{name: "garbage", token: "not.a.jwt", wantStatus: 401},
		{name: "empty", token: "", wantStatus: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := a.newRequest("GET", "/api/v1/me", nil)
			req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: tt.token})
			c := ts.newClient(t)
			r := c.send(req).wantStatus(t, tt.wantStatus)
			if tt.wantStatus == 401 {
				if code := r.errorCode(t); code != mcpgate.EUnauthorized {
					t.Errorf("error code = %q, want %q", code, mcpgate.EUnauthorized)
				}
				return
			}
			var me meBody
			r.decode(t, &me)
			if me.User.Email != "a@example.com" {
				t.Errorf("/me user = %q, want a@example.com", me.User.Email)
			}
		})
	}
}

// fakeSessions is a SessionStore with function fields.
type fakeSessions struct {
	FindSessionUserFn func(ctx context.Context, id string) (*mcpgate.User, error)
}

func (f fakeSessions) CreateSession(context.Context, string, time.Time) (string, error) {
	return "", errors.New("not used")
}

func (f fakeSessions) FindSessionUser(ctx context.Context, id string) (*mcpgate.User, error) {
	return f.FindSessionUserFn(ctx, id)
}

func (f fakeSessions) DescribeSession(context.Context, string, string, string) error { return nil }

func (f fakeSessions) RevokeSession(context.Context, string) error { return nil }

// FuzzAuthenticate presents arbitrary session cookies: nothing panics, and
// only a token signed with the session secret with HS256, for the right
// issuer and audience, unexpired, for the live session, is accepted.
func FuzzAuthenticate(f *testing.F) {
	const sid, uid = "7f6c2a51-33a4-4c5e-9a53-8d3b8e0c1f00", "0b9a4f6e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
	now := time.Now()
	claims := jwt.RegisteredClaims{Issuer: wantIssuer, Audience: jwt.ClaimStrings{wantAudience}, Subject: uid, ID: sid,
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}
	valid := mustSign(f, jwt.SigningMethodHS256, testSecret, claims)
	expired := claims
	expired.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Minute))
	noExp := claims
	noExp.ExpiresAt = nil
	otherAud := claims
	otherAud.Audience = jwt.ClaimStrings{"mcpgate-other"}
	for _, tok := range []string{valid, flipSignature(valid), "", ".", "..", "a.b.c", "eyJhbGciOiJub25lIn0.e30.",
		valid + "x", strings.ToUpper(valid),
		mustSign(f, jwt.SigningMethodHS384, testSecret, claims), mustSign(f, jwt.SigningMethodHS256, []byte("wrong-secret-0123456789abcdef0123"), claims),
		mustSign(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims), mustSign(f, jwt.SigningMethodHS256, testSecret, expired),
		mustSign(f, jwt.SigningMethodHS256, testSecret, noExp), mustSign(f, jwt.SigningMethodHS256, testSecret, otherAud),
		strings.Repeat("A", 10000) + "." + strings.Repeat("B", 100) + "."} {
		f.Add(tok)
	}
	s := &api.Sessions{Secret: testSecret, TTL: time.Hour, Store: fakeSessions{
		FindSessionUserFn: func(_ context.Context, id string) (*mcpgate.User, error) {
			if id == sid {
				return &mcpgate.User{ID: uid}, nil
			}
			return nil, mcpgate.Errorf(mcpgate.EUnauthorized, "no session")
		}}}
	f.Fuzz(func(t *testing.T, tok string) {
		req := httptest.NewRequest("GET", "/api/v1/me", nil)
		req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: tok})
		u, id, err := s.Authenticate(req)
		if err != nil {
			if code := mcpgate.ErrorCode(err); code != mcpgate.EUnauthorized {
				t.Fatalf("Authenticate(%q) err = %v, want unauthorized", tok, err)
			}
			return
		}
		if u.ID != uid || id != sid {
			t.Fatalf("Authenticate(%q) = %s, %s; want the seeded session", tok, u.ID, id)
		}
		// Only the signed token passes (base64 may ignore trailing bits, so
		// compare what it decodes to rather than the text), and it must
		// verify strictly on its own.
		if got := claimsOf(t, tok); got.Subject != uid || got.ID != sid {
			t.Fatalf("Authenticate(%q) accepted claims %+v", tok, got)
		}
		var c jwt.RegisteredClaims
		if _, err := jwt.ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return testSecret, nil },
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer(wantIssuer), jwt.WithAudience(wantAudience),
			jwt.WithExpirationRequired()); err != nil {
			t.Fatalf("Authenticate(%q) accepted a token that does not verify: %v", tok, err)
		}
	})
}
