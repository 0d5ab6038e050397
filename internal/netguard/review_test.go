package netguard

import (
	"net/netip"
	"testing"
)

// Review proof: Public is a deny list, and IPv6 space outside 2000::/3
// (the only global unicast allocation) passes when no entry names it:
// the IPv4-translated form ::ffff:0:a.b.c.d (RFC 2765, SIIT), whose
// translator reaches the embedded IPv4 address, and unallocated space.
func TestReview_PublicRefusesNonGlobalIPv6(t *testing.T) {
	for _, s := range []string{"::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe", "100:0:0:1::1", "4000::1", "e000::1"} {
		if Public(netip.MustParseAddr(s)) {
			t.Errorf("Public(%s) = true, want false (not global unicast)", s)
		}
	}
}
