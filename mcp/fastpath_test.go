package mcp

// The differential test of the fast path (fastpath.go): go-sdk is the
// oracle. Every request of a large corpus goes to the same gateway twice,
// once with the fast path and once without it (handler(false), the SDK
// alone), and the two answers must have the same HTTP status, content type
// and JSON-RPC messages (compared as JSON, SSE framing parsed). Cases marked
// fast must also have been answered by the fast path, so that a fast path
// that quietly always falls through fails the test.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

const e2bTestKey = "e2b_0123456789abcdef"

// diffConnector has a tool of each policy kind the fast path must tell
// apart.
type diffConnector struct{ tools []*connectors.Tool }

type diffEchoIn struct {
	Text  string `json:"text" jsonschema:"what to echo"`
	Count int    `json:"count,omitempty" jsonschema:"how many times"`
}

type diffEchoOut struct {
	Text  string         `json:"text"`
	Count int            `json:"count"`
	Extra map[string]any `json:"extra"`
}

func newDiffConnector() *diffConnector {
	echo := func(_ context.Context, _ mcpgate.Secret, in diffEchoIn) (diffEchoOut, error) {
		if in.Text == "fail" {
			return diffEchoOut{}, mcpgate.Errorf(mcpgate.EUpstream, "the upstream said no <&>")
		}
		return diffEchoOut{Text: in.Text, Count: in.Count, Extra: map[string]any{"html": "<b>&</b>", "unicode": "é\u2028✓"}}, nil
	}
	return &diffConnector{tools: []*connectors.Tool{
		connectors.NewTool(connectors.Spec{Name: "diff_echo", Title: "Echo", Description: "Echoes.",
			Annotations: connectors.Annotations{ReadOnly: true, Idempotent: true}, DefaultEnabled: true}, echo),
		connectors.NewTool(connectors.Spec{Name: "diff_write", Title: "Write", Description: "Writes.",
			DefaultEnabled: true}, echo),
		connectors.NewTool(connectors.Spec{Name: "diff_off", Title: "Off", Description: "Off by default.",
			Annotations: connectors.Annotations{ReadOnly: true}}, echo),
		connectors.NewTool(connectors.Spec{Name: "diff_human", Title: "Human", Description: "Needs a person's approval.",
			Annotations: connectors.Annotations{Destructive: true}, DefaultEnabled: true, DefaultApproval: mcpgate.ApprovalHuman}, echo),
		connectors.NewTool(connectors.Spec{Name: "diff_delete", Title: "Delete", Description: "Needs confirmation.",
			Annotations: connectors.Annotations{Destructive: true}, DefaultEnabled: true, DefaultApproval: mcpgate.ApprovalModel}, echo),
	}}
}

func (c *diffConnector) Name() string                                          { return "diff" }
func (c *diffConnector) CheckCredential(context.Context, mcpgate.Secret) error { return nil }
func (c *diffConnector) CredentialHint(mcpgate.Secret) string                  { return "diff_…" }
func (c *diffConnector) Tools() []*connectors.Tool                             { return c.tools }

// diffEnv is a gateway over e2bsim (with a sandbox and injected faults)
// and the diff connector, with a full and a read-only key.
type diffEnv struct {
	fx              *Fixture
	fast, oracle    http.Handler
	full, readOnly  string
	sandbox         string
	fastServedCount func() int64
}

