package hw

import (
	"net"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// maddrs returns the link-layer groups `ip maddr show dev ifname` lists.
func maddrs(t *testing.T, n *netnstest.Netns, ifname string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(n.Run(t, "ip", "-n", n.Name(), "maddr", "show", "dev", ifname), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "link" {
			out = append(out, f[1])
		}
	}
	return out
}

func has(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestSetMulticast: the groups the router's IPv6 services need are on the
// NIC's filter (ip maddr), a changed set leaves the old ones, and closing
// the port (its socket) removes them, with the kernel's IPv6 off on the
// port as the router keeps it.
func TestSetMulticast(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	p := openIn(t, n, Config{Name: "p1"})
	allRouters := IPv6MulticastMAC([16]byte{0xff, 0x02, 15: 2})
	dhcpAgents := IPv6MulticastMAC([16]byte{0xff, 0x02, 13: 1, 15: 2})
	ll := [16]byte{0xfe, 0x80, 8: 0x02, 13: 0xab, 14: 0xcd, 15: 0xef}
	solicited := SolicitedNodeMAC(ll)
	if allRouters.String() != "33:33:00:00:00:02" || dhcpAgents.String() != "33:33:00:01:00:02" || solicited.String() != "33:33:ff:ab:cd:ef" {
		t.Fatalf("group MACs %v %v %v", allRouters, dhcpAgents, solicited)
	}
	before := maddrs(t, n, "p1")
	if has(before, "33:33:00:00:00:02") {
		t.Fatalf("p1 is in all-routers before SetMulticast: %v", before)
	}
	if err := p.SetMulticast([]net.HardwareAddr{allRouters, dhcpAgents, solicited}); err != nil {
		t.Fatal(err)
	}
	got := maddrs(t, n, "p1")
	for _, want := range []string{"33:33:00:00:00:02", "33:33:00:01:00:02", "33:33:ff:ab:cd:ef"} {
		if !has(got, want) {
			t.Errorf("ip maddr show dev p1 = %v, want %s", got, want)
		}
	}
	if len(p.Multicast()) != 3 {
		t.Errorf("Multicast() = %v, want 3 groups", p.Multicast())
	}
	// A new address: the old solicited-node group goes.
	solicited2 := SolicitedNodeMAC([16]byte{0x20, 0x01, 13: 0x12, 14: 0x34, 15: 0x56})
	if err := p.SetMulticast([]net.HardwareAddr{allRouters, dhcpAgents, solicited2}); err != nil {
		t.Fatal(err)
	}
	got = maddrs(t, n, "p1")
	if has(got, "33:33:ff:ab:cd:ef") || !has(got, "33:33:ff:12:34:56") || !has(got, "33:33:00:00:00:02") {
		t.Errorf("after the change ip maddr = %v, want 33:33:ff:12:34:56 in, 33:33:ff:ab:cd:ef out", got)
	}
	if err := p.SetMulticast([]net.HardwareAddr{{0x02, 0, 0, 0, 0, 1}}); err == nil {
		t.Error("SetMulticast took a unicast MAC")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := maddrs(t, n, "p1"); has(got, "33:33:00:00:00:02") || has(got, "33:33:ff:12:34:56") {
		t.Errorf("after Close ip maddr = %v, want the router's groups gone", got)
	}
	if err := p.SetMulticast(nil); err != ErrClosed {
		t.Errorf("SetMulticast after Close = %v, want ErrClosed", err)
	}
}
