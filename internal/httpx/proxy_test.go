package httpx_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcpgate/mcpgate/internal/httpx"
)

// TestProxies_Address: forwarding headers are believed
// only from a trusted peer, and then only up to the right-most address that
// is not a trusted proxy.
func TestProxies_Address(t *testing.T) {
	px, err := httpx.ParseProxies("10.0.0.0/8, 192.168.1.1 fd00::/8")
	if err != nil {
		t.Fatalf("ParseProxies() err = %v", err)
	}
	tests := []struct {
		name    string
		peer    string
		headers map[string][]string
		want    string
	}{
		{name: "no proxy", peer: "203.0.113.7:5000", want: "203.0.113.7"},
		{name: "untrusted peer's header ignored", peer: "203.0.113.7:5000",
			headers: map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, want: "203.0.113.7"},
		{name: "trusted peer", peer: "10.1.2.3:5000", headers: map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, want: "198.51.100.1"},
		{name: "client's spoofed hop left of the real one", peer: "10.1.2.3:5000",
			headers: map[string][]string{"X-Forwarded-For": {"1.1.1.1, 198.51.100.1"}}, want: "198.51.100.1"},
		{name: "two trusted proxies", peer: "10.1.2.3:5000",
			headers: map[string][]string{"X-Forwarded-For": {"1.1.1.1, 198.51.100.1", "192.168.1.1"}}, want: "198.51.100.1"},
		{name: "only trusted hops", peer: "10.1.2.3:5000", headers: map[string][]string{"X-Forwarded-For": {"10.9.9.9"}}, want: "10.9.9.9"},
		{name: "unreadable hop stops at the trusted one", peer: "10.1.2.3:5000",
			headers: map[string][]string{"X-Forwarded-For": {"1.1.1.1, unknown"}}, want: "10.1.2.3"},
		{name: "trusted peer without header", peer: "10.1.2.3:5000", want: "10.1.2.3"},
		{name: "Forwarded", peer: "10.1.2.3:5000",
			headers: map[string][]string{"Forwarded": {`for=1.1.1.1, for="[2001:db8::1]:4711";proto=https`}}, want: "2001:db8::1"},
		{name: "X-Forwarded-For wins over a client's Forwarded", peer: "10.1.2.3:5000",
			headers: map[string][]string{"Forwarded": {"for=1.1.1.1"}, "X-Forwarded-For": {"198.51.100.1"}}, want: "198.51.100.1"},
		{name: "IPv6 trusted peer", peer: "[fd00::1]:5000", headers: map[string][]string{"X-Forwarded-For": {"198.51.100.1:1234"}}, want: "198.51.100.1"},
		{name: "IPv4-mapped", peer: "[::ffff:10.1.2.3]:5000", headers: map[string][]string{"X-Forwarded-For": {"::ffff:198.51.100.1"}}, want: "198.51.100.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.peer
			for k, vs := range tt.headers {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			if got := px.Address(r); got != tt.want {
				t.Errorf("Address() = %q, want %q", got, tt.want)
			}
			var seen string
			httpx.WithClientAddress(px)(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				seen = httpx.ClientAddress(r)
			})).ServeHTTP(httptest.NewRecorder(), r)
			if seen != tt.want {
				t.Errorf("ClientAddress() behind WithClientAddress = %q, want %q", seen, tt.want)
			}
		})
	}
	var none *httpx.Proxies
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr, r.Header["X-Forwarded-For"] = "10.1.2.3:1", []string{"1.1.1.1"}
	if got := none.Address(r); got != "10.1.2.3" {
		t.Errorf("nil Proxies: Address() = %q, want the peer", got)
	}
}

func TestParseProxies_Invalid(t *testing.T) {
	if _, err := httpx.ParseProxies("10.0.0.0/8,not-a-cidr,300.1.1.1/8"); err == nil {
		t.Fatalf("ParseProxies() err = nil, want the bad entries named")
	}
	if p, err := httpx.ParseProxies(""); err != nil || p.String() != "" {
		t.Errorf("ParseProxies(\"\") = %v, %v, want none trusted", p, err)
	}
}
