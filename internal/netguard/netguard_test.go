package netguard_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/mcpgate/mcpgate/internal/netguard"
)

func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"93.184.216.34": true, "2606:4700::1111": true,
		"127.0.0.1": false, "::1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "fe80::1": false, "fc00::1": false, "100.64.0.1": false, "0.0.0.0": false,
		"::ffff:127.0.0.1": false, "224.0.0.1": false,
		// Issue 24: embedded IPv4 forms and the rest of the IANA registries.
		"64:ff9b::7f00:1": false, "64:ff9b::a00:1": false, "64:ff9b::5db8:d822": true, "64:ff9b:1::1": false,
		"2002:7f00:1::1": false, "2002:5db8:d822::1": false, "::7f00:1": false, "::5db8:d822": false,
		"::ffff:10.0.0.1": false, "::ffff:93.184.216.34": true,
		"0.1.2.3": false, "240.0.0.1": false, "255.255.255.255": false, "198.18.0.1": false, "198.19.255.255": false,
		"192.0.0.8": false, "192.0.2.1": false, "198.51.100.1": false, "203.0.113.1": false, "192.88.99.1": false,
		"192.31.196.1": false, "192.175.48.1": false, "192.52.193.1": false,
		"100::1": false, "2001::1": false, "2001:db8::1": false, "2001:2::1": false, "2001:20::1": false,
		"3fff::1": false, "5f00::1": false, "fec0::1": false, "ff02::1": false, "2620:4f:8000::1": false,
		"2a00:1450:4001::1": true,
		// IPv6 is allowed only inside 2000::/3 (global unicast): not SIIT's
		// IPv4-translated form, nor unallocated space.
		"::ffff:0:7f00:1": false, "::ffff:0:a9fe:a9fe": false, "::ffff:0:5db8:d822": false, "100:0:0:1::1": false,
		"4000::1": false, "e000::1": false, "1fff:ffff::1": false, "3ffe:ffff::1": true,
	} {
		if got := netguard.Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}

// The host's own addresses are refused even where they are public.
func TestOwn(t *testing.T) {
	addrs, err := net.InterfaceAddrs()
	if err != nil || len(addrs) == 0 {
		t.Fatalf("InterfaceAddrs() = %v, %v", addrs, err)
	}
	for _, ia := range addrs {
		n, ok := ia.(*net.IPNet)
		if !ok {
			continue
		}
		a, _ := netip.AddrFromSlice(n.IP)
		if !netguard.Own(a) {
			t.Errorf("Own(%s) = false for an interface address", a)
		}
	}
	if netguard.Own(netip.MustParseAddr("93.184.216.34")) {
		t.Error("Own(93.184.216.34) = true")
	}
}

func TestParseNetworks(t *testing.T) {
	nets, err := netguard.ParseNetworks("10.0.0.0/8, 192.168.1.7 fd00::/8")
	if err != nil || len(nets) != 3 {
		t.Fatalf("ParseNetworks() = %v, %v", nets, err)
	}
	if !netguard.Contains(nets, netip.MustParseAddr("10.2.3.4")) || !netguard.Contains(nets, netip.MustParseAddr("::ffff:192.168.1.7")) ||
		netguard.Contains(nets, netip.MustParseAddr("192.168.1.8")) {
		t.Errorf("Contains is wrong for %v", nets)
	}
	if _, err := netguard.ParseNetworks("10.0.0.0/8,example.com"); err == nil {
		t.Error("ParseNetworks accepted a host name")
	}
}
