package stack

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"

	"github.com/gvrouter/gvrouter/firewall"
	"github.com/gvrouter/gvrouter/natengine"
)

// TestFirewallRejectAnswers: with zones, a reject rule's refused flows
// are answered, so the client fails at once instead of timing out: the
// WAN host's connection to the router (wan input: reject) gets a TCP
// RST, the LAN host's connection to one WAN port (a lan-to-wan reject
// rule) an ICMP port unreachable. A drop policy, for contrast, leaves
// the client waiting.
func TestFirewallRejectAnswers(t *testing.T) {
	l, nat := newNATLab(t, nil)
	withZones(t, l, nat, firewall.Reject,
		firewall.Rule{Name: "no-5003", Src: "lan", Dest: "wan", Protos: []uint8{6}, DestPorts: []firewall.PortRange{{First: 5003, Last: 5003}}, Target: firewall.Reject},
		firewall.Rule{Name: "quiet-5004", Src: "lan", Dest: "wan", Protos: []uint8{6}, DestPorts: []firewall.PortRange{{First: 5004, Last: 5004}}, Target: firewall.Drop},
	)
	remoteServer(t, l.b, netip.AddrPortFrom(bIP4, 5003))
	remoteServer(t, l.b, netip.AddrPortFrom(bIP4, 5004))
	dialErr := func(h *lab, from string, to netip.AddrPort, wait time.Duration) (error, time.Duration) {
		stk := l.a.Stack
		if from == "b" {
			stk = l.b.Stack
		}
		ctx := ctxTimeout(t, wait)
		start := time.Now()
		c, err := gonet.DialContextTCP(ctx, stk, tcpip.FullAddress{Addr: tcpip.AddrFromSlice(to.Addr().AsSlice()), Port: to.Port()}, ipv4.ProtocolNumber)
		if err == nil {
			c.Close()
		}
		return err, time.Since(start)
	}
	refused := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "refused")
	}
	// The WAN host to the router: RST.
	err, took := dialErr(l, "b", netip.AddrPortFrom(wanIP4, 22), labTimeout(3*time.Second))
	if !refused(err) {
		t.Errorf("wan to the router: %v after %v, want connection refused (a RST)", err, took)
	}
	// The LAN host to WAN port 5003: ICMP port unreachable.
	err, took = dialErr(l, "a", netip.AddrPortFrom(bIP4, 5003), labTimeout(3*time.Second))
	if !refused(err) {
		t.Errorf("lan to wan:5003: %v after %v, want connection refused (ICMP port unreachable)", err, took)
	}
	// Port 5004 is dropped: no answer, the dial times out.
	err, took = dialErr(l, "a", netip.AddrPortFrom(bIP4, 5004), 500*time.Millisecond)
	if err == nil || refused(err) {
		t.Errorf("lan to wan:5004 (drop): %v after %v, want a timeout", err, took)
	}
	if n := nat.Stats().FirewallRejects.Load(); n < 2 {
		t.Errorf("firewall rejects %d, want >= 2", n)
	}
	if n := nat.Stats().Drop(natengine.DropFirewall); n < 3 {
		t.Errorf("firewall drops %d, want >= 3", n)
	}
}

// withZones compiles zones lan (input and forward accept) and wan
// (input wanInput, forward drop) with rules, and sets them on the lab's
// NAT engine with the lab's two interfaces (wan masquerading).
func withZones(t *testing.T, l *lab, nat *natengine.Engine, wanInput firewall.Target, rules ...firewall.Rule) {
	t.Helper()
	lanID, _ := l.r.NATIface("lan")
	wanID, _ := l.r.NATIface("wan")
	rs, err := firewall.Compile(firewall.Policy{
		Zones: []firewall.Zone{
			{Name: "lan", Ifaces: []int32{int32(lanID)}, Input: firewall.Accept, Forward: firewall.Accept},
			{Name: "wan", Ifaces: []int32{int32(wanID)}, Input: wanInput, Forward: firewall.Drop},
		},
		Rules: rules,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = nat.SetRules(natengine.Rules{
		Ifaces: []natengine.IfaceConfig{
			{ID: lanID, Name: "lan", Addrs: []netip.Addr{lanIP4, lanIP6}, MTU: 1500},
			{ID: wanID, Name: "wan", WAN: true, Masquerade: true, Addrs: []netip.Addr{wanIP4, netip.MustParseAddr("fd00:2::1")}, MTU: 1500},
		},
		Zones: rs,
	})
	if err != nil {
		t.Fatal(err)
	}
}
