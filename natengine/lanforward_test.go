package natengine

import (
	"net/netip"
	"testing"
)

// TestLANForward: a forward that listens on a LAN interface (the host
// TAP's SSH forward: LAN host -> the router's LAN address:22 -> the
// kernel's address on a third, inside interface) is translated whether
// hairpin is on or off, its replies are un-NATed back, and the same port
// on the WAN address or from the WAN stays the router's own.
func TestLANForward(t *testing.T) {
	const hostIf Iface = 3
	kernel := netip.MustParseAddr("10.255.0.2")
	for _, hairpin := range []bool{false, true} {
		e, _ := newTestEngine(t, 0, func(r *Rules) {
			r.Hairpin = hairpin
			r.Ifaces = append(r.Ifaces, IfaceConfig{ID: hostIf, Name: "host", Addrs: []netip.Addr{netip.MustParseAddr("10.255.0.1")}, MTU: testMTU})
			r.Forwards = []Forward{{Proto: ProtoTCP, In: lanIf, FirstPort: 22, LastPort: 22, To: ap(kernel, 22)}}
		})
		syn := pk{src: hostA, dst: lanAddr, proto: ProtoTCP, sport: 40000, dport: 22, flags: tcpSYN}.build()
		if v := fwd(t, e, syn, lanIf, hostIf); v != Accept {
			t.Fatalf("hairpin %v: SYN to the LAN address: %v", hairpin, v)
		}
		s, d := addrs(syn)
		if d != ap(kernel, 22) {
			t.Fatalf("hairpin %v: SYN went to %v, want %v", hairpin, d, ap(kernel, 22))
		}
		reply := pk{src: kernel, dst: s.Addr(), proto: ProtoTCP, sport: 22, dport: s.Port(), flags: tcpSYN | tcpACK}.build()
		if v := fwd(t, e, reply, hostIf, lanIf); v != Accept {
			t.Fatalf("hairpin %v: SYN-ACK from the kernel: %v", hairpin, v)
		}
		expectAddrs(t, reply, ap(lanAddr, 22), ap(hostA, 40000))

		// From the WAN, to the LAN address (a routed attacker) or the
		// WAN address: not forwarded, left to the router's input policy.
		for _, dst := range []netip.Addr{lanAddr, wanAddr} {
			w := pk{src: remote, dst: dst, proto: ProtoTCP, sport: 40001, dport: 22, flags: tcpSYN}.build()
			if v := e.Prerouting(w, wanIf); v != Accept {
				t.Fatalf("hairpin %v: WAN SYN to %v: %v", hairpin, dst, v)
			}
			if _, d := addrs(w); d != ap(dst, 22) {
				t.Errorf("hairpin %v: WAN SYN to %v was translated to %v", hairpin, dst, d)
			}
		}
	}
}
