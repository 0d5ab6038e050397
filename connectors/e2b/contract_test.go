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
