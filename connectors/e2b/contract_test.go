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
// pass. Sources: e2b-dev/E2B at b8029973 and e2b-dev/infra at 54693ff.

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
