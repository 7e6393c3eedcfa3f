package stack

import (
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"

	"github.com/gvrouter/gvrouter/firewall"
	"github.com/gvrouter/gvrouter/natengine"
)

// TestZoneRefusalDropReason: the interface's drop counters say which
// chain of the zones refused a packet. A new flow from the WAN to the
// router that the wan zone's input policy refuses is firewall_input on
// the wan interface (as the stack's own input policy counts it), not
// the engine's generic "nat"; a forward a rule refuses stays "nat" (the
// engine's firewall counter says why) on the interface it would leave
// by.
func TestZoneRefusalDropReason(t *testing.T) {
	l, nat := newNATLab(t, nil)
	withZones(t, l, nat, firewall.Drop,
		firewall.Rule{Name: "quiet-5004", Src: "lan", Dest: "wan", Protos: []uint8{17}, DestPorts: []firewall.PortRange{{First: 5004, Last: 5004}}, Target: firewall.Drop},
	)
	drops := func(iface, reason string) uint64 { return l.r.Interface(iface).Stats().Drops[reason] }
	send := func(from string, to netip.AddrPort) {
		t.Helper()
		stk := l.a.Stack
		if from == "b" {
			stk = l.b.Stack
		}
		c, err := gonet.DialUDP(stk, nil, &tcpip.FullAddress{Addr: tcpip.AddrFromSlice(to.Addr().AsSlice()), Port: to.Port()}, ipv4.ProtocolNumber)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("zone")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(labTimeout(3 * time.Second))
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: wan drops %v, lan drops %v", what, l.r.Interface("wan").Stats().Drops, l.r.Interface("lan").Stats().Drops)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// The WAN host to the router: the wan zone's input chain.
	fw0, nat0, eng0 := drops("wan", "firewall_input"), drops("wan", "nat"), nat.Stats().Drop(natengine.DropFirewall)
	send("b", netip.AddrPortFrom(wanIP4, 9999))
	waitFor("udp from wan to the router", func() bool {
		return nat.Stats().Drop(natengine.DropFirewall) > eng0 && drops("wan", "firewall_input")+drops("wan", "nat") > fw0+nat0
	})
	if got := drops("wan", "firewall_input"); got != fw0+1 {
		t.Errorf("wan firewall_input drops %d -> %d after the zone refused a datagram to the router, want one more", fw0, got)
	}
	if got := drops("wan", "nat"); got != nat0 {
		t.Errorf("wan nat drops %d -> %d after the zone's input chain refused a datagram, want no change (it is firewall_input)", nat0, got)
	}

	// The LAN host to WAN port 5004: the rule in the forward chain.
	fw0, nat0, eng0 = drops("wan", "firewall_input"), drops("wan", "nat"), nat.Stats().Drop(natengine.DropFirewall)
	send("a", netip.AddrPortFrom(bIP4, 5004))
	waitFor("udp from lan to wan:5004", func() bool {
		return nat.Stats().Drop(natengine.DropFirewall) > eng0 && drops("wan", "firewall_input")+drops("wan", "nat") > fw0+nat0
	})
	if got := drops("wan", "nat"); got != nat0+1 {
		t.Errorf("wan nat drops %d -> %d after a rule refused a forward, want one more", nat0, got)
	}
	if got := drops("wan", "firewall_input"); got != fw0 {
		t.Errorf("wan firewall_input drops %d -> %d after a forward refusal, want no change", fw0, got)
	}
}
