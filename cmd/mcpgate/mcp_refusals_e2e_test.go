package main

// End-to-end tests of the MCP endpoint's refusals: every bad credential
// answers the same 401, and failures from one address are limited.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
)

func TestMCPEndToEnd_AuthRefusals(t *testing.T) {
	f := newMCPFixture(t)
	e, r1, alice, wsA, keyA := f.e, f.r1, f.alice, f.wsA, f.keyA

	t.Run("Unauthorized", func(t *testing.T) {
		alice := alice.with(t)
		// From source addresses of its own, one per case: the failures here
		// must neither count against the other tests' address nor reach the
		// per-address limit (tested in AuthFailureBruteForce).
		const source = "127.0.0.3"
		nextSource := 10
		revoked := alice.createKey(wsA, "revoked", "full", nil)
		expiredInDB := alice.createKey(wsA, "expired in db", "full", nil)
		// Made last, so that as little as can be happens in its two valid
		// seconds.
		soon := time.Now().Add(2 * time.Second)
		expiring := alice.createKey(wsA, "expiring", "full", &soon)
		// Used once while valid, so that the replicas have them cached: a
		// cached key must stop working too.
		for _, k := range []e2eKey{expiring, revoked} {
			for _, r := range e.replicas {
				if resp, body := e.rawMCP(t, r.url+"/mcp", e2eBearer(k.Key), source); resp.StatusCode != http.StatusOK {
					t.Fatalf("valid key = %d %s, want 200", resp.StatusCode, body)
				}
			}
		}
		alice.revokeKey(wsA, revoked.ID)
		db := e.dbConn(t)
		if _, err := db.Exec(context.Background(), `UPDATE api_keys SET expires_at = now() - interval '1 minute' WHERE id = $1`, expiredInDB.ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(soon) + 100*time.Millisecond)
		// The revoke was made on replica 1; replica 2 knows of it once it
		// has applied its notification (not merely after the sleep).
		e.waitApplied(t)

		_, id, _ := mcpgate.NewMCPKey()
		unknown, _, _ := mcpgate.NewMCPKey()
		otherSecret, _, _ := mcpgate.NewMCPKey()
		wrongSecret := "mcpg_" + keyA.ID + otherSecret[len("mcpg_")+len(id):]
		if wrongSecret == keyA.Key || len(wrongSecret) != len(keyA.Key) {
			t.Fatalf("bad test key %q", wrongSecret)
		}
		cases := []struct{ name, key string }{
			{"malformed", "mcpg_not-a-key"},
			{"unknown id", unknown},
			{"right id, wrong secret", wrongSecret},
			{"revoked", revoked.Key},
			{"expired", expiring.Key},
			{"expired (set in the database)", expiredInDB.Key},
		}
		type answer struct{ body, challenge string }
		// Every refusal looks the same; a request with no credential at all
		// differs only in its challenge, which then has no error (RFC 6750
		// §3.1), and both point OAuth clients to the resource metadata. A
		// connector URL is no OAuth resource: its refusals get a
		// plain challenge, the same for every one of them.
		type kind struct{ presented, connector bool }
		first := map[kind]*answer{}
		check := func(t *testing.T, endpoint string, header http.Header, presented bool) {
			t.Helper()
			nextSource++
			k := kind{presented, strings.HasPrefix(endpoint, "/c/")}
			for _, r := range e.replicas {
				resp, body := e.rawMCP(t, r.url+endpoint, header, fmt.Sprintf("127.0.0.%d", nextSource))
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("status = %d %s, want 401", resp.StatusCode, body)
				}
				got := answer{string(body), resp.Header.Get("WWW-Authenticate")}
				switch {
				case k.connector:
					if got.challenge != `Bearer realm="mcpgate", error="invalid_token"` {
						t.Errorf("connector URL: WWW-Authenticate = %q, want a plain Bearer challenge without OAuth hints", got.challenge)
					}
				case !strings.HasPrefix(got.challenge, "Bearer ") || !strings.Contains(got.challenge, `resource_metadata="`+e2ePublicURL+"/.well-known/oauth-protected-resource/mcp\"") ||
					strings.Contains(got.challenge, `error="invalid_token"`) != presented:
					t.Errorf("WWW-Authenticate = %q, want a Bearer challenge naming the resource metadata (error only when a credential was sent: %v)", got.challenge, presented)
				}
				if first[k] == nil {
					first[k] = &got
				} else if got != *first[k] {
					t.Errorf("answer = %+v, want the same as every other 401: %+v", got, *first[k])
				}
			}
		}
		t.Run("missing", func(t *testing.T) { check(t, "/mcp", nil, false) })
		t.Run("empty bearer", func(t *testing.T) { check(t, "/mcp", http.Header{"Authorization": {"Bearer "}}, false) })
		t.Run("basic auth", func(t *testing.T) { check(t, "/mcp", http.Header{"Authorization": {"Basic " + keyA.Key}}, false) })
		for _, c := range cases {
			t.Run(c.name+"/bearer", func(t *testing.T) { check(t, "/mcp", e2eBearer(c.key), true) })
			t.Run(c.name+"/X-API-Key", func(t *testing.T) { check(t, "/mcp", http.Header{"X-Api-Key": {c.key}}, true) })
			t.Run(c.name+"/connector URL", func(t *testing.T) { check(t, "/c/"+c.key+"/mcp", nil, true) })
		}
		if f := first[kind{presented: true}]; f != nil && (strings.Contains(f.body, "revoked") || strings.Contains(f.body, "expired")) {
			t.Errorf("401 body %q hints at the reason", f.body)
		}
		t.Run("go-sdk client", func(t *testing.T) {
			for _, version := range []string{"", "2025-11-25"} {
				cs, err := e.connect(t, r1.url+"/mcp", e2eBearer(revoked.Key), version, nil)
				if err == nil {
					_, err = cs.ListTools(context.Background(), nil)
				}
				if err == nil {
					t.Errorf("revoked key with protocol %q: connect and tools/list succeeded, want an error", version)
				}
			}
		})
	})

	t.Run("AuthFailureBruteForce", func(t *testing.T) {
		const source = "127.0.0.2"
		refused, limited := 0, false
		for !limited && refused < 60 {
			k, _, _ := mcpgate.NewMCPKey()
			resp, body := e.rawMCP(t, r1.url+"/mcp", e2eBearer(k), source)
			switch resp.StatusCode {
			case http.StatusUnauthorized:
				refused++
			case http.StatusTooManyRequests:
				limited = true
				if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
					t.Errorf("429 with Retry-After %q, want a positive number of seconds", ra)
				}
			default:
				t.Fatalf("bad key = %d %s", resp.StatusCode, body)
			}
		}
		// The burst of 20 is the deployment's: each of the replicas allows
		// its share.
		if share := 20 / len(e.replicas); !limited || refused < share {
			t.Fatalf("bad keys from one address: %d answered 401, then limited: %v; want 429 after this replica's share (%d) of the burst of 20",
				refused, limited, share)
		}
		// Another address is not affected.
		if resp, body := e.rawMCP(t, r1.url+"/mcp", e2eBearer("mcpg_bad"), "127.0.0.4"); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("bad key from another address = %d %s, want 401", resp.StatusCode, body)
		}
		// A valid key from the same address (behind a proxy, every client
		// shares it) is not locked out by someone else's failures.
		if resp, body := e.rawMCP(t, r1.url+"/mcp", e2eBearer(keyA.Key), source); resp.StatusCode != http.StatusOK {
			t.Errorf("valid key from the limited address = %d %s, want 200", resp.StatusCode, body)
		}
	})
	e.noSecretLeaks(t)
}