func newDiffEnv(tb testing.TB, keyRate rate.Limit, keyBurst int) *diffEnv {
	tb.Helper()
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	sim := e2bsim.New(e2bsim.Options{Now: now, Seed: 1})
	up := httptest.NewServer(sim)
	tb.Cleanup(up.Close)
	for path, f := range map[string]e2bsim.Fault{
		"/sandboxes/isbx500": {Status: 500, Message: "internal"},
		"/sandboxes/isbx429": {Status: 429, Message: "slow down", RetryAfter: "17"},
		"/sandboxes/isbx401": {Status: 401, Message: "bad key"},
	} {
		f.Path = path
		sim.Inject(f)
	}
	reg := connectors.NewRegistry(e2b.New(e2b.Options{BaseURL: up.URL, DashboardURL: up.URL}), newDiffConnector())
	network := upstream.Network{Private: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	pool := upstream.New[service.UpstreamKey](upstream.Options{Network: network})
	tb.Cleanup(func() { _ = pool.Close() })
	fx := NewFixture(tb, FixtureOptions{Registry: reg, Credential: e2bTestKey, Now: now,
		CallTimeout: 5 * time.Second, KeyRate: keyRate, KeyBurst: keyBurst, Upstreams: pool,
		// The per-person and per-workspace limits would end the corpus's
		// calls long before its last version; the key limit is the one
		// TestFastPath_KeyLimit holds both paths to.
		UserRate: rate.Inf, UserBurst: 1, WorkspaceRate: rate.Inf, WorkspaceBurst: 1})
	addDiffUpstream(tb, fx, reg, pool, network)
	full, _ := fx.AddKey(tb, mcpgate.ScopeFull)
	ro, _ := fx.AddKey(tb, mcpgate.ScopeReadOnly)
	// One sandbox to read.
	req, _ := http.NewRequest(http.MethodPost, up.URL+"/sandboxes", strings.NewReader(`{"templateID":"base","timeout":3600,"metadata":{"app":"diff"}}`))
	req.Header.Set("X-API-Key", e2bTestKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("create sandbox: %v", err)
	}
	var created struct {
		SandboxID string `json:"sandboxID"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if created.SandboxID == "" {
		tb.Fatalf("create sandbox: status %d", resp.StatusCode)
	}
	g := fx.Gateway
	return &diffEnv{fx: fx, fast: g.handler(true), oracle: g.handler(false), full: full, readOnly: ro,
		sandbox: created.SandboxID, fastServedCount: func() int64 { return g.fastServed.n.Load() }}
}

// addDiffUpstream adds to the fixture's workspace an upstream server (go-sdk,
// on loopback) whose tools answer with what a relay must pass on: every
// kind of content, structured content, _meta (its own serverInfo too,
// which the gateway replaces), an error result and a JSON-RPC error. The
// undeclared one needs a person's approval once on, so it stays on the SDK
// path; the others have none.
func addDiffUpstream(tb testing.TB, fx *Fixture, reg *connectors.Registry, pool *upstream.Pool[service.UpstreamKey], network upstream.Network) {
	tb.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "diff-upstream", Version: "v1"}, nil)
	yes := true
	srv.AddTool(&sdk.Tool{Name: "look", Title: "Look", Description: "Looks <&>.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","x-vendor":1}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"}}}`),
		Annotations:  &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &yes}, Meta: sdk.Meta{"vendor/x": "y"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ Q string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			switch in.Q {
			case "rpc":
				return nil, fmt.Errorf("upstream exploded <&>")
			case "error":
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such page"}}}, nil
			case "log":
				// Below info (not sent to a stateless client), at info with
				// an object and the credential echoed, and above with a
				// logger; each path must send the same.
				//lint:ignore SA1019 a server that logs, as the relay must pass on
				for _, m := range []*sdk.LoggingMessageParams{{Level: "debug", Data: "hidden"},
					{Level: "info", Data: json.RawMessage(`{"n":1.50,"z":"<b>","auth":"Bearer diff-upstream-secret"}`)},
					{Level: "warning", Logger: "db", Data: "slow <&>"}} {
					//lint:ignore SA1019 a server that logs, as the relay must pass on
					_ = req.Session.Log(ctx, m)
				}
			}
			return &sdk.CallToolResult{
				Content: []sdk.Content{&sdk.TextContent{Text: "é\u2028✓ " + in.Q}, &sdk.ImageContent{MIMEType: "image/png", Data: []byte("png")},
					&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("wav")},
					&sdk.ResourceLink{URI: "https://example.com/a", Name: "a"},
					&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://r", MIMEType: "text/plain", Text: "r"}}},
				StructuredContent: json.RawMessage(`{"n":1.50,"z":"<b>","a":[]}`),
				Meta:              sdk.Meta{"vendor/trace": "t", sdk.MetaKeyServerInfo: map[string]any{"name": "not-the-gateway"}},
			}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "wipe", Description: "Undeclared hints.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "wiped"}}}, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	tb.Cleanup(hs.Close)
	servers := service.NewServers(service.ServersOptions{DB: fx.DB, Keyring: fx.Keyring, Registry: reg, Pool: pool, Network: network,
		Invalidate: fx.Service.Invalidate})
	ctx := context.Background()
	if _, err := servers.AddServer(ctx, fx.Owner(), mcpgate.ServerInput{Name: "up", URL: hs.URL + "/mcp",
		Headers: map[string]mcpgate.Secret{"Authorization": "Bearer diff-upstream-secret"}}); err != nil {
		tb.Fatalf("AddServer() err = %v", err)
	}
	on := true
	if _, err := servers.SetServerTool(ctx, fx.Owner(), "up", "wipe", mcpgate.ToolUpdate{Enabled: &on}); err != nil {
		tb.Fatalf("SetServerTool() err = %v", err)
	}
}

// answer is one HTTP answer, reduced to what must agree.
type answer struct {
	Status       int
	ContentType  string
	CacheControl string
	Allow        string
	// Messages are the JSON values of the body (SSE data lines, or the
	// whole body), with SSE event names; Text is a body that is not JSON.
	Events   []string
	Messages []any
	Text     string
	// Connection and Frames are the SSE layout: the header, and each
	// event's lines with data replaced by "data", so that an id or retry
	// line, or a different framing, shows.
	Connection string
	Frames     []string
}

// volatile is what differs between two runs of the same call by design:
// confirmation tokens and request states (random nonces), and the ids of
// the approval requests each run opens (UUIDs; the workspace's id, also a
// UUID, is the same on both sides anyway).
var (
	volatile = regexp.MustCompile(`mcpct_[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+`)
	uuids    = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

func reduce(rec *httptest.ResponseRecorder) answer {
	a := answer{Status: rec.Code, ContentType: rec.Header().Get("Content-Type"),
		CacheControl: rec.Header().Get("Cache-Control"), Allow: rec.Header().Get("Allow")}
	body := uuids.ReplaceAllString(volatile.ReplaceAllString(rec.Body.String(), "mcpct_X"), "UUID")
	if strings.HasPrefix(a.ContentType, "text/event-stream") {
		a.Connection = rec.Header().Get("Connection")
		if !strings.HasSuffix(body, "\n\n") {
			a.Frames = append(a.Frames, "unterminated")
		}
		for _, ev := range strings.Split(body, "\n\n") {
			if ev == "" {
				continue
			}
			name := ""
			var frame []string
			for _, line := range strings.Split(ev, "\n") {
				field, _, _ := strings.Cut(line, ":")
				frame = append(frame, field)
				if field != "data" {
					frame[len(frame)-1] = line
				}
				switch {
				case strings.HasPrefix(line, "event: "):
					name = strings.TrimPrefix(line, "event: ")
				case strings.HasPrefix(line, "data: "):
					var v any
					if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &v); err != nil {
						a.Text += "unparsable data: " + line
					}
					a.Messages = append(a.Messages, v)
				}
			}
			a.Events = append(a.Events, name)
			a.Frames = append(a.Frames, strings.Join(frame, "|"))
		}
		// The SDK answers the calls of a batch concurrently, so in any
		// order: compare batches as sets.
		sort.Slice(a.Messages, func(i, j int) bool {
			bi, _ := json.Marshal(a.Messages[i])
			bj, _ := json.Marshal(a.Messages[j])
			return string(bi) < string(bj)
		})
		return a
	}
	var v any
	if json.Unmarshal([]byte(body), &v) == nil {
		a.Messages = []any{v}
	} else {
		a.Text = body
	}
	return a
}

// diffCase is one request of the corpus.
type diffCase struct {
	name    string
	method  string
	headers map[string]string
	body    string
	// fast: 1 the fast path must answer it, -1 it must not, 0 either.
	fast int
}

func (e *diffEnv) do(h http.Handler, c diffCase) answer {
	m := c.method
	if m == "" {
		m = http.MethodPost
	}
	r := httptest.NewRequest(m, "/mcp", strings.NewReader(c.body))
	for k, v := range c.headers {
		if v != "\x00" { // a header set to NUL is left out
			r.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return reduce(rec)
}

// check runs c through both paths and reports any difference.
func (e *diffEnv) check(t testing.TB, c diffCase) {
	t.Helper()
	want := e.do(e.oracle, c)
	before := e.fastServedCount()
	got := e.do(e.fast, c)
	served := e.fastServedCount() > before
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Errorf("%s: fast path answered\n  %s\nthe SDK answered\n  %s\nrequest headers %v body %.300q", c.name, gb, wb, c.headers, c.body)
	}
	switch {
	case c.fast > 0 && !served:
		t.Errorf("%s: the fast path did not answer it (SDK answer %d %v)", c.name, want.Status, want.Messages)
	case c.fast < 0 && served:
		t.Errorf("%s: the fast path answered it; it must fall through to the SDK", c.name)
	}
}

const (
	capsMeta = `"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}`
	infoMeta = `"io.modelcontextprotocol/clientInfo":{"name":"diff","version":"v1"}`
	pvMeta   = `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
)

// diffVersions are the SDK's protocol versions (so that one it adds is in
// the corpus), no header, and two it does not speak.
var diffVersions = append(sdk.SupportedProtocolVersions(), "", "2099-01-01", "garbage")

// capabilityKeys are the client capabilities a _meta may carry: the fields
// of the SDK's exported type, so that one it adds is tried too, and roots,
// which its unexported decoding type adds.
func capabilityKeys() []string {
	keys := []string{"roots"}
	typ := reflect.TypeFor[sdk.ClientCapabilities]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" && !slices.Contains(keys, name) {
			keys = append(keys, name)
		}
	}
	return keys
}

// corpus builds the cases: every protocol version with the headers and
// _meta that go with it, then variations of envelope, params, tools,
// scopes and upstream outcomes.
func (e *diffEnv) corpus() []diffCase {
	var cases []diffCase
	headers := func(key, version, method, name string) map[string]string {
		h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream"}
		if version != "" {
			h["Mcp-Protocol-Version"] = version
		}
		if version >= newProtocol {
			h["Mcp-Method"] = method
			if name != "" {
				h["Mcp-Name"] = name
			}
		}
		return h
	}
	meta := func(version string) string {
		if version >= newProtocol {
			return `,"_meta":{` + pvMeta + `,` + capsMeta + `,` + infoMeta + `}`
		}
		return ""
	}
	call := func(id, tool, args, version string) string {
		a := ""
		if args != "" {
			a = `,"arguments":` + args
		}
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `"` + a + meta(version) + `}}`
	}
	sbx := `{"sandbox_id":"` + e.sandbox + `"}`
	type toolCase struct {
		name, tool, args string
		key              string
		fast             int
	}
	tools := []toolCase{
		{"echo", "diff_echo", `{"text":"hi","count":2}`, e.full, 1},
		{"echo defaults", "diff_echo", `{"text":"hi"}`, e.full, 1},
		{"echo read-only key", "diff_echo", `{"text":"hi"}`, e.readOnly, 1},
		{"echo upstream error", "diff_echo", `{"text":"fail"}`, e.full, 1},
		{"echo missing required", "diff_echo", `{}`, e.full, 1},
		{"echo no arguments", "diff_echo", ``, e.full, 1},
		{"echo null arguments", "diff_echo", `null`, e.full, 1},
		{"echo arguments array", "diff_echo", `[1,2]`, e.full, 1},
		{"echo arguments string", "diff_echo", `"x"`, e.full, 1},
		{"echo unknown argument", "diff_echo", `{"text":"a","bogus":1}`, e.full, 1},
		{"echo wrong type", "diff_echo", `{"text":5}`, e.full, 1},
		{"echo float count", "diff_echo", `{"text":"a","count":1.5}`, e.full, 1},
		{"echo big count", "diff_echo", `{"text":"a","count":123456789012345678901234567890}`, e.full, 1},
		{"echo html and unicode", "diff_echo", `{"text":"<script>&amp;\u00e9\ud83d\ude00"}`, e.full, 1},
		{"echo whitespace", "diff_echo", "{ \"text\" :\n\t\"hi\" }", e.full, 1},
		{"echo duplicate argument", "diff_echo", `{"text":"a","text":"b"}`, e.full, 0},
		{"echo confirmation_token", "diff_echo", `{"text":"a","confirmation_token":"mcpc_x.y"}`, e.full, -1},
		{"write full key", "diff_write", `{"text":"w"}`, e.full, 1},
		{"write read-only key", "diff_write", `{"text":"w"}`, e.readOnly, -1},
		{"disabled tool", "diff_off", `{"text":"w"}`, e.full, -1},
		{"needs confirmation", "diff_delete", `{"text":"d"}`, e.full, -1},
		{"needs confirmation with token", "diff_delete", `{"text":"d","confirmation_token":"mcpc_bad.token"}`, e.full, -1},
		{"needs a person's approval", "diff_human", `{"text":"h"}`, e.full, -1},
		{"approval_id", "diff_human", `{"text":"h","approval_id":"apr_nothere"}`, e.full, -1},
		{"approval_id on a fast tool", "diff_echo", `{"text":"h","approval_id":"apr_nothere"}`, e.full, -1},
		// Only the gateway's own arguments leave the fast path, not a value
		// that mentions them.
		{"value mentioning approval", "diff_echo", `{"text":"needs approval first"}`, e.full, 1},
		{"value that is approval_id", "diff_echo", `{"text":"approval_id"}`, e.full, 1},
		{"value mentioning confirmation_token", "diff_echo", `{"text":"no confirmation_token here"}`, e.full, 1},
		{"nested approval_id", "diff_echo", `{"text":"a","count":1,"x":{"approval_id":"apr_1"}}`, e.full, 1},
		{"escaped approval_id key", "diff_echo", `{"text":"h","approval\u005fid":"apr_nothere"}`, e.full, 0},
		{"approval_id in an array", "diff_echo", `["approval_id"]`, e.full, -1},
		{"approval_id null", "diff_echo", `{"text":"h","approval_id":null}`, e.full, -1},
		{"unknown tool", "no_such_tool", `{}`, e.full, -1},
		{"empty tool name", "", `{}`, e.full, -1},
		{"e2b get sandbox", "e2b_get_sandbox", sbx, e.full, 1},
		{"e2b list sandboxes", "e2b_list_sandboxes", `{}`, e.full, 1},
		{"e2b list templates", "e2b_list_templates", `{}`, e.full, 0},
		{"e2b sandbox not found", "e2b_get_sandbox", `{"sandbox_id":"inothere"}`, e.full, 1},
		{"e2b 500", "e2b_get_sandbox", `{"sandbox_id":"isbx500"}`, e.full, 1},
		{"e2b 429", "e2b_get_sandbox", `{"sandbox_id":"isbx429"}`, e.full, 1},
		{"e2b 401", "e2b_get_sandbox", `{"sandbox_id":"isbx401"}`, e.full, 1},
		{"e2b bad sandbox id", "e2b_get_sandbox", `{"sandbox_id":"../x"}`, e.full, 1},
		{"e2b kill read-only key", "e2b_kill_sandbox", sbx, e.readOnly, -1},
		{"upstream look", "up_look", `{"q":"x"}`, e.full, 1},
		{"upstream look read-only key", "up_look", `{"q":"x"}`, e.readOnly, 1},
		{"upstream look no arguments", "up_look", ``, e.full, 1},
		{"upstream look arguments array", "up_look", `[1]`, e.full, 1},
		{"upstream error result", "up_look", `{"q":"error"}`, e.full, 1},
		{"upstream logs", "up_look", `{"q":"log"}`, e.full, 1},
		{"upstream JSON-RPC error", "up_look", `{"q":"rpc"}`, e.full, 1},
		{"upstream approval_id", "up_look", `{"q":"x","approval_id":"apr_x"}`, e.full, -1},
		{"upstream needs a person", "up_wipe", `{}`, e.full, -1},
		{"upstream needs a person, read-only key", "up_wipe", `{}`, e.readOnly, -1},
	}
	for _, v := range diffVersions {
		known := v == "" || legacyVersions[v] || v == newProtocol
		want := func(f int) int {
			if !known && f > 0 {
				return -1
			}
			return f
		}
		for _, tc := range tools {
			fast := want(tc.fast)
			if upstream := strings.HasPrefix(tc.tool, "up_"); upstream && v == newProtocol {
				// A caller declaring requests it answers (the corpus's
				// elicitation) has its upstream calls held, on the SDK
				// path (heldcall.go); one declaring none is the fast path's.
				none := strings.Replace(call(`7`, tc.tool, tc.args, v), capsMeta, `"io.modelcontextprotocol/clientCapabilities":{}`, 1)
				cases = append(cases, diffCase{name: fmt.Sprintf("%s, no client capabilities %q", tc.name, v),
					headers: headers(tc.key, v, "tools/call", tc.tool), body: none, fast: fast})
				if fast > 0 {
					fast = -1
				}
			}
			cases = append(cases, diffCase{name: fmt.Sprintf("%s %q", tc.name, v),
				headers: headers(tc.key, v, "tools/call", tc.tool), body: call(`7`, tc.tool, tc.args, v), fast: fast})
		}
		list := `{"jsonrpc":"2.0","id":"l1","method":"tools/list","params":{` + strings.TrimPrefix(meta(v), ",") + `}}`
		cases = append(cases,
			diffCase{name: fmt.Sprintf("tools/list full %q", v), headers: headers(e.full, v, "tools/list", ""), body: list, fast: want(1)},
			diffCase{name: fmt.Sprintf("tools/list read-only %q", v), headers: headers(e.readOnly, v, "tools/list", ""), body: list, fast: want(1)},
			diffCase{name: fmt.Sprintf("tools/list cursor %q", v), headers: headers(e.full, v, "tools/list", ""),
				body: `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"abc"` + meta(v) + `}}`, fast: -1},
		)
		// ids of every JSON type.
		for _, id := range []string{`0`, `-3`, `42`, `999999999999999`, `9007199254740993`, `1.5`, `1e3`, `-0`, `"s"`, `""`,
			`"\u0041\n"`, `"✓"`, `null`, `true`, `{}`, `[]`, `[1]`} {
			f := 0
			if id == `42` || id == `"s"` || id == `""` || id == `0` {
				f = want(1)
			}
			if id == `null` || id == `true` || id == `{}` || id == `[]` || id == `1.5` {
				f = -1
			}
			cases = append(cases, diffCase{name: fmt.Sprintf("id %s %q", id, v), headers: headers(e.full, v, "tools/call", "diff_echo"),
				body: call(id, "diff_echo", `{"text":"i"}`, v), fast: f})
			cases = append(cases, diffCase{name: fmt.Sprintf("list id %s %q", id, v), headers: headers(e.full, v, "tools/list", ""),
				body: `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"` + strings.Replace(meta(v), `,"_meta"`, `,"params":{"_meta"`, 1) + func() string {
					if meta(v) != "" {
						return "}"
					}
					return ""
				}() + `}`})
		}
		// Everything else goes to the SDK.
		good := call(`1`, "diff_echo", `{"text":"x"}`, v)
		for _, o := range []diffCase{
			{name: "initialize", body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, fast: -1},
			{name: "server/discover", body: `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + strings.TrimPrefix(meta(v), ",") + `}}`, fast: -1},
			{name: "ping", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, fast: -1},
			{name: "prompts/list", body: `{"jsonrpc":"2.0","id":1,"method":"prompts/list","params":{` + strings.TrimPrefix(meta(v), ",") + `}}`, fast: -1},
			{name: "notification initialized", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, fast: -1},
			{name: "notification cancelled", body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, fast: -1},
			{name: "tools/call as notification", body: `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"diff_echo","arguments":{"text":"x"}}}`, fast: -1},
			{name: "batch of one", body: `[` + good + `]`, fast: -1},
			{name: "batch of two", body: `[` + good + `,` + strings.Replace(good, `"id":1`, `"id":2`, 1) + `]`, fast: -1},
			{name: "batch with notification", body: `[` + good + `,{"jsonrpc":"2.0","method":"notifications/initialized"}]`, fast: -1},
			{name: "empty batch", body: `[]`, fast: -1},
			{name: "empty body", body: ``, fast: -1},
			{name: "whitespace body", body: "  \n", fast: -1},
			{name: "not json", body: `hello`, fast: -1},
			{name: "truncated", body: good[:len(good)-3], fast: -1},
			{name: "trailing garbage", body: good + `xyz`, fast: -1},
			{name: "two objects", body: good + good, fast: -1},
			{name: "trailing whitespace", body: good + " \n", fast: want(1)},
			{name: "leading whitespace", body: "\n\t " + good, fast: want(1)},
			{name: "BOM", body: "\ufeff" + good, fast: -1},
			{name: "no jsonrpc", body: strings.Replace(good, `"jsonrpc":"2.0",`, ``, 1), fast: -1},
			{name: "jsonrpc 1.0", body: strings.Replace(good, `"2.0"`, `"1.0"`, 1), fast: -1},
			{name: "jsonrpc number", body: strings.Replace(good, `"2.0"`, `2.0`, 1), fast: -1},
			{name: "extra member", body: strings.Replace(good, `"jsonrpc"`, `"x":1,"jsonrpc"`, 1), fast: -1},
			{name: "Method capitalised", body: strings.Replace(good, `"method"`, `"Method"`, 1), fast: -1},
			{name: "duplicate method", body: strings.Replace(good, `"method"`, `"method":"ping","method"`, 1), fast: -1},
			{name: "escaped method", body: strings.Replace(good, `"tools/call"`, `"tools\/call"`, 1), fast: -1},
			{name: "escaped tool name", body: strings.Replace(good, `"diff_echo"`, `"diff\u005fecho"`, 1), fast: -1},
			{name: "method number", body: strings.Replace(good, `"tools/call"`, `5`, 1), fast: -1},
			{name: "unknown method", body: strings.Replace(good, `"tools/call"`, `"tools/bogus"`, 1), fast: -1},
			{name: "params null", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`, fast: -1},
			{name: "params array", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, fast: -1},
			{name: "params missing", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, fast: -1},
			{name: "params empty", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, fast: -1},
			{name: "name number", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`, fast: -1},
			{name: "params extra member", body: strings.Replace(good, `"name"`, `"task":{},"name"`, 1), fast: -1},
			{name: "requestState", body: strings.Replace(good, `"name"`, `"requestState":"x","name"`, 1), fast: -1},
			{name: "inputResponses", body: strings.Replace(good, `"name"`, `"inputResponses":{"confirm":{"action":"accept"}},"name"`, 1), fast: -1},
			{name: "result message", body: `{"jsonrpc":"2.0","id":1,"result":{}}`, fast: -1},
			{name: "invalid UTF-8 in arguments", body: strings.Replace(good, `"x"`, "\"\xff\xfe\"", 1), fast: -1},
			{name: "invalid UTF-8 in id", body: strings.Replace(good, `"id":1`, "\"id\":\"\xc3\x28\"", 1), fast: -1},
			{name: "lone surrogate", body: strings.Replace(good, `"x"`, `"\ud800"`, 1), fast: -1},
			{name: "NUL in string", body: strings.Replace(good, `"x"`, `"a\u0000b"`, 1), fast: want(1)},
			{name: "deep 999", body: strings.Replace(good, `"x"}`, `"x","extra":`+strings.Repeat("[", 990)+strings.Repeat("]", 990)+`}`, 1), fast: want(1)},
			{name: "deep 1001", body: strings.Replace(good, `"x"}`, `"x","extra":`+strings.Repeat("[", 1001)+strings.Repeat("]", 1001)+`}`, 1), fast: -1},
			{name: "deep 20000", body: strings.Replace(good, `"x"}`, `"x","extra":`+strings.Repeat("[", 20000)+strings.Repeat("]", 20000)+`}`, 1), fast: -1},
			{name: "brackets in strings", body: strings.Replace(good, `"x"`, `"`+strings.Repeat("[{", 1200)+`"`, 1), fast: want(1)},
			{name: "big argument", body: strings.Replace(good, `"x"`, `"`+strings.Repeat("a", 200_000)+`"`, 1), fast: want(1)},
			{name: "oversized body", body: strings.Replace(good, `"x"`, `"`+strings.Repeat("a", 1<<20)+`"`, 1), fast: -1},
			{name: "body exactly at the limit", body: strings.Replace(good, `"x"`, `"`+strings.Repeat("a", (1<<20)-len(good)+1)+`"`, 1), fast: want(1)},
		} {
			o.name = fmt.Sprintf("%s %q", o.name, v)
			method := "tools/call"
			name := "diff_echo"
			if i := strings.Index(o.body, `"method":"`); i >= 0 {
				rest := o.body[i+len(`"method":"`):]
				method = rest[:strings.IndexByte(rest, '"')]
				if method != "tools/call" {
					name = ""
				}
			}
			o.headers = headers(e.full, v, method, name)
			if o.fast > 0 && !known {
				o.fast = -1
			}
			cases = append(cases, o)
		}
		// HTTP-level variations of a good call.
		for _, hv := range []struct {
			name, header, value string
			fast                int
		}{
			{"no Accept", "Accept", "\x00", -1},
			{"Accept json only", "Accept", "application/json", -1},
			{"Accept stream only", "Accept", "text/event-stream", -1},
			{"Accept */*", "Accept", "*/*", want(1)},
			{"Accept with q", "Accept", "application/json;q=0.9, text/event-stream;q=1", want(1)},
			{"Accept wildcards", "Accept", "application/*, text/*", want(1)},
			{"no Content-Type", "Content-Type", "\x00", -1},
			{"Content-Type text", "Content-Type", "text/plain", -1},
			{"Content-Type charset", "Content-Type", "application/json; charset=utf-8", -1},
			{"Content-Type upper", "Content-Type", "Application/JSON", -1},
			{"Last-Event-ID", "Last-Event-ID", "x_1", -1},
			{"Mcp-Method missing", "Mcp-Method", "\x00", 0},
			{"Mcp-Method wrong", "Mcp-Method", "tools/list", 0},
			{"Mcp-Name missing", "Mcp-Name", "\x00", 0},
			{"Mcp-Name wrong", "Mcp-Name", "diff_write", 0},
			{"Mcp-Session-Id", "Mcp-Session-Id", "abc", 0},
		} {
			h := headers(e.full, v, "tools/call", "diff_echo")
			h[hv.header] = hv.value
			cases = append(cases, diffCase{name: fmt.Sprintf("%s %q", hv.name, v), headers: h, body: good, fast: hv.fast})
		}
		// A GET that accepts an event stream is the standalone stream,
		// held open on both paths (listen_test.go holds it to go-sdk's).
		for _, m := range []string{http.MethodDelete, http.MethodPut} {
			cases = append(cases, diffCase{name: fmt.Sprintf("%s %q", m, v), method: m,
				headers: headers(e.full, v, "tools/call", "diff_echo"), body: good, fast: -1})
		}
		// _meta variations.
		type metaCase struct{ name, meta string }
		metas := []metaCase{
			{"no _meta", ``},
			{"_meta empty", `,"_meta":{}`},
			{"_meta without capabilities", `,"_meta":{` + pvMeta + `}`},
			{"_meta capabilities null", `,"_meta":{` + pvMeta + `,"io.modelcontextprotocol/clientCapabilities":null}`},
			{"_meta capabilities string", `,"_meta":{` + pvMeta + `,"io.modelcontextprotocol/clientCapabilities":"x"}`},
			{"_meta capabilities bad field", `,"_meta":{` + pvMeta + `,"io.modelcontextprotocol/clientCapabilities":{"elicitation":5}}`},
			{"_meta capabilities empty", `,"_meta":{` + pvMeta + `,"io.modelcontextprotocol/clientCapabilities":{}}`},
			{"_meta clientInfo bad", `,"_meta":{` + pvMeta + `,` + capsMeta + `,"io.modelcontextprotocol/clientInfo":5}`},
			{"_meta old version", `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25",` + capsMeta + `}`},
			{"_meta future version", `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01",` + capsMeta + `}`},
			{"_meta version number", `,"_meta":{"io.modelcontextprotocol/protocolVersion":5,` + capsMeta + `}`},
			{"_meta log level", `,"_meta":{` + pvMeta + `,` + capsMeta + `,"io.modelcontextprotocol/logLevel":"debug"}`},
			{"_meta progress token", `,"_meta":{` + pvMeta + `,` + capsMeta + `,"progressToken":"p1"}`},
			{"_meta only progress token", `,"_meta":{"progressToken":"p1"}`},
			{"_meta null", `,"_meta":null`},
			{"_meta duplicate key", `,"_meta":{` + pvMeta + `,` + pvMeta + `,` + capsMeta + `}`},
		}
		// Each capability the SDK decodes, well and badly typed.
		for _, k := range capabilityKeys() {
			for _, val := range []string{`{}`, `5`, `"x"`, `[]`, `null`, `{"listChanged":"no"}`} {
				metas = append(metas, metaCase{"_meta capability " + k + " " + val,
					`,"_meta":{` + pvMeta + `,"io.modelcontextprotocol/clientCapabilities":{"` + k + `":` + val + `}}`})
			}
		}
		for _, mv := range metas {
			body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"diff_echo","arguments":{"text":"m"}` + mv.meta + `}}`
			f := 0
			if v == newProtocol && mv.name == "_meta capabilities empty" {
				f = 1
			}
			cases = append(cases, diffCase{name: fmt.Sprintf("%s %q", mv.name, v),
				headers: headers(e.full, v, "tools/call", "diff_echo"), body: body, fast: f})
		}
	}
	// Credentials: refused before either path.
	for _, k := range []string{"", "mcpg_bogus"} {
		h := headers(k, "2025-11-25", "tools/call", "diff_echo")
		if k == "" {
			h["Authorization"] = "\x00"
		}
		cases = append(cases, diffCase{name: "credential " + k, headers: h, body: call(`1`, "diff_echo", `{"text":"x"}`, ""), fast: -1})
	}
	return cases
}

// TestFastPath_MatchesSDK is the differential test over the corpus.
func TestFastPath_MatchesSDK(t *testing.T) {
	e := newDiffEnv(t, rate.Inf, 1)
	cases := e.corpus()
	if len(cases) < 1000 {
		t.Fatalf("corpus has %d cases, want at least 1000", len(cases))
	}
	fastCases := 0
	for _, c := range cases {
		e.check(t, c)
		if c.fast > 0 {
			fastCases++
		}
	}
	t.Logf("%d cases, %d of them required on the fast path; the fast path answered %d requests", len(cases), fastCases, e.fastServedCount())
}

// TestFastPath_KeyLimit: the per-key limit counts tool calls, on both paths
// alike, and not lists or notifications.
func TestFastPath_KeyLimit(t *testing.T) {
	e := newDiffEnv(t, rate.Every(time.Hour), 1)
	h := map[string]string{"Authorization": "Bearer " + e.full, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"}
	call := diffCase{name: "call", headers: h, body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"diff_echo","arguments":{"text":"x"}}}`}
	for i := 0; i < 5; i++ { // lists and notifications take no token
		for _, c := range []diffCase{
			{headers: h, body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
			{headers: h, body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		} {
			if a := e.do(e.fast, c); a.Status != http.StatusOK && a.Status != http.StatusAccepted {
				t.Fatalf("%s answered %d: %v", c.body, a.Status, a.Messages)
			}
		}
	}
	if first := e.do(e.fast, call); first.Status != 200 || strings.Contains(fmt.Sprint(first.Messages), "isError") {
		t.Fatalf("first call: %+v", first)
	}
	limited := e.do(e.fast, call)
	if want := e.do(e.oracle, call); !reflect.DeepEqual(limited, want) {
		t.Errorf("limited call: fast %+v, SDK %+v", limited, want)
	}
	if !strings.Contains(fmt.Sprint(limited.Messages), "too many tool calls") || !strings.Contains(fmt.Sprint(limited.Messages), "retryAfterSeconds") {
		t.Errorf("limited call answered %v, want a tool error with retryAfterSeconds", limited.Messages)
	}
}

// FuzzFastPath sends random bodies and header choices through both paths;
// they must agree.
func FuzzFastPath(f *testing.F) {
	e := newDiffEnv(f, rate.Inf, 1)
	for i, c := range e.corpus() {
		if i%7 == 0 && len(c.body) < 4096 {
			f.Add(c.body, c.headers["Mcp-Protocol-Version"], c.headers["Mcp-Method"], c.headers["Mcp-Name"], false)
		}
	}
	f.Fuzz(func(t *testing.T, body, version, method, name string, readOnly bool) {
		key := e.full
		if readOnly {
			key = e.readOnly
		}
		h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream"}
		for k, v := range map[string]string{"Mcp-Protocol-Version": version, "Mcp-Method": method, "Mcp-Name": name} {
			if v != "" && validHeaderValue(v) {
				h[k] = v
			}
		}
		e.check(t, diffCase{name: "fuzz", headers: h, body: body})
	})
}

func validHeaderValue(v string) bool {
	for _, c := range []byte(v) {
		if c < ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// TestFastPath_OwnArgumentsExactly: a call whose argument value mentions
// approval takes the fast path; one with the approval_id argument does not
// (before, any argument text containing "approval" fell through).
func TestFastPath_OwnArgumentsExactly(t *testing.T) {
	e := newDiffEnv(t, rate.Inf, 1)
	h := map[string]string{"Authorization": "Bearer " + e.full, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"}
	for _, c := range []struct {
		args string
		fast bool
	}{
		{`{"text":"waiting for approval"}`, true},
		{`{"text":"approval_id"}`, true},
		{`{"text":"confirmation_token"}`, true},
		{`{"text":"x","approval_id":"apr_1"}`, false},
		{`{"text":"x","confirmation_token":"mcpc_a.b"}`, false},
	} {
		before := e.fastServedCount()
		e.do(e.fast, diffCase{headers: h, body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"diff_echo","arguments":` + c.args + `}}`})
		if served := e.fastServedCount() > before; served != c.fast {
			t.Errorf("arguments %s: fast path answered = %v, want %v", c.args, served, c.fast)
		}
	}
}

// TestHasOwnArg_AgreesWithSplitArg: the fast path leaves exactly the calls
// in which callTool's splitArg finds something to do.
func TestHasOwnArg_AgreesWithSplitArg(t *testing.T) {
	for _, raw := range []string{``, `null`, `{}`, `{"a":1}`, `{"text":"approval_id"}`, `{"approval_id":"x"}`,
		`{"approval_id":null}`, `{"approval_id":5}`, `{"x":{"approval_id":"y"}}`, `["approval_id"]`, `"approval_id"`,
		`{"approval\u005fid":"x"}`, `{"approval_id":"x","approval_id":"y"}`, `{"approval_idx":"y"}`, `{bad approval_id`} {
		out, tok, err := splitArg(json.RawMessage(raw), approvalArg)
		acts := err != nil || tok != "" || string(out) != raw
		if got := hasOwnArg(json.RawMessage(raw), approvalArg); got != acts {
			t.Errorf("hasOwnArg(%s) = %v; splitArg acts: %v (%s, %q, %v)", raw, got, acts, out, tok, err)
		}
	}
}

// TestReadBody_Replay: a body the fast path leaves reaches the SDK whole,
// including past the limit and after a read error.
func TestReadBody_Replay(t *testing.T) {
	big := bytes.Repeat([]byte("a"), maxBody+10)
	b, err := readBody(bytes.NewReader(big), nil)
	if err != nil || len(b) != maxBody+1 {
		t.Fatalf("readBody() = %d bytes, %v; want %d", len(b), err, maxBody+1)
	}
	rest := io.NopCloser(bytes.NewReader(big[len(b):]))
	all, _ := io.ReadAll(replay(b, rest, nil))
	if !bytes.Equal(all, big) {
		t.Errorf("replay gave %d bytes, want %d", len(all), len(big))
	}
	boom := io.ErrUnexpectedEOF
	_, err = io.ReadAll(replay([]byte("ab"), rest, boom))
	if err != boom {
		t.Errorf("replay after an error: err = %v, want %v", err, boom)
	}
}

// TestAppendRelayed_UpstreamBytes: on the protocols before 2026-07-28 the
// fast path writes the upstream's own bytes (compacted) when they mean
// what the SDK path would send, and the SDK path's encoding otherwise; on
// 2026-07-28 the gateway's resultType and serverInfo are added, the
// upstream's serverInfo replaced.
func TestAppendRelayed_UpstreamBytes(t *testing.T) {
	const raw = "{\"structuredContent\": {\"n\":1.50,\"z\":\"\\u003cb\\u003e\"},\n \"content\":[{\"text\":\"a\",\"type\":\"text\"}]}"
	got := string(appendRelayed(nil, json.RawMessage(raw), false, nil))
	if want := `{"structuredContent":{"n":1.50,"z":"\u003cb\u003e"},"content":[{"text":"a","type":"text"}]}}`; got != want {
		t.Errorf("legacy relay = %s, want the upstream's bytes compacted %s", got, want)
	}
	// A member the SDK's types do not hold: the SDK path drops it, so does
	// the fast path.
	got = string(appendRelayed(nil, json.RawMessage(`{"content":[],"x-extra":1}`), false, nil))
	if strings.Contains(got, "x-extra") {
		t.Errorf("legacy relay = %s, want what the SDK path sends (no x-extra)", got)
	}
	info := []byte(`{"name":"mcpgate","version":"test"}`)
	got = string(appendRelayed(nil, json.RawMessage(`{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"},"k":"v"}}`), true, info))
	var res map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSuffix(got, "}")), &res); err != nil {
		t.Fatalf("new relay = %s: %v", got, err)
	}
	meta, _ := res["_meta"].(map[string]any)
	if res["resultType"] != "complete" || meta["k"] != "v" || meta[sdk.MetaKeyServerInfo].(map[string]any)["name"] != "mcpgate" {
		t.Errorf("new relay = %s, want resultType, the upstream's _meta and the gateway's serverInfo", got)
	}
}

// TestFastPath_RelaysUpstreamLogs: an upstream's log messages during a
// call reach a stateless legacy caller on the call's stream, before the
// result, alike on both paths: info and above (go-sdk's level for a
// stateless session), the data as the upstream sent it, the upstream's
// credential replaced.
func TestFastPath_RelaysUpstreamLogs(t *testing.T) {
	e := newDiffEnv(t, rate.Inf, 1)
	h := map[string]string{"Authorization": "Bearer " + e.full, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"}
	c := diffCase{name: "logs", headers: h, body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up_look","arguments":{"q":"log"}}}`}
	want := []string{ // in reduce's order
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"slow <&>","level":"warning","logger":"db"}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":{"auth":"[redacted]","n":1.5,"z":"<b>"},"level":"info"}}`,
	}
	var wantLogs []any
	for _, w := range want {
		var v any
		_ = json.Unmarshal([]byte(w), &v)
		wantLogs = append(wantLogs, v)
	}
	for name, hd := range map[string]http.Handler{"fast": e.fast, "sdk": e.oracle} {
		a := e.do(hd, c)
		var logs []any
		results := 0
		for _, m := range a.Messages {
			if obj, _ := m.(map[string]any); obj["method"] == "notifications/message" {
				logs = append(logs, m)
			} else if obj["result"] != nil {
				results++
			}
		}
		if !reflect.DeepEqual(logs, wantLogs) || results != 1 {
			t.Errorf("%s: log messages %v and %d results, want %v and the result", name, logs, results, wantLogs)
		}
	}
}
