package service_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// fakeAS is an OAuth-protected MCP server with its authorization server:
// the resource answers 401 with its metadata; the token endpoint checks
// PKCE, and rotates refresh tokens, refusing a reused one (invalid_grant)
// as the gateway's own authorization server does.
type fakeAS struct {
	*httptest.Server
	mu        sync.Mutex
	codes     map[string]string // code -> PKCE challenge
	refresh   map[string]bool   // refresh tokens that are current
	access    map[string]bool
	seq       int
	refreshes int
	reused    int
	revoked   int
}

func newFakeAS(t *testing.T) *fakeAS {
	t.Helper()
	as := &fakeAS{codes: map[string]string{}, refresh: map[string]bool{}, access: map[string]bool{}}
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		as.mu.Lock()
		ok := as.access[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		as.mu.Unlock()
		if ok {
			http.Error(w, "not an MCP server", http.StatusNotFound)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+as.URL+`/.well-known/oauth-protected-resource/mcp", scope="files"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"resource": as.URL + "/mcp", "authorization_servers": []string{as.URL + "/tenant"}})
	})
	// The issuer has a path: its metadata is at the path-inserted URI.
	mux.HandleFunc("/.well-known/oauth-authorization-server/tenant", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"issuer": as.URL + "/tenant", "authorization_endpoint": as.URL + "/authorize",
			"token_endpoint": as.URL + "/token", "registration_endpoint": as.URL + "/register", "revocation_endpoint": as.URL + "/revoke",
			"code_challenge_methods_supported": []string{"S256"}, "response_types_supported": []string{"code"},
			"client_id_metadata_document_supported": true})
	})
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 201, map[string]any{"client_id": "client-1", "client_secret": "client-secret-0123456789"})
	})
	mux.HandleFunc("/revoke", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		as.mu.Lock()
		if as.refresh[r.Form.Get("token")] || as.access[r.Form.Get("token")] {
			as.revoked++
		}
		delete(as.refresh, r.Form.Get("token"))
		delete(as.access, r.Form.Get("token"))
		as.mu.Unlock()
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		as.mu.Lock()
		defer as.mu.Unlock()
		if r.Form.Get("client_id") != "client-1" || r.Form.Get("client_secret") != "client-secret-0123456789" {
			writeJSON(w, 401, map[string]any{"error": "invalid_client"})
			return
		}
		switch r.Form.Get("grant_type") {
		case "authorization_code":
			sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
			challenge, ok := as.codes[r.Form.Get("code")]
			delete(as.codes, r.Form.Get("code"))
			if !ok || challenge != base64.RawURLEncoding.EncodeToString(sum[:]) || r.Form.Get("resource") != as.URL+"/mcp" {
				writeJSON(w, 400, map[string]any{"error": "invalid_grant"})
				return
			}
		case "refresh_token":
			rt := r.Form.Get("refresh_token")
			if !as.refresh[rt] {
				as.reused++
				// Reuse detection: the whole grant goes.
				clear(as.refresh)
				clear(as.access)
				writeJSON(w, 400, map[string]any{"error": "invalid_grant", "error_description": "refresh token reused"})
				return
			}
			delete(as.refresh, rt)
			as.refreshes++
		default:
			writeJSON(w, 400, map[string]any{"error": "unsupported_grant_type"})
			return
		}
		as.seq++
		at, rt := fmt.Sprintf("fake-at-%d-0123456789", as.seq), fmt.Sprintf("fake-rt-%d-0123456789", as.seq)
		as.access[at], as.refresh[rt] = true, true
		writeJSON(w, 200, map[string]any{"access_token": at, "refresh_token": rt, "token_type": "Bearer", "expires_in": 3600})
	})
	as.Server = httptest.NewServer(mux)
	t.Cleanup(as.Close)
	return as
}

// issueCode is the person consenting: the authorization server's code for
// the request's PKCE challenge.
func (as *fakeAS) issueCode(authorizeURL string) (code, state string) {
	u, _ := url.Parse(authorizeURL)
	as.mu.Lock()
	defer as.mu.Unlock()
	as.seq++
	code = fmt.Sprintf("code-%d", as.seq)
	as.codes[code] = u.Query().Get("code_challenge")
	return code, u.Query().Get("state")
}

func (as *fakeAS) counts() (refreshes, reused int) {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.refreshes, as.reused
}

func (as *fakeAS) revokeAll() {
	as.mu.Lock()
	defer as.mu.Unlock()
	clear(as.refresh)
	clear(as.access)
}

// oauthReplica is one replica's server service and credential hook.
type oauthReplica struct {
	svc   *service.Servers
	creds *service.UpstreamCredentials
}

func newOAuthReplica(t *testing.T, env *servicetest.Env, hold func(context.Context)) oauthReplica {
	t.Helper()
	pool := upstream.New[service.UpstreamKey](upstream.Options{Network: loopbackNetwork, ConnectTimeout: 5 * time.Second})
	t.Cleanup(func() { _ = pool.Close() })
	creds := service.NewUpstreamCredentials(service.UpstreamCredentialsOptions{DB: env.DB, Keyring: env.Keyring, Audit: env.Audit,
		Network: loopbackNetwork, PublicURL: "http://localhost:8080", BeforeRefresh: hold})
	svc := service.NewServers(service.ServersOptions{DB: env.DB, Keyring: env.Keyring, Audit: env.Audit, Pool: pool,
		Network: loopbackNetwork, PublicURL: "http://localhost:8080", Credentials: creds, Logger: slog.New(slog.DiscardHandler)})
	return oauthReplica{svc: svc, creds: creds}
}

// connect runs Connect and the callback for a as u in session sid.
func connectFake(t *testing.T, r oauthReplica, as *fakeAS, u *mcpgate.User, a *mcpgate.Actor, sid string) {
	t.Helper()
	ctx := context.Background()
	c, err := r.svc.Connect(ctx, a, "up", sid)
	if err != nil {
		t.Fatalf("Connect() err = %v", err)
	}
	code, state := as.issueCode(c.AuthorizeURL)
	if _, err := r.svc.FinishConnect(ctx, u, sid, state, code, as.URL+"/tenant", ""); err != nil {
		t.Fatalf("FinishConnect() err = %v", err)
	}
}

// bearerOf runs one exchange through the hook and returns the bearer sent.
func bearerOf(ctx context.Context, r oauthReplica, a *mcpgate.Actor, as *fakeAS) (string, error) {
	var got string
	err := r.creds.Do(ctx, a, "up", upstream.Target{URL: as.URL + "/mcp"}, func(t upstream.Target) error {
		got = strings.TrimPrefix(t.Headers["Authorization"].Reveal(), "Bearer ")
		return nil
	})
	return got, err
}

func addFakeServer(t *testing.T, r oauthReplica, a *mcpgate.Actor, as *fakeAS, perPerson bool) *mcpgate.Server {
	t.Helper()
	srv, err := r.svc.AddServer(context.Background(), a, mcpgate.ServerInput{Name: "up", URL: as.URL + "/mcp",
		Credential: mcpgate.CredentialOAuth, PerPerson: perPerson})
	if err != nil {
		t.Fatalf("AddServer(oauth) err = %v", err)
	}
	return srv
}

func TestServerOAuth_AddAndConnect(t *testing.T) {
	env := servicetest.New(t, service.Options{})
	as := newFakeAS(t)
	r := newOAuthReplica(t, env, nil)
	u, a := env.NewUser(t, "alice@example.com")
	srv := addFakeServer(t, r, a, as, false)
	// The issuer's metadata was found at the path-inserted URI; PUBLIC_URL
	// is not https, so the gateway registered by DCR though the server
	// takes metadata documents.
	if srv.Credential != mcpgate.CredentialOAuth || srv.OAuth == nil || srv.OAuth.Issuer != as.URL+"/tenant" ||
		srv.OAuth.Registration != "dcr" || srv.OAuth.State != mcpgate.OAuthNotConnected {
		t.Fatalf("server = %+v / %+v", srv, srv.OAuth)
	}
	if _, err := bearerOf(context.Background(), r, a, as); !strings.Contains(mcpgate.ErrorMessage(err), "admin must connect it at http://localhost:8080/app/w/") {
		t.Fatalf("exchange before connecting err = %v, want who must connect and where", err)
	}
	connectFake(t, r, as, u, a, "sess-1")
	got, err := bearerOf(context.Background(), r, a, as)
	if err != nil || !strings.HasPrefix(got, "fake-at-") {
		t.Fatalf("bearer = %q, %v", got, err)
	}
	// The client secret and tokens are in no answer or audit row.
	s, _ := r.svc.Server(context.Background(), a, "up")
	answers, _ := json.Marshal(struct {
		S  any
		Ev any
	}{s, env.Audit.Events()})
	for _, secret := range []string{got, "fake-rt-", "client-secret-0123456789", "code-"} {
		if strings.Contains(string(answers), secret) {
			t.Errorf("an answer or audit row holds %q", secret)
		}
	}
	// Another workspace with a server of the same name and issuer does not
	// see the grant; and the sealed grant is bound to its owner: moved onto
	// that workspace's server, it does not open.
	_, b := env.NewUser(t, "bob@example.com")
	addFakeServer(t, r, b, as, false)
	if s, _ := r.svc.Server(context.Background(), b, "up"); s.OAuth.State != mcpgate.OAuthNotConnected {
		t.Errorf("bob's server state = %q, want not connected", s.OAuth.State)
	}
	if _, err := env.DB.Pool.Exec(context.Background(), `UPDATE upstream_oauth_grants g SET workspace_id = $1,
		server_id = (SELECT id FROM upstream_server_oauth WHERE workspace_id = $1)`, b.WorkspaceID); err != nil {
		t.Fatal(err)
	}
	if got, err := bearerOf(context.Background(), r, b, as); err == nil || got != "" {
		t.Errorf("a grant moved to another workspace sent %q (err %v)", got, err)
	}
}

// Two replicas refresh the same expiring grant: the first holds its
// refresh under the grant's lock; the second waits for it and takes the
// new tokens instead of refreshing again (which a server that rotates
// refresh tokens would take for reuse and end the grant).
func TestServerOAuth_OneRefreshAcrossReplicas(t *testing.T) {
	env := servicetest.New(t, service.Options{})
	as := newFakeAS(t)
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r1 := newOAuthReplica(t, env, func(context.Context) {
		once.Do(func() {
			close(held)
			<-release
		})
	})
	r2 := newOAuthReplica(t, env, nil)
	u, a := env.NewUser(t, "alice@example.com")
	addFakeServer(t, r1, a, as, false)
	connectFake(t, r1, as, u, a, "sess-1")
	ctx := context.Background()
	if _, err := env.DB.Pool.Exec(ctx, `UPDATE upstream_oauth_grants SET expires_at = now()`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		bearer string
		err    error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() { b, err := bearerOf(ctx, r1, a, as); first <- result{b, err} }()
	<-held
	go func() { b, err := bearerOf(ctx, r2, a, as); second <- result{b, err} }()
	// The second replica waits on the grant's row lock.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := env.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%upstream_oauth_grants%FOR UPDATE%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second refresh never waited for the first")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	r1res, r2res := <-first, <-second
	if r1res.err != nil || r2res.err != nil {
		t.Fatalf("refreshes err = %v / %v", r1res.err, r2res.err)
	}
	if r1res.bearer != r2res.bearer || !strings.HasPrefix(r1res.bearer, "fake-at-") {
		t.Errorf("bearers = %q / %q, want the one refreshed token", r1res.bearer, r2res.bearer)
	}
	if refreshes, reused := as.counts(); refreshes != 1 || reused != 0 {
		t.Errorf("the authorization server saw %d refreshes (%d reused), want 1 (0)", refreshes, reused)
	}
}

func TestServerOAuth_RefreshOn401AndReconnect(t *testing.T) {
	env := servicetest.New(t, service.Options{})
	as := newFakeAS(t)
	r := newOAuthReplica(t, env, nil)
	u, a := env.NewUser(t, "alice@example.com")
	addFakeServer(t, r, a, as, false)
	connectFake(t, r, as, u, a, "sess-1")
	ctx := context.Background()

	var sent []string
	exchange := func(status int) error {
		sent = sent[:0]
		return r.creds.Do(ctx, a, "up", upstream.Target{URL: as.URL + "/mcp"}, func(t upstream.Target) error {
			sent = append(sent, t.Headers["Authorization"].Reveal())
			if len(sent) == 1 && status != 0 {
				return &upstream.Error{Kind: upstream.KindUnauthorized, Status: status, Message: "refused"}
			}
			return nil
		})
	}
	if err := exchange(401); err != nil || len(sent) != 2 || sent[0] == sent[1] {
		t.Fatalf("a 401 err = %v, sent %d times (%v), want once more with a refreshed token", err, len(sent), len(sent) == 2 && sent[0] == sent[1])
	}
	if err := exchange(403); err == nil || len(sent) != 1 {
		t.Errorf("a 403 err = %v after %d sends, want it passed on, not retried", err, len(sent))
	}

	as.revokeAll()
	err := exchange(401)
	var ce *service.CredentialError
	if !errors.As(err, &ce) || !strings.Contains(mcpgate.ErrorMessage(err), "admin must reconnect") {
		t.Fatalf("after revocation err = %v, want reconnect needed", err)
	}
	if s, _ := r.svc.Server(ctx, a, "up"); s.OAuth.State != mcpgate.OAuthReconnectNeeded {
		t.Errorf("state = %q", s.OAuth.State)
	}
	if ev := env.Audit.Last(); ev.Action != string(mcpgate.ActionServerRefreshFailed) || ev.Outcome != mcpgate.OutcomeError {
		t.Errorf("last audit = %s %s, want server.refresh_failed", ev.Action, ev.Outcome)
	}
	// Nothing is sent while the grant waits for a person.
	if err := exchange(0); !errors.As(err, &ce) || len(sent) != 0 {
		t.Errorf("exchange while reconnect needed err = %v, %d sends", err, len(sent))
	}
	connectFake(t, r, as, u, a, "sess-1")
	if err := exchange(0); err != nil {
		t.Errorf("after reconnecting err = %v", err)
	}
	// Disconnect deletes the grant and revokes it at the server.
	if err := r.svc.Disconnect(ctx, a, "up"); err != nil {
		t.Fatal(err)
	}
	as.mu.Lock()
	revoked := as.revoked
	as.mu.Unlock()
	if revoked == 0 {
		t.Error("Disconnect revoked nothing at the authorization server")
	}
	if err := exchange(0); !strings.Contains(mcpgate.ErrorMessage(err), "not connected") {
		t.Errorf("after Disconnect err = %v", err)
	}
	// Removing the server revokes its grants at the authorization server.
	connectFake(t, r, as, u, a, "sess-1")
	as.mu.Lock()
	revoked = as.revoked
	as.mu.Unlock()
	if err := r.svc.RemoveServer(ctx, a, "up"); err != nil {
		t.Fatal(err)
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.revoked != revoked+1 || len(as.refresh) != 0 {
		t.Errorf("RemoveServer revoked %d grants (%d refresh tokens left), want the one", as.revoked-revoked, len(as.refresh))
	}
}

func TestServerOAuth_StateBinding(t *testing.T) {
	env := servicetest.New(t, service.Options{})
	as := newFakeAS(t)
	r := newOAuthReplica(t, env, nil)
	u, a := env.NewUser(t, "alice@example.com")
	mallory, _ := env.NewUser(t, "mallory@example.com")
	addFakeServer(t, r, a, as, false)
	ctx := context.Background()
	c, err := r.svc.Connect(ctx, a, "up", "sess-1")
	if err != nil {
		t.Fatal(err)
	}
	code, state := as.issueCode(c.AuthorizeURL)
	for name, try := range map[string]func() error{
		"another session": func() error { _, err := r.svc.FinishConnect(ctx, u, "sess-2", state, code, "", ""); return err },
		"another person":  func() error { _, err := r.svc.FinishConnect(ctx, mallory, "sess-1", state, code, "", ""); return err },
		"another issuer": func() error {
			_, err := r.svc.FinishConnect(ctx, u, "sess-1", state, code, "https://evil.example", "")
			return err
		},
	} {
		if err := try(); err == nil {
			t.Errorf("FinishConnect from %s succeeded", name)
		}
	}
	// The issuer mix-up consumed the state: a state is used once.
	if _, err := r.svc.FinishConnect(ctx, u, "sess-1", state, code, "", ""); err == nil {
		t.Error("a state was used twice")
	}
	// An expired state is refused.
	c, _ = r.svc.Connect(ctx, a, "up", "sess-1")
	code, state = as.issueCode(c.AuthorizeURL)
	if _, err := env.DB.Pool.Exec(ctx, `UPDATE upstream_oauth_states SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.FinishConnect(ctx, u, "sess-1", state, code, "", ""); err == nil {
		t.Error("an expired state was taken")
	}
}

// A server where each member connects their own account: a call uses the
// caller's grant only, never the workspace's or another member's.
func TestServerOAuth_PerPerson(t *testing.T) {
	env := servicetest.New(t, service.Options{})
	as := newFakeAS(t)
	r := newOAuthReplica(t, env, nil)
	ctx := context.Background()
	alice, a := env.NewUser(t, "alice@example.com")
	carolU, _ := env.NewUser(t, "carol@example.com")
	if _, err := env.DB.Pool.Exec(ctx, `INSERT INTO members (workspace_id, user_id, role) VALUES ($1, $2, 'member')`,
		a.WorkspaceID, carolU.ID); err != nil {
		t.Fatal(err)
	}
	carol, _, err := env.Service.Workspaces.Enter(ctx, carolU, a.WorkspaceID, mcpgate.SourceDashboard)
	if err != nil {
		t.Fatal(err)
	}
	addFakeServer(t, r, a, as, false)
	connectFake(t, r, as, alice, a, "sess-a") // the workspace's grant
	workspaceBearer, err := bearerOf(ctx, r, carol, as)
	if err != nil {
		t.Fatalf("a member uses the workspace's grant: err = %v", err)
	}
	// A member may not connect the workspace's grant.
	if _, err := r.svc.Connect(ctx, carol, "up", "sess-c"); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("a member's Connect of the workspace grant err = %v, want forbidden", err)
	}

	on := true
	if _, err := r.svc.UpdateServer(ctx, carol, "up", mcpgate.ServerUpdate{PerPerson: &on}); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("a member switches the server to per person: err = %v", err)
	}
	s, err := r.svc.UpdateServer(ctx, a, "up", mcpgate.ServerUpdate{PerPerson: &on})
	if err != nil || !s.OAuth.PerPerson || s.OAuth.State != mcpgate.OAuthNotConnected {
		t.Fatalf("UpdateServer(per_person) = %+v, %v", s.OAuth, err)
	}
	// The workspace's grant is gone; nobody falls back to it.
	for name, x := range map[string]*mcpgate.Actor{"alice": a, "carol": carol} {
		got, err := bearerOf(ctx, r, x, as)
		if got != "" || !strings.Contains(mcpgate.ErrorMessage(err), "yours is not connected: connect it at http://localhost:8080/app/w/") {
			t.Errorf("%s without a grant of their own: sent %q, err = %v", name, got, err)
		}
	}
	connectFake(t, r, as, carolU, carol, "sess-c")
	carolBearer, err := bearerOf(ctx, r, carol, as)
	if err != nil || carolBearer == workspaceBearer {
		t.Fatalf("carol's own grant: %q, %v", carolBearer, err)
	}
	if got, err := bearerOf(ctx, r, a, as); got != "" || err == nil {
		t.Errorf("alice used carol's grant: %q", got)
	}
	if s, _ := r.svc.Server(ctx, a, "up"); s.OAuth.State != mcpgate.OAuthNotConnected {
		t.Errorf("alice sees state %q, want her own (not connected)", s.OAuth.State)
	}
	if s, _ := r.svc.Server(ctx, carol, "up"); s.OAuth.State != mcpgate.OAuthConnected {
		t.Errorf("carol sees state %q, want connected", s.OAuth.State)
	}
	connectFake(t, r, as, alice, a, "sess-a")
	aliceBearer, _ := bearerOf(ctx, r, a, as)
	// Carol's refresh refused marks carol's grant only.
	if _, err := env.DB.Pool.Exec(ctx, `UPDATE upstream_oauth_grants SET expires_at = now() WHERE user_id = $1`, carolU.ID); err != nil {
		t.Fatal(err)
	}
	as.mu.Lock()
	for rt := range as.refresh {
		delete(as.refresh, rt) // every refresh token, alice's too: only carol's is asked for
	}
	as.mu.Unlock()
	if _, err := bearerOf(ctx, r, carol, as); !strings.Contains(mcpgate.ErrorMessage(err), "your connection to the server up was revoked") {
		t.Errorf("carol after a refused refresh err = %v", err)
	}
	if got, err := bearerOf(ctx, r, a, as); err != nil || got != aliceBearer {
		t.Errorf("alice after carol's refused refresh: %q, %v", got, err)
	}
	// Carol disconnects her own grant only.
	if err := r.svc.Disconnect(ctx, carol, "up"); err != nil {
		t.Fatal(err)
	}
	if got, _ := bearerOf(ctx, r, a, as); got != aliceBearer {
		t.Errorf("alice's grant after carol's disconnect: %q", got)
	}
}

