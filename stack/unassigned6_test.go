package stack

import (
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// unreachableAbout matches an ICMPv6 Destination Unreachable code 0 sent
// to dst that quotes a packet carrying marker.
func unreachableAbout(dst netip.Addr, marker []byte) func([]byte) bool {
	return func(f []byte) bool {
		if len(f) < 14+40+8 || be16(f[12:]) != uint16(header.IPv6ProtocolNumber) {
			return false
		}
		ip := header.IPv6(f[14:])
		if ip.DestinationAddress() != tcpip.AddrFrom16(dst.As16()) || ip.TransportProtocol() != header.ICMPv6ProtocolNumber {
			return false
		}
		icmp := header.ICMPv6(ip.Payload())
		return icmp.Type() == header.ICMPv6DstUnreachable && icmp.Code() == header.ICMPv6NetworkUnreachable &&
			carries(marker)(icmp.Payload())
	}
}

// TestUnassignedDelegated: with a default route to the WAN (as an RA
// gives), a packet from the ISP to a part of the delegated /48 that no
// LAN uses goes back out of the WAN — the loop of RFC 7084 WPD-5 — until
// the router knows the delegation; then it is a counted drop answered
// with Destination Unreachable, while the LAN's /64 inside the
// delegation is still forwarded.
func TestUnassignedDelegated(t *testing.T) {
	l := newLab(t)
	cfg := l.config()
	cfg.Routes = []RouteConfig{{To: netip.MustParsePrefix("::/0"), Via: bIP6}}
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ping(t, l.a, bIP6) // neighbours both ways
	ping(t, l.b, aIP6)
	fromWAN := func(dst netip.Addr, marker []byte) {
		pkt := ipv6Packet(bIP6, dst, 64, header.UDPProtocolNumber, udpDatagram(4000, 9, marker))
		f := ethFrame(wanMAC, bMAC, header.IPv6ProtocolNumber, pkt)
		l.r.Interface("wan").HandleBatch(0, []hw.Frame{{Data: f, WireLen: len(f)}})
	}
	unused := netip.MustParseAddr("fd00:1:0:5::9")

	// No delegation known: the packet loops back to the ISP.
	loop := []byte("loops-to-the-isp")
	fromWAN(unused, loop)
	if l.tapB.Wait(ctxTimeout(t, 2*time.Second), carries(loop)) == nil {
		t.Fatal("without the guard the packet did not go back out of the WAN (the test does not show the loop)")
	}

	l.r.SetUnassigned6([]netip.Prefix{netip.MustParsePrefix("fd00:1::/48")}, []netip.Prefix{netip.MustParsePrefix("fd00:1::1/64")})
	before := l.r.Interface("wan").Stats().Drops["unassigned_delegated"]
	dropped := []byte("to-unused-subnet")
	fromWAN(unused, dropped)
	if l.tapB.Wait(ctxTimeout(t, 2*time.Second), unreachableAbout(bIP6, dropped)) == nil {
		t.Error("no Destination Unreachable (code 0) back to the sender")
	}
	if l.tapB.Wait(ctxTimeout(t, 200*time.Millisecond), func(f []byte) bool {
		return carries(dropped)(f) && !unreachableAbout(bIP6, dropped)(f)
	}) != nil {
		t.Error("the packet to the unassigned subnet was forwarded")
	}
	if got := l.r.Interface("wan").Stats().Drops["unassigned_delegated"]; got != before+1 {
		t.Errorf("unassigned_delegated drops = %d, want %d", got, before+1)
	}

	// The assigned /64 and addresses outside the delegation still pass.
	assigned := []byte("to-the-lan-subnet")
	fromWAN(aIP6, assigned)
	if l.tapA.Wait(ctxTimeout(t, 2*time.Second), carries(assigned)) == nil {
		t.Error("a packet to the LAN's /64 inside the delegation was not forwarded")
	}
	ping(t, l.a, bIP6)

	// Off again: nil delegation.
	l.r.SetUnassigned6(nil, nil)
	again := []byte("guard-is-off-now")
	fromWAN(unused, again)
	if l.tapB.Wait(ctxTimeout(t, 2*time.Second), carries(again)) == nil {
		t.Error("with the guard off the packet was not routed")
	}
}
