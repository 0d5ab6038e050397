package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// AddrAllowed reports whether the gateway may connect to addr as a public
// internet address. The wiring passes the gateway's one checker of the
// IANA special-use registries (shared with the OAuth metadata fetches);
// this package keeps no copy of that table.
type AddrAllowed func(netip.Addr) bool

// Network is the policy of the hop to upstreams: which addresses a dial may
// reach and over what.
type Network struct {
	// Private lists the networks where upstreams may live besides the
	// public internet (UPSTREAM_PRIVATE_NETWORKS). Plain http is allowed
	// only to an address inside one of them.
	Private []netip.Prefix
	// Public decides whether an address outside Private may be reached
	// (over https). Nil refuses every address outside Private.
	Public AddrAllowed
	// LookupNetIP resolves a host name; nil uses net.DefaultResolver.
	LookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// TLSConfig is cloned for https; nil uses the system's roots.
	TLSConfig *tls.Config
	// DialTimeout bounds one TCP connect; 0 means 10 s.
	DialTimeout time.Duration
}

// ErrAddrRefused is returned (wrapped) for a dial the policy refuses.
var ErrAddrRefused = errors.New("address refused by the upstream network policy")

// CheckURL parses an upstream's URL and refuses what the hop never allows:
// a scheme other than https or http, http when no private network is
// listed, user information (a credential that would travel in logs), a
// fragment, or no host.
func (n *Network) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("the URL does not parse")
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, errors.New("the URL must start with https://")
	case u.Scheme == "http" && len(n.Private) == 0:
		return nil, errors.New("the URL must use https (plain http is allowed only to the private networks an operator lists in UPSTREAM_PRIVATE_NETWORKS)")
	case u.User != nil:
		return nil, errors.New("the URL must not hold a user name or password; give credentials as headers")
	case u.Fragment != "" || u.Host == "" || u.Hostname() == "":
		return nil, errors.New("the URL needs a host and no fragment")
	}
	return u, nil
}

// allowed applies the policy to one address. The address is unmapped
// first, so ::ffff:10.0.0.1 is judged as 10.0.0.1. Unspecified, multicast,
// broadcast and zoned addresses are refused even inside Private.
func (n *Network) allowed(a netip.Addr, plaintext bool) bool {
	a = a.Unmap()
	if !a.IsValid() || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() ||
		a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return false
	}
	for _, p := range n.Private {
		if p.Contains(a) {
			return true
		}
	}
	return !plaintext && n.Public != nil && n.Public(a)
}

// addrPin remembers, per host:port, the address the first dial reached, so
// later dials of one session go to that address again (re-checked): a DNS
// answer that changes between dials cannot move the session elsewhere.
type addrPin struct {
	mu    sync.Mutex
	addrs map[string]netip.Addr
}

func (p *addrPin) get(hostport string) (netip.Addr, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.addrs[hostport]
	return a, ok
}

func (p *addrPin) set(hostport string, a netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.addrs == nil {
		p.addrs = map[string]netip.Addr{}
	}
	if _, ok := p.addrs[hostport]; !ok {
		p.addrs[hostport] = a
	}
}

// dial returns a DialContext that resolves the host itself, keeps only the
// addresses the policy allows, and connects to one of them by address;
// the connect's Control hook checks the address the socket really
// connects to once more.
func (n *Network) dial(plaintext bool, pin *addrPin) func(ctx context.Context, network, hostport string) (net.Conn, error) {
	timeout := n.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	d := &net.Dialer{Timeout: timeout, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !n.allowed(ap.Addr(), plaintext) {
			return fmt.Errorf("connect to %s: %w", address, ErrAddrRefused)
		}
		return nil
	}}
	return func(ctx context.Context, network, hostport string) (net.Conn, error) {
		host, portText, err := net.SplitHostPort(hostport)
		if err != nil {
			return nil, err
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("bad port %q", portText)
		}
		candidates, err := n.candidates(ctx, host, hostport, plaintext, pin)
		if err != nil {
			return nil, err
		}
		var firstErr error
		for _, a := range candidates {
			conn, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
			if err == nil {
				pin.set(hostport, a)
				return conn, nil
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		return nil, firstErr
	}
}

// candidates lists the allowed addresses for host: the pinned one when a
// dial of this session already reached it, else every allowed address the
// resolver gives.
func (n *Network) candidates(ctx context.Context, host, hostport string, plaintext bool, pin *addrPin) ([]netip.Addr, error) {
	if a, ok := pin.get(hostport); ok {
		if !n.allowed(a, plaintext) {
			return nil, fmt.Errorf("%s: %w", host, ErrAddrRefused)
		}
		return []netip.Addr{a}, nil
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		lookup := n.LookupNetIP
		if lookup == nil {
			lookup = net.DefaultResolver.LookupNetIP
		}
		addrs, err = lookup(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
	}
	var ok []netip.Addr
	for _, a := range addrs {
		if n.allowed(a, plaintext) {
			ok = append(ok, a.Unmap())
		}
	}
	if len(ok) == 0 {
		what := "a public address"
		if plaintext {
			what = "a listed private network (plain http)"
		}
		return nil, fmt.Errorf("%s resolves to no address in %s: %w", host, what, ErrAddrRefused)
	}
	return ok, nil
}

// httpClient builds the client of one upstream session: its own
// transports (so closing the session closes its connections), no proxy
// from the environment (a proxy would dial for us, unchecked), no
// redirects, and plain http only through the dialer that allows private
// networks alone.
func (n *Network) httpClient() (*http.Client, func()) {
	pin := &addrPin{}
	secure := n.transport(false, pin)
	plain := n.transport(true, pin)
	client := &http.Client{
		Transport: schemeSplit{secure: secure, plain: plain},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return client, func() {
		secure.CloseIdleConnections()
		plain.CloseIdleConnections()
	}
}

func (n *Network) transport(plaintext bool, pin *addrPin) *http.Transport {
	t := &http.Transport{
		DialContext:         n.dial(plaintext, pin),
		Proxy:               nil,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
	}
	if n.TLSConfig != nil {
		t.TLSClientConfig = n.TLSConfig.Clone()
	}
	return t
}

// schemeSplit sends https requests through one transport and http ones
// through the other, whose dialer allows private networks only.
type schemeSplit struct{ secure, plain *http.Transport }

func (s schemeSplit) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.URL.Scheme {
	case "https":
		return s.secure.RoundTrip(r)
	case "http":
		return s.plain.RoundTrip(r)
	}
	return nil, fmt.Errorf("scheme %q: %w", r.URL.Scheme, ErrAddrRefused)
}
