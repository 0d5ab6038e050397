package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// specialUse are the ranges of the IANA IPv4 and IPv6 Special-Purpose
// Address Registries (iana-ipv4-special-registry, iana-ipv6-special-registry,
// as of 2024), plus multicast, 240.0.0.0/4 and the deprecated site-local
// range: addresses that are not a public web server's. A URL that resolves
// into one would let anyone make the gateway probe its own network (SSRF),
// so every one is refused, even those the registry marks globally reachable
// (AS112, AMT), which no public service is reached at.
var specialUse = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, p := range []string{
		// IPv4
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24", "192.168.0.0/16",
		"192.175.48.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		// IPv6 (IPv4-mapped and NAT64 are judged by their IPv4 address below)
		"::/96", "100::/64", "2001::/23", "2001:db8::/32", "2002::/16", "2620:4f:8000::/48", "3fff::/20",
		"5f00::/16", "64:ff9b:1::/48", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		ps = append(ps, netip.MustParsePrefix(p))
	}
	return ps
}()

// nat64 is the well-known NAT64 prefix (RFC 6052): its last 32 bits are an
// IPv4 address, reached through the translator.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// globalUnicast6 is the only IPv6 space IANA allocates for global
// unicast. IPv6 is judged by an allow list: outside it lie forms that a
// translator maps onto IPv4 (SIIT's ::ffff:0:a.b.c.d) and unallocated
// space that a future or local use may route anywhere.
var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// Public reports whether a is a public address: an IPv4 address that is
// not special-use, or an IPv6 address inside 2000::/3 that is not; one
// with an embedded IPv4 address (IPv4-mapped, NAT64) is judged by that
// address; the IPv4-compatible (::/96) and 6to4 (2002::/16) forms are
// refused.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	if !a.IsValid() || a.Zone() != "" || (a.Is6() && !globalUnicast6.Contains(a)) {
		return false
	}
	for _, p := range specialUse {
		if p.Contains(a) {
			return false
		}
	}
	return !a.IsLoopback() && !a.IsPrivate() && !a.IsLinkLocalUnicast() && !a.IsMulticast() && !a.IsUnspecified()
}

// Own reports whether a is one of this host's interface addresses: a
// public address of the gateway's own machine reaches services that may
// trust a local caller. Read at each call, since addresses change.
func Own(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // unknown: refuse
	}
	a = a.Unmap()
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if own, ok := netip.AddrFromSlice(n.IP); ok && own.Unmap() == a {
				return true
			}
		}
	}
	return false
}

// ParseNetworks reads a list of CIDRs or bare addresses separated by commas
// or spaces (TRUSTED_PROXIES, UPSTREAM_PRIVATE_NETWORKS).
func ParseNetworks(list string) ([]netip.Prefix, error) {
	var nets []netip.Prefix
	var bad []string
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if pfx, err := netip.ParsePrefix(f); err == nil {
			nets = append(nets, pfx.Masked())
		} else if a, err := netip.ParseAddr(f); err == nil {
			nets = append(nets, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		} else {
			bad = append(bad, fmt.Sprintf("%q", f))
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("not a CIDR or IP address: %s", strings.Join(bad, ", "))
	}
	return nets, nil
}

// Contains reports whether one of nets holds a.
func Contains(nets []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, n := range nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// ErrRefused is a dial refused by Control.
var ErrRefused = errors.New("address not allowed")

// Control returns a net.Dialer Control function that lets a connection
// through only to an address allow accepts: it runs on the address
// actually dialled, after DNS, so a name that resolves (or re-resolves) to
// an inner address is refused too.
func Control(allow func(netip.Addr) bool) func(network, address string, _ syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !allow(ap.Addr()) {
			return ErrRefused
		}
		return nil
	}
}
