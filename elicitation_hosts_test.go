package mcpgate_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgate/mcpgate"
)

func TestElicitationHostAllowed(t *testing.T) {
	list := []string{"pay.example.com", "*.auth.example.org", "login.example.net:8443", "[2001:db8::1]", "203.0.113.7",
		"localhost:3000", "127.0.0.1", "Upper.Example.COM"}
	tests := []struct {
		name     string
		url      string
		wantHost string
		want     bool
	}{
		{"listed name", "https://pay.example.com/checkout?id=1", "pay.example.com", true},
		{"case ignored", "https://PAY.Example.com/x", "pay.example.com", true},
		{"entry given in upper case", "https://upper.example.com/", "upper.example.com", true},
		{"trailing dot", "https://pay.example.com./", "pay.example.com", true},
		{"default port written", "https://pay.example.com:443/", "pay.example.com", true},
		{"other port", "https://pay.example.com:8443/", "pay.example.com:8443", false},
		{"listed port", "https://login.example.net:8443/a", "login.example.net:8443", true},
		{"listed port, default given", "https://login.example.net/a", "login.example.net", false},
		{"subdomain of wildcard", "https://sso.auth.example.org/", "sso.auth.example.org", true},
		{"deeper subdomain of wildcard", "https://a.b.auth.example.org/", "a.b.auth.example.org", true},
		{"wildcard's own name", "https://auth.example.org/", "auth.example.org", false},
		{"suffix without a dot", "https://evilauth.example.org/", "evilauth.example.org", false},
		{"unlisted", "https://evil.example/", "evil.example", false},
		{"listed name as a prefix", "https://pay.example.com.evil.example/", "pay.example.com.evil.example", false},
		{"user information", "https://pay.example.com@evil.example/", "evil.example", false},
		{"user information naming the listed host", "https://x@pay.example.com/", "pay.example.com", false},
		{"plain http", "http://pay.example.com/", "pay.example.com", false},
		{"http to listed loopback", "http://localhost:3000/cb", "localhost:3000", true},
		{"http to listed loopback IP", "http://127.0.0.1/", "127.0.0.1", true},
		{"http to unlisted loopback", "http://127.0.0.2/", "127.0.0.2", false},
		{"https to listed loopback", "https://localhost:3000/", "localhost:3000", true},
		{"IPv6", "https://[2001:DB8::1]/", "[2001:db8::1]", true},
		{"IPv4", "https://203.0.113.7/", "203.0.113.7", true},
		{"IPv6 with zone", "https://[fe80::1%25en0]/", "", false},
		{"other scheme", "javascript://pay.example.com/%0aalert(1)", "", false},
		{"no host", "https:///path", "", false},
		{"relative", "/pay", "", false},
		{"opaque", "https:pay.example.com", "", false},
		{"not a URL", "https://pay.example.com/%zz", "", false},
		{"underscore host", "https://a_b.example.com/", "", false},
		{"unicode host", "https://päy.example.com/", "", false},
		{"leading zero port", "https://pay.example.com:0443/", "", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, ok := mcpgate.ElicitationHostAllowed(list, tt.url)
			if host != tt.wantHost || ok != tt.want {
				t.Errorf("ElicitationHostAllowed(%q) = %q, %t; want %q, %t", tt.url, host, ok, tt.wantHost, tt.want)
			}
		})
	}
	if _, ok := mcpgate.ElicitationHostAllowed(nil, "https://pay.example.com/"); ok {
		t.Error("an empty list allowed a host")
	}
	if _, ok := mcpgate.ElicitationHostAllowed([]string{"https://pay.example.com", "*", "pay.example.com/"}, "https://pay.example.com/"); ok {
		t.Error("malformed entries allowed a host")
	}
}

