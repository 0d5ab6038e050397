package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
)

// fuzzUpstream counts the requests that reach E2B; no fuzzed or bad input
// may get that far.
type fuzzUpstream struct {
	mu      sync.Mutex
	reached int
}

func (u *fuzzUpstream) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	u.mu.Lock()
	u.reached++
	u.mu.Unlock()
	http.Error(w, "no", http.StatusTeapot)
}

func (u *fuzzUpstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.reached
}

func newFuzzGateway(tb testing.TB) (*Fixture, *fuzzUpstream, string) {
	tb.Helper()
	up := &fuzzUpstream{}
	srv := httptest.NewServer(up)
	tb.Cleanup(srv.Close)
	fx := NewFixture(tb, FixtureOptions{
		Registry:   connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: srv.URL, DashboardURL: srv.URL})),
		Credential: "e2b_0123456789abcdef", CallTimeout: time.Second})
	key, _ := fx.AddKey(tb, mcpgate.ScopeFull)
	return fx, up, key
}

// FuzzKeyFromRequest sends arbitrary connector URL paths, Authorization and
// X-API-Key headers to the MCP endpoint: nothing panics, only the real key
// is accepted, and a refusal is 401 (or 429 once an address has guessed too
// often), never a server error.
func FuzzKeyFromRequest(f *testing.F) {
	fx, _, key := newFuzzGateway(f)
	h := fx.Gateway.Handler()
	f.Add("/mcp", "Bearer "+key, "")
	f.Add("/c/"+key+"/mcp", "", "")
	f.Add("/mcp", "", key)
	f.Add("/c/../"+key+"/mcp", "", "")
	f.Add("/c/%2e%2e/mcp", "bearer  "+key+" ", "")
	f.Add("/c//mcp", "Basic "+key, key)
	f.Add("/c/"+strings.Repeat("x", 5000)+"/mcp", "Bearer", "\x00")
	f.Add("/c/mcpg_abcdefghijkm_"+strings.Repeat("é", 20)+"/mcp", "Bearer mcpg_", "mcpg_")
	f.Fuzz(func(t *testing.T, path, authz, apiKey string) {
		got := presented(&http.Request{URL: &url.URL{Path: path}, Header: http.Header{
			"Authorization": {authz}, "X-Api-Key": {apiKey}}}).Value.Reveal()
		if got != "" && !strings.Contains(path+authz+apiKey, got) {
			t.Fatalf("presented() = %q, not part of the request", got)
		}
		r := httptest.NewRequest("POST", "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		r.URL.Path = path
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header["Authorization"] = []string{authz}
		r.Header["X-Api-Key"] = []string{apiKey}
		r.RemoteAddr = "192.0.2.1:1234"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		accepted := got == key
		switch {
		case accepted && w.Code >= 500:
			t.Fatalf("the real key answered %d: %s", w.Code, w.Body)
		case !accepted && w.Code != http.StatusUnauthorized && w.Code != http.StatusTooManyRequests:
			t.Fatalf("presented %q: status %d, want 401 or 429; body %s", got, w.Code, w.Body)
		}
		if !accepted && len(got) >= 20 && strings.Contains(w.Body.String(), got) {
			t.Fatalf("the refusal echoes the presented key: %s", w.Body)
		}
	})
}

// newRedeemGateway is a gateway, a caller and a kill's arguments to mint
// and redeem confirmation tokens for.
func newRedeemGateway(tb testing.TB) (*Gateway, *mcpgate.Actor, map[string]any) {
	fx, _, _ := newFuzzGateway(tb)
	return fx.Gateway, &mcpgate.Actor{KeyID: "key1", UserID: "user-1", WorkspaceID: "ws-1", Scope: mcpgate.ScopeFull},
		map[string]any{"sandbox_id": "iabc123"}
}

// TestConfirmationToken_OwnPrefix: confirmation tokens and request states
// no longer start like OAuth client ids (mcpc_), and one minted with that
// old prefix by a replica of the previous release still redeems, once.
func TestConfirmationToken_OwnPrefix(t *testing.T) {
	g, id, args := newRedeemGateway(t)
	tok, _ := g.mint(purposeConfirm, id, e2b.ToolKillSandbox, args)
	if !strings.HasPrefix(tok, "mcpct_") || strings.HasPrefix(tok, "mcpc_") {
		t.Fatalf("token %.12s...: want the prefix mcpct_, not the OAuth client ids' mcpc_", tok)
	}
	ap := &mcpgate.ApprovalRequest{ID: "apr-1", ExpiresAt: time.Now().Add(time.Minute)}
	if st := g.mintApprovalState(id, e2b.ToolKillSandbox, ap); !strings.HasPrefix(st, "mcpct_") {
		t.Fatalf("request state %.12s...: want the prefix mcpct_", st)
	}
	legacy := "mcpc_" + strings.TrimPrefix(tok, "mcpct_")
	ctx := context.Background()
	if err := g.redeem(ctx, purposeConfirm, legacy, id, e2b.ToolKillSandbox, args); err != nil {
		t.Fatalf("a token with the old prefix: %v", err)
	}
	if err := g.redeem(ctx, purposeConfirm, tok, id, e2b.ToolKillSandbox, args); !errors.Is(err, errBadConfirmation) {
		t.Fatalf("the same token again under the new prefix: err = %v, want refused (spent)", err)
	}
}

// FuzzRedeem presents arbitrary confirmation tokens for a kill: only the
// token minted for exactly this identity, tool and arguments works, once;
// everything else is the same refusal, and nothing panics.
func FuzzRedeem(f *testing.F) {
	g, id, args := newRedeemGateway(f)
	valid, _ := g.mint(purposeConfirm, id, e2b.ToolKillSandbox, args)
	otherArgs, _ := g.mint(purposeConfirm, id, e2b.ToolKillSandbox, map[string]any{"sandbox_id": "iother"})
	otherKey, _ := g.mint(purposeConfirm, &mcpgate.Actor{KeyID: "key2", UserID: "user-1", WorkspaceID: "ws-1"}, e2b.ToolKillSandbox, args)
	state, _ := g.mint(purposeState, id, e2b.ToolKillSandbox, args)
	for _, s := range []string{valid, otherArgs, otherKey, state, "", tokenPrefix, tokenPrefix + ".", valid + "x",
		valid[:len(valid)-1], strings.Replace(valid, ".", "..", 1), tokenPrefix + "e30." + strings.Repeat("A", 43),
		tokenPrefix + strings.Repeat("A", 3000), legacyTokenPrefix + strings.TrimPrefix(valid, tokenPrefix)} {
		f.Add(s)
	}
	want := tokenClaims{Purpose: purposeConfirm, Workspace: id.WorkspaceID, Key: id.KeyID, User: id.UserID,
		Tool: e2b.ToolKillSandbox, Args: argsHash(args)}
	f.Fuzz(func(t *testing.T, token string) {
		err := g.redeem(context.Background(), purposeConfirm, token, id, e2b.ToolKillSandbox, args)
		if err == nil {
			// Accepted: it must be a token this gateway's secret signed for
			// exactly this call. (Fuzz workers are separate processes, each
			// minting its own tokens, so the check reads the payload rather
			// than comparing with one string.) Single use is the spent set's.
			body, _ := cutTokenPrefix(token)
			p64, _, _ := strings.Cut(body, ".")
			payload, _ := base64.RawURLEncoding.DecodeString(p64)
			var gr tokenClaims
			_ = json.Unmarshal(payload, &gr)
			gr.Expires, gr.Nonce = 0, ""
			if gr != want {
				t.Fatalf("redeem(%q) accepted a token for %+v", token, gr)
			}
			if err := g.redeem(context.Background(), purposeConfirm, token, id, e2b.ToolKillSandbox, args); err == nil {
				t.Fatalf("redeem(%q) accepted the same token twice", token)
			}
			return
		}
		if !errors.Is(err, errBadConfirmation) {
			t.Fatalf("redeem(%q) err = %v, want the one refusal", token, err)
		}
	})
}

// FuzzToolArguments feeds arbitrary JSON to every tool the way a tools/call
// does (confirmation_token split off, then Decode): nothing panics, a refusal
// is a short, coded invalid-argument error, and accepted arguments can be
// audited, described and hashed.
func FuzzToolArguments(f *testing.F) {
	fx, _, _ := newFuzzGateway(f)
	tools := fx.Gateway.opts.Registry.Tools()
	seeds := []string{`{}`, `null`, `[]`, `"x"`, `{"sandbox_id":"../../etc/passwd"}`, `{"sandbox_id":"%2e%2e%2f"}`,
		`{"sandbox_id":"` + strings.Repeat("a", 10000) + `"}`, `{"sandbox_id":"i\u202e\u0000"}`,
		`{"limit":-1}`, `{"limit":1e308}`, `{"limit":1e999}`, `{"timeout":-5}`, `{"timeout":99999999999999999999}`,
		`{"metadata":{"a":"b"},"env_vars":{"K":"V"}}`, `{"confirmation_token":5}`, `{"confirmation_token":"mcpc_x"}`,
		`{"template_id":"base","unknown":1}`, "{\"sandbox_id\":\"\xff\xfe\"}", `{"a":1}{"b":2}`, `{"start":1,"end":-1}`}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		tool := tools[int(which)%len(tools)]
		args, _, err := splitConfirmation(raw)
		var decoded map[string]any
		if err == nil {
			decoded, err = tool.Decode(args)
		}
		if err != nil {
			if mcpgate.ErrorCode(err) != mcpgate.EInvalid {
				t.Fatalf("%s(%q) err = %v (code %s), want invalid", tool.Name, raw, err, mcpgate.ErrorCode(err))
			}
			if msg := mcpgate.ErrorMessage(err); msg == "" || len(msg) > 1000 {
				t.Fatalf("%s(%q) error message is %d bytes", tool.Name, raw, len(msg))
			}
			return
		}
		if _, err := json.Marshal(decoded); err != nil {
			t.Fatalf("%s(%q) accepted arguments that cannot be sent: %v", tool.Name, raw, err)
		}
		_ = mcpgate.RedactArguments(decoded)
		_ = argsHash(decoded)
	})
}

