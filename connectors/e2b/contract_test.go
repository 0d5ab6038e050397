package e2b_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

// The contract tests hold the connector and e2bsim to E2B's own behaviour,
// each on its own: the encoder of the official SDK and the decoder of E2B's
// server are ported here from their sources, so that a mistake the connector
// and the simulator share (as the two-level metadata encoding was) cannot
// pass. Sources: e2b-dev/E2B at b8029973, e2b-dev/infra at 54693ff (and its
// newer v2 connect handler tests), and the JS SDK e2b 2.51.0 as npm serves it.

// metadataCases are filters whose values break any encoding with a level
// missing: "+" (a space after one unescape too many), "&", "=", "%", spaces,
// non-ASCII and the characters encodeURIComponent leaves alone.
var metadataCases = []map[string]string{
	{"tag": "c++"},
	{"user": "a b", "app": "prod"},
	{"q": "x&y=z"},
	{"discount": "100%"},
	{"name": "ünïcødé ✓"},
	{"mixed": "a+b%20c"},
	{"path": "/srv/app?x=1#y"},
	{"sdk-safe": "*'()!~._-"},
	{"k=1&k2": "v"},
}

// encodeURIComponent is JavaScript's: every byte of the UTF-8 form is
// percent-encoded except A-Z a-z 0-9 - _ . ! ~ * ' ( ).
func encodeURIComponent(s string) string {
	return percentEncode(s, "-_.!~*'()", false)
}

// formEncode is the WHATWG application/x-www-form-urlencoded byte serializer
// (URLSearchParams.toString): everything but A-Z a-z 0-9 * - . _ is
// percent-encoded, and a space becomes "+".
func formEncode(s string) string {
	return percentEncode(s, "*-._", true)
}

// pythonQuote is Python's urllib.parse.quote with its default safe="/".
func pythonQuote(s string) string { return percentEncode(s, "_.-~/", false) }

// pythonQuotePlus is urllib.parse.quote_plus (used by urlencode): safe is
// empty and a space becomes "+".
func pythonQuotePlus(s string) string { return percentEncode(s, "_.-~", true) }

func percentEncode(s, safe string, spacePlus bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte(safe, c) >= 0:
			b.WriteByte(c)
		case c == ' ' && spacePlus:
			b.WriteByte('+')
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// sortedPairs joins encoded pairs with = and &. URLSearchParams keeps
// insertion order; Go maps have none, so the pairs are sorted: the server does
// not care about order.
func sortedPairs(m map[string]string, enc func(string) string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, enc(k)+"="+enc(m[k]))
	}
	return strings.Join(parts, "&")
}

// jsSDKQuery is the raw query the JS SDK sends for a metadata filter
// (packages/js-sdk/src/sandbox/sandboxApi.ts, SandboxPaginator.nextItems):
// encodeURIComponent on each key and value, new URLSearchParams(...)
// .toString(), and openapi-fetch's query serializer, which applies
// encodeURIComponent to the value once more.
func jsSDKQuery(m map[string]string) string {
	encoded := map[string]string{}
	for k, v := range m {
		encoded[encodeURIComponent(k)] = encodeURIComponent(v)
	}
	return "metadata=" + encodeURIComponent(sortedPairs(encoded, formEncode))
}

// pythonSDKQuery is what the Python SDK sends
// (packages/python-sdk/e2b/sandbox_sync/paginator.py): quote on each key and
// value, urllib.parse.urlencode, and the HTTP client's own escaping of the
// query value (any correct percent-encoding; encodeURIComponent here).
func pythonSDKQuery(m map[string]string) string {
	quoted := map[string]string{}
	for k, v := range m {
		quoted[pythonQuote(k)] = pythonQuote(v)
	}
	return "metadata=" + encodeURIComponent(sortedPairs(quoted, pythonQuotePlus))
}

