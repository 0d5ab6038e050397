package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"
)

// publicStandIn stands in for the gateway's shared special-use checker
// (internal/oauth): it calls one documentation address public.
func publicStandIn(a netip.Addr) bool { return a == netip.MustParseAddr("203.0.113.7") }

func TestNetwork_Allowed(t *testing.T) {
	n := &Network{Private: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}, Public: publicStandIn}
	for _, tt := range []struct {
		addr      string
		plaintext bool
		want      bool
	}{
		{"127.0.0.1", true, true},
		{"127.0.0.1", false, true},
		{"::ffff:127.0.0.1", true, true}, // judged as its IPv4 form
		{"fd00::1", true, true},
		{"203.0.113.7", false, true},
		{"203.0.113.7", true, false}, // plain http to the internet
		{"::ffff:203.0.113.7", true, false},
		{"10.0.0.1", false, false}, // neither listed nor public
		{"169.254.169.254", false, false},
		{"0.0.0.0", false, false},
		{"::", false, false},
		{"224.0.0.1", false, false},
		{"255.255.255.255", false, false},
		{"fe80::1%eth0", false, false},
	} {
		if got := n.allowed(netip.MustParseAddr(tt.addr), tt.plaintext); got != tt.want {
			t.Errorf("allowed(%s, plaintext %v) = %v, want %v", tt.addr, tt.plaintext, got, tt.want)
		}
	}
	if (&Network{}).allowed(netip.MustParseAddr("203.0.113.7"), false) {
		t.Error("a Network with no Public checker allowed a public address")
	}
}

func TestNetwork_CheckURL(t *testing.T) {
	n := &Network{}
	for _, raw := range []string{"http://example.com/mcp", "ftp://example.com", "https://user:pw@example.com/mcp", "https:///mcp", "https://example.com/mcp#x", "::"} {
		if _, err := n.CheckURL(raw); err == nil {
			t.Errorf("CheckURL(%q) accepted", raw)
		}
	}
	if _, err := n.CheckURL("https://example.com/mcp"); err != nil {
		t.Errorf("CheckURL(https) err = %v", err)
	}
	if _, err := loopback.CheckURL("http://10.0.0.1/mcp"); err != nil {
		t.Errorf("http with private networks listed: err = %v (the address is checked at dial)", err)
	}
}

// TestDial_PinsTheFirstAddress: once a session reached an address, a DNS
// answer that changes (rebinding) cannot move its next connections.
func TestDial_PinsTheFirstAddress(t *testing.T) {
	noLeaks(t)
	f := &fixture{}
	ts := f.serve(t)
	u, _ := url.Parse(ts.URL)
	var lookups atomic.Int64
	n := loopback
	n.Private = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	n.LookupNetIP = func(context.Context, string, string) ([]netip.Addr, error) {
		if lookups.Add(1) == 1 {
			// A mixed answer: only the allowed address is dialled.
			return []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("127.0.0.1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
	}
	client, closeIdle := n.httpClient()
	defer closeIdle()
	target := "http://upstream.test:" + u.Port() + "/"
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		req.Close = true // a new connection, so a new dial, every time
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
	}
	if lookups.Load() != 1 {
		t.Errorf("resolved %d times, want once (later dials use the pinned address)", lookups.Load())
	}
}

// TestDial_RefusesWhatResolvesElsewhere: a name that resolves only to
// addresses outside the policy is never dialled.
func TestDial_RefusesWhatResolvesElsewhere(t *testing.T) {
	var hit atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Store(true) }))
	defer ts.Close()
	u, _ := url.Parse(ts.URL)
	n := Network{Public: func(netip.Addr) bool { return false }, LookupNetIP: func(context.Context, string, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil // loopback, not listed
	}}
	client, closeIdle := n.httpClient()
	defer closeIdle()
	_, err := client.Get("https://rebind.test:" + u.Port() + "/")
	if !errors.Is(err, ErrAddrRefused) {
		t.Fatalf("Get() err = %v, want ErrAddrRefused", err)
	}
	if hit.Load() {
		t.Error("the refused address was reached")
	}
}

// TestHop_NoRedirectNoProxy: a redirect is not followed (the other server
// is never reached) and HTTPS_PROXY/HTTP_PROXY are not used.
func TestHop_NoRedirectNoProxy(t *testing.T) {
	var elsewhere, proxied atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Store(true) }))
	defer other.Close()
	proxy := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { proxied.Store(true) }))
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	redirect := httptest.NewServer(http.RedirectHandler(other.URL+"/mcp", http.StatusTemporaryRedirect))
	defer redirect.Close()
	p := newPool(t, Options{})
	_, err := p.Discover(context.Background(), Target{URL: redirect.URL})
	if e := (*Error)(nil); !errors.As(err, &e) || e.Kind != KindRedirect || e.Status != http.StatusTemporaryRedirect {
		t.Fatalf("Discover() err = %v, want KindRedirect 307", err)
	}
	if elsewhere.Load() || proxied.Load() {
		t.Errorf("redirect followed %v, proxy used %v; want neither", elsewhere.Load(), proxied.Load())
	}
}

type closeProbe func(*http.Request) (*http.Response, error)

func (f closeProbe) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A session's closing DELETE is bounded by the closer's context (for a
// discovery, the caller's deadline): go-sdk sends it on the connection's
// own context, for up to 5 s more. Other requests are not touched by it.
func TestHopTransport_CloseDeleteBoundedByCloser(t *testing.T) {
	base := closeProbe(func(r *http.Request) (*http.Response, error) {
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		default:
			return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}}, nil
		}
	})
	state := &sessionState{}
	h := &hopTransport{base: base, state: state}
	closer, cancel := context.WithCancel(context.Background())
	state.setCloseContext(closer)
	cancel() // the discovery's deadline has passed
	del, _ := http.NewRequestWithContext(context.Background(), http.MethodDelete, "http://127.0.0.1/mcp", nil)
	if _, err := h.RoundTrip(del); !errors.Is(err, context.Canceled) {
		t.Errorf("DELETE after the closer's context ended: err = %v, want %v", err, context.Canceled)
	}
	post, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://127.0.0.1/mcp", http.NoBody)
	resp, err := h.RoundTrip(post)
	if err != nil {
		t.Fatalf("POST err = %v, want it sent", err)
	}
	_ = resp.Body.Close()
}
