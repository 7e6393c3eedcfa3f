package router

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/router/status"
)

// TestNeighborsStatus checks that the page's neighbour table has netstack's
// IPv4 (ARP) and IPv6 (NDP) entries of each NIC under the NIC's name.
func TestNeighborsStatus(t *testing.T) {
	s := gstack.New(gstack.Options{
		NetworkProtocols: []gstack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol, arp.NewProtocol},
	})
	defer s.Destroy()
	for id, name := range map[tcpip.NICID]string{1: "lan", 2: "wan"} {
		ep := channel.New(1, 1500, tcpip.LinkAddress([]byte{2, 0, 0, 0, 0, byte(id)}))
		ep.LinkEPCapabilities |= gstack.CapabilityResolutionRequired
		if err := s.CreateNICWithOptions(id, ep, gstack.NICOptions{Name: name}); err != nil {
			t.Fatalf("CreateNIC(%d): %s", id, err)
		}
	}
	add := func(nic tcpip.NICID, proto tcpip.NetworkProtocolNumber, addr string, mac tcpip.LinkAddress) {
		a := netip.MustParseAddr(addr)
		if err := s.AddStaticNeighbor(nic, proto, tcpip.AddrFromSlice(a.AsSlice()), mac); err != nil {
			t.Fatalf("AddStaticNeighbor(%d, %s): %s", nic, addr, err)
		}
	}
	add(1, ipv4.ProtocolNumber, "192.168.1.23", "\x02\x00\x00\x00\x01\x0a")
	add(1, ipv6.ProtocolNumber, "fe80::1", "\x02\x00\x00\x00\x01\x0b")
	add(2, ipv4.ProtocolNumber, "198.51.100.1", "\x02\x00\x00\x00\x02\x01")

	want := []status.Neighbor{
		{Interface: "lan", Address: netip.MustParseAddr("192.168.1.23"), MAC: "02:00:00:00:01:0a", State: "static"},
		{Interface: "lan", Address: netip.MustParseAddr("fe80::1"), MAC: "02:00:00:00:01:0b", State: "static"},
		{Interface: "wan", Address: netip.MustParseAddr("198.51.100.1"), MAC: "02:00:00:00:02:01", State: "static"},
	}
	n := neighborsStatus(s)
	slices.SortFunc(n, func(a, b status.Neighbor) int {
		return cmp.Or(strings.Compare(a.Interface, b.Interface), a.Address.Compare(b.Address))
	})
	if diff := gocmp.Diff(want, n, gocmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("neighborsStatus (-want +got):\n%s", diff)
	}
}