// serverDecode is E2B's reading of a raw query's metadata filter: the
// framework's query parsing (gin uses net/url), then parseFilters
// (infra packages/api/internal/utils/sandboxes_list.go): unescape the whole
// value, split on & and on = (exactly two parts), unescape each part.
func serverDecode(rawQuery string) (map[string]string, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, err
	}
	value, err := url.QueryUnescape(q.Get("metadata"))
	if err != nil {
		return nil, fmt.Errorf("error when unescaping query: %w", err)
	}
	out := map[string]string{}
	for _, filter := range strings.Split(value, "&") {
		parts := strings.Split(filter, "=")
		if len(parts) != 2 {
			return nil, fmt.Errorf("invalid key value pair in query")
		}
		k, err := url.QueryUnescape(parts[0])
		if err != nil {
			return nil, err
		}
		v, err := url.QueryUnescape(parts[1])
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// TestContract_ported checks the ports against each other on the cases, so a
// broken port fails here rather than excusing a broken connector.
func TestContract_ported(t *testing.T) {
	for _, m := range metadataCases {
		for name, q := range map[string]string{"js": jsSDKQuery(m), "python": pythonSDKQuery(m)} {
			got, err := serverDecode(q)
			if err != nil || !maps.Equal(got, m) {
				t.Errorf("%s SDK %q: server reads %v, %v; want %v", name, q, got, err, m)
			}
		}
	}
	// The known two-level mistake really is one: "+" comes back as a space.
	two := url.Values{"metadata": {url.Values{"tag": {"c++"}}.Encode()}}.Encode()
	if got, _ := serverDecode(two); got["tag"] != "c  " {
		t.Errorf("two-level encoding read as %q, want the server to turn it into %q", got["tag"], "c  ")
	}
}

// TestContract_connectorEncoding holds the connector's metadata filter to
// E2B's server decoding, with no simulator involved.
func TestContract_connectorEncoding(t *testing.T) {
	var raw string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw = r.URL.RawQuery
		w.Write([]byte(`[]`))
	}))
	defer srv.Close()
	c := e2b.NewClient(e2b.Options{BaseURL: srv.URL, HTTPClient: srv.Client()})
	for _, m := range metadataCases {
		if _, err := c.ListSandboxes(context.Background(), testKey, e2b.ListSandboxesParams{Metadata: m}); err != nil {
			t.Fatal(err)
		}
		if got, err := serverDecode(raw); err != nil || !maps.Equal(got, m) {
			t.Errorf("metadata %v sent as %q: E2B reads %v, %v", m, raw, got, err)
		}
	}
}

// TestContract_simulatorDecoding holds e2bsim to the SDKs' encoding, with no
// connector involved: a filter sent exactly as the SDKs send it finds the
// sandbox, and the two-level mistake does not.
func TestContract_simulatorDecoding(t *testing.T) {
	clock := e2bsim.NewManualClock(epoch)
	srv := httptest.NewServer(e2bsim.New(e2bsim.Options{Now: clock.Now, MaxRunning: 100}))
	defer srv.Close()
	list := func(rawQuery string) (ids []string, status int) {
		resp := do(t, http.MethodGet, srv.URL+"/v2/sandboxes?"+rawQuery, testKey, "")
		var out []struct {
			SandboxID string `json:"sandboxID"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		for _, s := range out {
			ids = append(ids, s.SandboxID)
		}
		return ids, resp.StatusCode
	}
	for _, m := range metadataCases {
		body, _ := json.Marshal(map[string]any{"templateID": "base", "timeout": 600, "metadata": m})
		resp := do(t, http.MethodPost, srv.URL+"/sandboxes", testKey, string(body))
		var sb struct {
			SandboxID string `json:"sandboxID"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&sb); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("create with %v: status %d, %v", m, resp.StatusCode, err)
		}
		for name, q := range map[string]string{"js": jsSDKQuery(m), "python": pythonSDKQuery(m)} {
			if ids, status := list(q); status != http.StatusOK || len(ids) != 1 || ids[0] != sb.SandboxID {
				t.Errorf("%s SDK filter %v (%s) = %d %v, want only %s", name, m, q, status, ids, sb.SandboxID)
			}
		}
	}
	if ids, _ := list(url.Values{"metadata": {url.Values{"tag": {"c++"}}.Encode()}}.Encode()); len(ids) != 0 {
		t.Errorf("two-level filter tag=c++ found %v; E2B reads it as %q and finds nothing", ids, "c  ")
	}
	if _, status := list("metadata=" + url.QueryEscape("novalue")); status != http.StatusBadRequest {
		t.Errorf("filter without = : status %d, want 400 as parseFilters refuses it", status)
	}
}

// maxAllowedTTL is E2B's getMaxAllowedTTL (infra
// packages/api/internal/orchestrator/keep_alive.go): the TTL a timeout change
// may set without the sandbox outliving start + its max instance length.
func maxAllowedTTL(now, start time.Time, duration, maxLength time.Duration) time.Duration {
	left := maxLength - now.Sub(start)
	if left <= 0 {
		return 0
	}
	return min(left, duration)
}

