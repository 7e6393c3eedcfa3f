package wireguard

import (
	"net/netip"
	"testing"
)

// TestAllowedTable: the TUN's copy of the peers' allowed IPs decides as
// the device's lookup does: longest prefix or not, any peer's prefix
// holding the destination allows it, IPv4 packets only against IPv4
// prefixes and IPv6 ones (IPv4-mapped addresses included) only against
// IPv6 prefixes; a lookup does not allocate.
func TestAllowedTable(t *testing.T) {
	pfx := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range s {
			out = append(out, netip.MustParsePrefix(p))
		}
		return out
	}
	packet := func(dst string) []byte {
		a := netip.MustParseAddr(dst)
		if a.Is4() {
			ip := make([]byte, 20)
			ip[0] = 0x45
			copy(ip[16:], a.AsSlice())
			return ip
		}
		ip := make([]byte, 40)
		ip[0] = 0x60
		copy(ip[24:], a.AsSlice())
		return ip
	}
	tab := newAllowedTable([]Peer{
		{AllowedIPs: pfx("10.8.0.2/32", "10.10.0.0/16", "fd00:8::/64")},
		{AllowedIPs: pfx("10.8.0.3/32", "::ffff:192.0.2.1/128")},
		{}, // a peer without allowed IPs
	})
	for _, tc := range []struct {
		dst  string
		want bool
	}{
		{"10.8.0.2", true},
		{"10.8.0.3", true},
		{"10.8.0.4", false},
		{"10.10.200.1", true},
		{"10.11.0.1", false},
		{"fd00:8::1234", true},
		{"fd00:9::1", false},
		{"::ffff:192.0.2.1", true}, // an IPv6 packet to the mapped address
		{"192.0.2.1", false},       // an IPv4 packet: the mapped prefix is IPv6's
		{"0.0.0.0", false},
	} {
		if got := tab.allows(packet(tc.dst)); got != tc.want {
			t.Errorf("allows(packet to %s) = %v, want %v", tc.dst, got, tc.want)
		}
	}
	def := newAllowedTable([]Peer{{AllowedIPs: pfx("0.0.0.0/0")}})
	if !def.allows(packet("198.51.100.1")) || def.allows(packet("2001:db8::1")) {
		t.Error("a peer with 0.0.0.0/0: want every IPv4 destination allowed and no IPv6 one")
	}
	if none := newAllowedTable(nil); none.allows(packet("10.8.0.2")) || !none.allows([]byte{0x45, 0}) || !none.allows([]byte{0x00}) {
		t.Error("no peers: want every IP packet refused, and a short or non-IP one passed to the device")
	}
	miss4, miss6 := packet("10.8.0.4"), packet("fd00:9::1")
	if n := testing.AllocsPerRun(1000, func() { tab.allows(miss4); tab.allows(miss6) }); n != 0 {
		t.Errorf("allows: %v allocations per lookup, want 0", n)
	}
}