func TestNormalizeElicitationHosts(t *testing.T) {
	got, err := mcpgate.NormalizeElicitationHosts([]string{" Pay.Example.com ", "", "pay.example.com", "*.auth.example.org",
		"[::1]:8443", "10.0.0.1:8080", "localhost", "xn--bcher-kva.example"})
	want := []string{"pay.example.com", "*.auth.example.org", "[::1]:8443", "10.0.0.1:8080", "localhost", "xn--bcher-kva.example"}
	if err != nil || !cmp.Equal(got, want) {
		t.Fatalf("NormalizeElicitationHosts() = %q, %v; want %q", got, err, want)
	}
	if got, err := mcpgate.NormalizeElicitationHosts(nil); err != nil || got == nil || len(got) != 0 {
		t.Errorf("NormalizeElicitationHosts(nil) = %#v, %v; want an empty list", got, err)
	}
	for _, bad := range []string{"https://pay.example.com", "pay.example.com/path", "*", "*.com", "*.*.example.com",
		"pay.example.com:0", "pay.example.com:65536", "pay.example.com:08", "pay.example.com:", "::1", "[::1", "*.[::1]",
		"*.10.0.0.1", "[10.0.0.1]", "a_b.example.com", "-a.example.com", "a-.example.com", "example.123", "päy.example.com",
		"a..example.com", ".example.com", "user@pay.example.com", "pay.example.com?x", strings.Repeat("a", 64) + ".example",
		"[fe80::1%en0]", "1.2.3.04"} {
		_, err := mcpgate.NormalizeElicitationHosts([]string{"ok.example.com", bad})
		if mcpgate.ErrorCode(err) != mcpgate.EInvalid || !strings.Contains(mcpgate.ErrorMessage(err), fmt.Sprintf("%q", strings.ToLower(bad))) {
			t.Errorf("NormalizeElicitationHosts(%q) err = %v, want invalid naming it", bad, err)
		}
	}
	many := make([]string, mcpgate.MaxElicitationURLHosts+1)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.example.com", i)
	}
	if _, err := mcpgate.NormalizeElicitationHosts(many[:mcpgate.MaxElicitationURLHosts]); err != nil {
		t.Errorf("%d hosts err = %v, want accepted", mcpgate.MaxElicitationURLHosts, err)
	}
	if _, err := mcpgate.NormalizeElicitationHosts(many); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Errorf("%d hosts err = %v, want invalid", len(many), err)
	}
}

// FuzzElicitationHostAllowed: no input panics; a host the function names
// is one an admin can allow-list, and allow-listing it (the dashboard's
// "Allow") lets the same URL through unless it is refused for its scheme
// or user information; what is allowed is https (or http to a loopback
// host) and matches an entry.
func FuzzElicitationHostAllowed(f *testing.F) {
	for _, s := range []string{"https://pay.example.com/x", "https://a.b.example.com:8443/", "http://localhost:3000/",
		"https://[::1]/", "https://u@h.example/", "http://pay.example.com/", "https://PAY.example.com./", "ftp://x/"} {
		f.Add(s, "*.example.com")
	}
	f.Fuzz(func(t *testing.T, rawURL, entry string) {
		host, ok := mcpgate.ElicitationHostAllowed([]string{entry}, rawURL)
		if host == "" {
			if ok {
				t.Fatalf("allowed %q with no host", rawURL)
			}
			return
		}
		if err := mcpgate.ValidateElicitationHost(host); err != nil {
			t.Fatalf("host %q of %q is no entry: %v", host, rawURL, err)
		}
		u, err := url.Parse(rawURL)
		if err != nil {
			t.Fatalf("host %q named for a URL that does not parse: %v", host, err)
		}
		scheme := strings.ToLower(u.Scheme)
		if ok && scheme != "https" && scheme != "http" {
			t.Fatalf("allowed scheme %q", u.Scheme)
		}
		if ok && u.User != nil {
			t.Fatalf("allowed %q with user information", rawURL)
		}
		_, again := mcpgate.ElicitationHostAllowed([]string{host}, rawURL)
		if want := scheme == "https" && u.User == nil; want && !again {
			t.Fatalf("%q not allowed once its host %q is listed", rawURL, host)
		}
		if ok {
			e := strings.ToLower(strings.TrimSpace(entry))
			if mcpgate.ValidateElicitationHost(e) != nil {
				t.Fatalf("allowed %q by malformed entry %q", rawURL, entry)
			}
			if name, _, _ := strings.Cut(strings.TrimPrefix(e, "*."), ":"); !strings.Contains(host, name) {
				t.Fatalf("allowed host %q by entry %q", host, entry)
			}
		}
	})
}