// TestContract_simulatorKeepAlive holds e2bsim's set-timeout and connect to
// KeepAliveFor: set-timeout replaces the end (allowShorter), connect only
// extends it, and both clamp to start + the plan's maximum.
func TestContract_simulatorKeepAlive(t *testing.T) {
	tests := []struct {
		name     string
		plan     time.Duration
		age      time.Duration // since start when the change is made
		timeout  time.Duration
		connect  bool
		initialT time.Duration // the create timeout
	}{
		{"hobby, room left", e2bsim.HobbyMaxLifetime, 10 * time.Minute, 20 * time.Minute, false, time.Hour},
		{"hobby, clamped", e2bsim.HobbyMaxLifetime, 50 * time.Minute, time.Hour, false, time.Hour},
		{"hobby, shortened", e2bsim.HobbyMaxLifetime, 10 * time.Minute, time.Minute, false, time.Hour},
		{"hobby, connect never shortens", e2bsim.HobbyMaxLifetime, 10 * time.Minute, time.Minute, true, time.Hour},
		{"hobby, connect clamped", e2bsim.HobbyMaxLifetime, 30 * time.Minute, time.Hour, true, 40 * time.Minute},
		{"pro, clamped", e2bsim.ProMaxLifetime, 23 * time.Hour, 2 * time.Hour, false, 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := e2bsim.NewManualClock(epoch)
			srv := httptest.NewServer(e2bsim.New(e2bsim.Options{Now: clock.Now, MaxLifetime: tt.plan}))
			defer srv.Close()
			resp := do(t, http.MethodPost, srv.URL+"/sandboxes", testKey,
				fmt.Sprintf(`{"templateID":"base","timeout":%d}`, int(tt.initialT.Seconds())))
			var sb struct {
				SandboxID string `json:"sandboxID"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&sb); err != nil || resp.StatusCode != http.StatusCreated {
				t.Fatalf("create: %d %v", resp.StatusCode, err)
			}
			clock.Advance(tt.age)
			now := clock.Now()
			path, body := "/timeout", fmt.Sprintf(`{"timeout":%d}`, int(tt.timeout.Seconds()))
			want := now.Add(maxAllowedTTL(now, epoch, tt.timeout, tt.plan))
			if tt.connect {
				path = "/connect"
				if initial := epoch.Add(tt.initialT); want.Before(initial) {
					want = initial // allowShorter false: the end only moves later
				}
			}
			if resp := do(t, http.MethodPost, srv.URL+"/sandboxes/"+sb.SandboxID+path, testKey, body); resp.StatusCode >= 300 {
				t.Fatalf("%s: status %d", path, resp.StatusCode)
			}
			var d struct {
				EndAt time.Time `json:"endAt"`
			}
			json.NewDecoder(do(t, http.MethodGet, srv.URL+"/sandboxes/"+sb.SandboxID, testKey, "").Body).Decode(&d)
			if !d.EndAt.Equal(want) {
				t.Errorf("endAt = %s, want %s as KeepAliveFor computes it", d.EndAt, want)
			}
		})
	}
}

// TestContract_connectorReportsE2BEnd holds e2b_set_sandbox_timeout to what
// E2B reports, with no simulator: E2B's 204 has no body, so the end time must
// come from the GET, whatever the tool asked for.
func TestContract_connectorReportsE2BEnd(t *testing.T) {
	now := epoch.Add(50 * time.Minute)
	end := epoch.Add(maxAllowedTTL(now, epoch, time.Hour, time.Hour) + 50*time.Minute) // Hobby: start + 1 h
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			w.WriteHeader(http.StatusNoContent)
		default:
			fmt.Fprintf(w, `{"templateID":"t","sandboxID":"iabcdefghij0123456789","clientID":"c","startedAt":%q,"endAt":%q,`+
				`"cpuCount":2,"memoryMB":512,"diskSizeMB":512,"state":"running","envdVersion":"0.2.4"}`,
				epoch.Format(time.RFC3339), end.Format(time.RFC3339))
		}
	}))
	defer srv.Close()
	c := e2b.New(e2b.Options{BaseURL: srv.URL, HTTPClient: srv.Client(), Now: func() time.Time { return now }})
	var tool *connectors.Tool
	for _, tl := range c.Tools() {
		if tl.Name == e2b.ToolSetSandboxTimeout {
			tool = tl
		}
	}
	out, err := tool.Call(context.Background(), testKey, json.RawMessage(`{"sandbox_id":"iabcdefghij0123456789","timeout":3600}`))
	if err != nil {
		t.Fatal(err)
	}
	got := out.(e2b.SetTimeoutOut)
	if got.EndAt != end.Format(time.RFC3339) || !got.Clamped {
		t.Errorf("set timeout = %+v, want end_at %s (E2B's), clamped", got, end.Format(time.RFC3339))
	}
}

// TestContract_simulatorCurrentAPI holds e2bsim to the rules of E2B's current
// API that the issue-25 run of the official JS SDK (e2b 2.51.0) found
// missing or different, each case naming the source it follows. The routes
// are the SDK's (dist/index.js of e2b 2.51.0: POST /v2/sandboxes, POST
// /v2/sandboxes/{sandboxID}/connect, GET /templates/aliases/{alias}).
func TestContract_simulatorCurrentAPI(t *testing.T) {
	clock := e2bsim.NewManualClock(epoch)
	srv := httptest.NewServer(e2bsim.New(e2bsim.Options{Now: clock.Now, MaxRunning: 100}))
	defer srv.Close()
	create := func(path, body string) string {
		resp := do(t, http.MethodPost, srv.URL+path, testKey, body)
		var sb struct {
			SandboxID, EnvdAccessToken string
		}
		if err := json.NewDecoder(resp.Body).Decode(&sb); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s %s: %d %v", path, body, resp.StatusCode, err)
		}
		if path == "/v2/sandboxes" && sb.EnvdAccessToken == "" {
			t.Errorf("POST /v2/sandboxes: no envdAccessToken; the v2 route is always secured")
		}
		return sb.SandboxID
	}
	running := create("/v2/sandboxes", `{"templateID":"base","timeout":600}`)
	paused := create("/v2/sandboxes", `{"templateID":"base","timeout":600}`)
	if resp := do(t, http.MethodPost, srv.URL+"/sandboxes/"+paused+"/pause", testKey, `{}`); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("pause: %d", resp.StatusCode)
	}
	tests := []struct {
		source, method, path, body string
		want                       int
	}{
		{"infra handlers/sandbox_create.go: autoPauseMemory true needs no autoPause", http.MethodPost, "/v2/sandboxes",
			`{"templateID":"base","autoPauseMemory":true}`, http.StatusCreated},
		{"infra handlers/sandbox_create.go: autoPauseMemory false needs autoPause", http.MethodPost, "/v2/sandboxes",
			`{"templateID":"base","autoPauseMemory":false}`, http.StatusBadRequest},
		{"infra handlers/sandbox_create.go: v1 create still served", http.MethodPost, "/sandboxes",
			`{"templateID":"base"}`, http.StatusCreated},
		{"infra TestConnectV2_Timeout: v2 connect without a body", http.MethodPost, "/v2/sandboxes/" + running + "/connect", "",
			http.StatusOK},
		{"infra TestConnectV2_Timeout: v2 connect timeout 0", http.MethodPost, "/v2/sandboxes/" + running + "/connect",
			`{"timeout":0}`, http.StatusBadRequest},
		{"infra handlers/sandbox_connect.go: memory not checked while running", http.MethodPost,
			"/v2/sandboxes/" + running + "/connect", `{"timeout":60,"memory":false}`, http.StatusOK},
		{"infra handlers/sandbox_resume.go resolveFilesystemBoot: memory false on a memory snapshot", http.MethodPost,
			"/v2/sandboxes/" + paused + "/connect", `{"timeout":60,"memory":false}`, http.StatusBadRequest},
		{"infra handlers/sandbox_connect.go: v1 connect still served", http.MethodPost, "/sandboxes/" + running + "/connect",
			`{"timeout":60}`, http.StatusOK},
		{"infra utils/split.go ShortID: a well-formed unknown id", http.MethodGet, "/sandboxes/nonexistent", "", http.StatusNotFound},
		{"infra utils/split.go ShortID: a well-formed unknown id on connect", http.MethodPost, "/v2/sandboxes/abc123/connect", "{}",
			http.StatusNotFound},
		{"infra utils/split.go ShortID: two dashes", http.MethodGet, "/sandboxes/a-b-c", "", http.StatusBadRequest},
		{"infra shared/pkg/id ValidateSandboxID: not lowercase", http.MethodDelete, "/sandboxes/ABC", "", http.StatusBadRequest},
		{"infra handlers/template_alias.go: the team's alias", http.MethodGet, "/templates/aliases/my-app", "", http.StatusOK},
		{"infra handlers/template_alias.go: a public alias is another team's", http.MethodGet, "/templates/aliases/base", "",
			http.StatusForbidden},
		{"infra handlers/template_alias.go: unknown", http.MethodGet, "/templates/aliases/no-such-template", "", http.StatusNotFound},
		{"infra handlers/template_tags.go: the team's template's tags", http.MethodGet, "/templates/my-app/tags", "", http.StatusOK},
		{"infra handlers/template_tags.go: assign", http.MethodPost, "/templates/tags", `{"target":"my-app","tags":["v2"]}`,
			http.StatusCreated},
		{"infra handlers/template_tags.go: the default tag is not deleted", http.MethodDelete, "/templates/tags",
			`{"name":"my-app","tags":["default"]}`, http.StatusBadRequest},
	}
	for _, tt := range tests {
		if resp := do(t, tt.method, srv.URL+tt.path, testKey, tt.body); resp.StatusCode != tt.want {
			t.Errorf("%s: %s %s = %d, want %d", tt.source, tt.method, tt.path, resp.StatusCode, tt.want)
		}
	}
}

// sortPaginated is infra's SortPaginatedSandboxes (packages/api/internal/
// utils/sandboxes_list.go), ported: start time newest first with ids
// ascending, or the exact reverse.
func sortPaginated(ids []string, at map[string]time.Time, desc bool) {
	sort.Slice(ids, func(i, j int) bool {
		a, b := at[ids[i]].Truncate(time.Microsecond), at[ids[j]].Truncate(time.Microsecond)
		if !a.Equal(b) {
			return a.After(b) == desc
		}
		return (ids[i] < ids[j]) == desc
	})
}

// TestContract_simulatorEqualStartTimes: sandboxes started in the same
// microsecond are listed, and paged, in infra's order in both directions.
func TestContract_simulatorEqualStartTimes(t *testing.T) {
	clock := e2bsim.NewManualClock(epoch)
	srv := httptest.NewServer(e2bsim.New(e2bsim.Options{Now: clock.Now, MaxRunning: 100}))
	defer srv.Close()
	at := map[string]time.Time{}
	var ids []string
	for i := range 9 {
		if i%3 == 0 {
			clock.Advance(time.Second) // three groups of three equal start times
		}
		resp := do(t, http.MethodPost, srv.URL+"/sandboxes", testKey, `{"templateID":"base","timeout":600}`)
		var sb struct{ SandboxID string }
		_ = json.NewDecoder(resp.Body).Decode(&sb)
		ids, at[sb.SandboxID] = append(ids, sb.SandboxID), clock.Now()
	}
	for _, order := range []string{"desc", "asc"} {
		want := append([]string{}, ids...)
		sortPaginated(want, at, order == "desc")
		var got []string
		for token := ""; ; {
			resp := do(t, http.MethodGet, srv.URL+"/v2/sandboxes?limit=2&order="+order+"&nextToken="+url.QueryEscape(token), testKey, "")
			var page []struct{ SandboxID string }
			_ = json.NewDecoder(resp.Body).Decode(&page)
			for _, s := range page {
				got = append(got, s.SandboxID)
			}
			if token = resp.Header.Get("X-Next-Token"); token == "" {
				break
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("order %s: listed %v, want %v (infra SortPaginatedSandboxes)", order, got, want)
		}
	}
}

// TestContract_connectorRoutes: the connector creates and connects on the
// routes E2B's SDK uses now (e2b 2.51.0 dist/index.js), sending NewSandboxV2
// without the secure field the v2 route does not have, and keeps POST
// /sandboxes (infra handlers/sandbox_create.go, still served) for a sandbox
// asked for without secure.
func TestContract_connectorRoutes(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		_, secure := body["secure"]
		got = append(got, fmt.Sprintf("%s %s secure=%v", r.Method, r.URL.Path, secure))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"templateID":"t","sandboxID":"iabcdefghij0123456789","clientID":"c","envdVersion":"0.2.4"}`)
	}))
	defer srv.Close()
	cl := e2b.NewClient(e2b.Options{BaseURL: srv.URL, HTTPClient: srv.Client()})
	ctx := context.Background()
	if _, err := cl.CreateSandbox(ctx, testKey, e2b.NewSandbox{TemplateID: "base", Timeout: 60, Secure: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSandbox(ctx, testKey, e2b.NewSandbox{TemplateID: "base", Timeout: 60}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ConnectSandbox(ctx, testKey, "iabcdefghij0123456789", 60); err != nil {
		t.Fatal(err)
	}
	want := []string{"POST /v2/sandboxes secure=false", "POST /sandboxes secure=true",
		"POST /v2/sandboxes/iabcdefghij0123456789/connect secure=false"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("requests = %q, want %q", got, want)
	}
}