// TestServerOAuth_ClientRegisteredByHand: an admin may give the client an
// authorization server issued by hand; it is used as given (no
// registration), its secret sealed and in no answer or audit row, and a
// client for a server that takes no OAuth, or a secret without its id, is
// refused with nothing added.
func TestServerOAuth_ClientRegisteredByHand(t *testing.T) {
	env := servicetest.New(t, service.Options{})
	as := newFakeAS(t)
	r := newOAuthReplica(t, env, nil)
	_, a := env.NewUser(t, "alice@example.com")
	const secret = "hand-registered-secret-7c1d"
	for name, in := range map[string]mcpgate.ServerInput{
		"headers":         {Name: "h1", URL: as.URL + "/mcp", OAuthClientID: "cid"},
		"secret alone":    {Name: "h2", URL: as.URL + "/mcp", Credential: mcpgate.CredentialOAuth, OAuthClientSecret: secret},
		"line break":      {Name: "h3", URL: as.URL + "/mcp", Credential: mcpgate.CredentialOAuth, OAuthClientID: "a\nb"},
		"overlong secret": {Name: "h4", URL: as.URL + "/mcp", Credential: mcpgate.CredentialOAuth, OAuthClientID: "cid", OAuthClientSecret: mcpgate.Secret(strings.Repeat("s", 513))},
	} {
		if _, err := r.svc.AddServer(context.Background(), a, in); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
			t.Errorf("%s: AddServer err = %v, want invalid", name, err)
		}
		if _, err := r.svc.Server(context.Background(), a, in.Name); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
			t.Errorf("%s: a refused server was added (err %v)", name, err)
		}
	}
	srv, err := r.svc.AddServer(context.Background(), a, mcpgate.ServerInput{Name: "up", URL: as.URL + "/mcp",
		Credential: mcpgate.CredentialOAuth, OAuthClientID: "hand-client", OAuthClientSecret: secret})
	if err != nil || srv.OAuth == nil || srv.OAuth.Registration != "manual" {
		t.Fatalf("AddServer(hand-registered) = %+v, %v, want registration manual", srv, err)
	}
	c, err := r.svc.Connect(context.Background(), a, "up", "sess-1")
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.Parse(c.AuthorizeURL)
	if q.Query().Get("client_id") != "hand-client" {
		t.Errorf("authorize_url client_id = %q, want the admin's", q.Query().Get("client_id"))
	}
	answers, _ := json.Marshal(struct{ S, Ev any }{srv, env.Audit.Events()})
	if strings.Contains(string(answers), secret) {
		t.Error("an answer or audit row holds the client secret")
	}
	var sealed int
	if err := env.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM upstream_oauth_client_secrets s
		WHERE position($1::bytea in s.sealed) = 0`, []byte(secret)).Scan(&sealed); err != nil || sealed != 1 {
		t.Errorf("sealed client secrets = %d (%v), want the one, not in plain text", sealed, err)
	}
}

// TestServerOAuth_BearerKeepsTheTarget: the grant's bearer is added to the
// target as it was given: the capabilities its sessions declare (the
// requests relayed to the caller) reach the pool for an OAuth server too.
func TestServerOAuth_BearerKeepsTheTarget(t *testing.T) {
	env := servicetest.New(t, service.Options{})
	as := newFakeAS(t)
	r := newOAuthReplica(t, env, nil)
	u, a := env.NewUser(t, "alice@example.com")
	addFakeServer(t, r, a, as, false)
	connectFake(t, r, as, u, a, "sess-1")
	caps := upstream.Capabilities{ClientCapabilities: mcpgate.ClientCapabilities{ElicitationForm: true}, PassInputRequests: true}
	var got upstream.Target
	if err := r.creds.Do(context.Background(), a, "up", upstream.Target{URL: as.URL + "/mcp", Capabilities: caps},
		func(t upstream.Target) error { got = t; return nil }); err != nil {
		t.Fatal(err)
	}
	if got.Capabilities != caps || !strings.HasPrefix(got.Headers["Authorization"].Reveal(), "Bearer fake-at-") {
		t.Fatalf("target = %+v, want the capabilities kept and the bearer added", got)
	}
}
