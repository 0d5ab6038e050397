package httpx

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/mcpgate/mcpgate/internal/netguard"
)

// Proxies are the networks whose forwarding headers are believed
// (TRUSTED_PROXIES): the reverse proxies in front of the gateway. The zero
// value trusts nobody, so the client address is the TCP peer.
type Proxies struct {
	nets []netip.Prefix
}

// ParseProxies parses a comma- or space-separated list of CIDRs (a bare
// address counts as a /32 or /128). It reports every entry it cannot read.
func ParseProxies(list string) (*Proxies, error) {
	nets, err := netguard.ParseNetworks(list)
	if err != nil {
		return nil, err
	}
	return &Proxies{nets: nets}, nil
}

// String lists the networks.
func (p *Proxies) String() string {
	if p == nil {
		return ""
	}
	s := make([]string, len(p.nets))
	for i, n := range p.nets {
		s[i] = n.String()
	}
	return strings.Join(s, ",")
}

func (p *Proxies) trusted(a netip.Addr) bool {
	if p == nil || !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// Address returns the client address of r: the TCP peer, unless the peer is
// a trusted proxy, in which case the right-most address of the forwarding
// chain that is not itself a trusted proxy (every hop left of it could
// have been written by the client). X-Forwarded-For is read when present,
// else Forwarded (RFC 7239): every common proxy appends to X-Forwarded-For,
// so a client's own Forwarded header is not believed past such a proxy.
// A hop that cannot be read ends the walk at the trusted hop right of it.
func (p *Proxies) Address(r *http.Request) string {
	peer := peerAddr(r.RemoteAddr)
	addr, err := netip.ParseAddr(peer)
	if err != nil || !p.trusted(addr) {
		return peer
	}
	hops := forwardedHops(r.Header)
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			break
		}
		addr = a.Unmap()
		if !p.trusted(addr) {
			break
		}
	}
	return addr.String()
}

// forwardedHops returns the addresses of the forwarding chain, client
// first, with ports, brackets and quotes taken off.
func forwardedHops(h http.Header) []string {
	var hops []string
	if xff := h.Values("X-Forwarded-For"); len(xff) > 0 {
		for _, line := range xff {
			for _, hop := range strings.Split(line, ",") {
				hops = append(hops, hostOnly(strings.TrimSpace(hop)))
			}
		}
		return hops
	}
	for _, line := range h.Values("Forwarded") {
		for _, elem := range strings.Split(line, ",") {
			for _, pair := range strings.Split(elem, ";") {
				k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "for") {
					hops = append(hops, hostOnly(strings.Trim(v, `"`)))
				}
			}
		}
	}
	return hops
}

// hostOnly strips a port and IPv6 brackets: "[::1]:80" -> "::1",
// "1.2.3.4:80" -> "1.2.3.4".
func hostOnly(s string) string {
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
}

func peerAddr(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	return host
}

type addressKey struct{}

// WithClientAddress computes the client address once, with p, and keeps it
// in the request's context for ClientAddress; the root router puts it in
// front of everything, so every limit and log line sees the same address.
func WithClientAddress(p *Proxies) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := context.WithValue(r.Context(), addressKey{}, p.Address(r))
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}