// TestBadToolArguments: arguments a model might send by mistake or malice
// get a clear invalid-argument error before anything reaches E2B (the
// credential is never opened, so no state can change).
func TestBadToolArguments(t *testing.T) {
	fx, up, _ := newFuzzGateway(t)
	huge := map[string]any{}
	for i := range 1000 {
		huge["k"+strings.Repeat("x", i%50)+string(rune('a'+i%26))+string(rune('a'+i/26%26))] = "v"
	}
	validID := "i" + strings.Repeat("a1", 10)
	tests := []struct {
		name string
		tool string
		args any
		want string
	}{
		{"path traversal", e2b.ToolGetSandbox, map[string]any{"sandbox_id": "../../v2/sandboxes"}, "sandbox_id"},
		{"encoded traversal", e2b.ToolResumeSandbox, map[string]any{"sandbox_id": "%2e%2e%2fsandboxes"}, "sandbox_id"},
		{"slash", e2b.ToolPauseSandbox, map[string]any{"sandbox_id": "abc/def"}, "sandbox_id"},
		{"unicode", e2b.ToolGetSandbox, map[string]any{"sandbox_id": "iабв\u202e"}, "sandbox_id"},
		{"very long id", e2b.ToolGetSandboxLogs, map[string]any{"sandbox_id": strings.Repeat("a", 100000)}, "sandbox_id"},
		{"empty id", e2b.ToolGetSandbox, map[string]any{"sandbox_id": ""}, "sandbox_id"},
		{"id of the wrong type", e2b.ToolGetSandbox, map[string]any{"sandbox_id": 42}, "sandbox_id"},
		{"negative limit", e2b.ToolListSandboxes, map[string]any{"limit": -1}, "limit"},
		{"enormous limit", e2b.ToolListSandboxes, map[string]any{"limit": 1 << 60}, "limit"},
		{"fractional limit", e2b.ToolListSandboxes, map[string]any{"limit": 1.5}, "limit"},
		{"log limit over max", e2b.ToolGetSandboxLogs, map[string]any{"sandbox_id": validID, "limit": 1001}, "limit"},
		{"negative timeout", e2b.ToolCreateSandbox, map[string]any{"timeout": -1}, "timeout"},
		{"enormous timeout", e2b.ToolSetSandboxTimeout, map[string]any{"sandbox_id": validID, "timeout": 1e18}, "timeout"},
		{"huge metadata map", e2b.ToolCreateSandbox, map[string]any{"metadata": huge}, "metadata"},
		{"huge env map", e2b.ToolCreateSandbox, map[string]any{"env_vars": huge}, "env_vars"},
		{"unknown field", e2b.ToolListSandboxes, map[string]any{"limti": 5}, "limti"},
		{"not an object", e2b.ToolListSandboxes, []any{1, 2}, "JSON object"},
		{"bad state", e2b.ToolListSandboxes, map[string]any{"state": []string{"exploded"}}, "state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, _ := json.Marshal(tt.args)
			_, err := fx.Service.Tools.CallTool(context.Background(), fx.Owner(), mcpgate.ToolCall{Tool: tt.tool, Arguments: raw, Confirmed: true})
			if mcpgate.ErrorCode(err) != mcpgate.EInvalid || !strings.Contains(mcpgate.ErrorMessage(err), tt.want) {
				t.Errorf("Call(%s) err = %v, want invalid naming %q", tt.tool, err, tt.want)
			}
			if msg := mcpgate.ErrorMessage(err); len(msg) > 1000 {
				t.Errorf("error message is %d bytes", len(msg))
			}
		})
	}
	raw := []byte("{\"sandbox_id\":\"\xff\xfe\"}")
	if _, err := fx.Service.Tools.CallTool(context.Background(), fx.Owner(), mcpgate.ToolCall{Tool: e2b.ToolGetSandbox, Arguments: raw}); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Errorf("invalid UTF-8 id: err = %v, want invalid", err)
	}
	if n := up.count(); n != 0 {
		t.Errorf("E2B was called %d times: a bad argument reached the upstream", n)
	}
}
