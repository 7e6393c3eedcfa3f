package natengine

import (
	"net/netip"
	"testing"
)

// TestWANInput checks Rules.WANInput: with InputDrop new connections from
// the WAN to the router itself are dropped and counted, while forwards,
// mappings, ICMP, non-SYN TCP, DHCP replies and the LAN side pass.
func TestWANInput(t *testing.T) {
	e, _ := newTestEngine(t, 0, func(r *Rules) {
		r.WANInput = InputDrop
		r.Forwards = []Forward{{Proto: ProtoTCP, In: wanIf, FirstPort: 8080, LastPort: 8080, To: ap(hostA, 80)}}
	})
	mapped := outboundUDP(t, e, hostB, 5000, remote, 53)
	for _, tt := range []struct {
		name string
		pkt  pk
		in   Iface
		want Verdict
	}{
		{"tcp syn to router", pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 4000, dport: 22, flags: tcpSYN}, wanIf, Drop},
		{"tcp syn to router v6", pk{src: remote6, dst: wan6, proto: ProtoTCP, sport: 4000, dport: 22, flags: tcpSYN}, wanIf, Drop},
		{"udp to router", pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 4000, dport: 161}, wanIf, Drop},
		{"udp to router v6", pk{src: remote6, dst: wan6, proto: ProtoUDP, sport: 4000, dport: 161}, wanIf, Drop},
		{"udp to router link-local", pk{src: remote6, dst: netip.MustParseAddr("fe80::1"), proto: ProtoUDP, sport: 4000, dport: 161}, wanIf, Drop},
		{"tcp ack to router", pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 443, dport: 40000, flags: tcpACK}, wanIf, Accept},
		{"tcp syn-ack to router", pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 443, dport: 40001, flags: tcpSYN | tcpACK}, wanIf, Accept},
		{"dhcp reply", pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 67, dport: 68}, wanIf, Accept},
		{"dhcpv6 reply", pk{src: remote6, dst: netip.MustParseAddr("fe80::1"), proto: ProtoUDP, sport: 547, dport: 546}, wanIf, Accept},
		{"echo request", pk{src: remote, dst: wanAddr, proto: ProtoICMP, sport: 7, typ: 8}, wanIf, Accept},
		{"echo request v6", pk{src: remote6, dst: wan6, proto: ProtoICMPv6, sport: 7, typ: 128}, wanIf, Accept},
		{"forward", pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 4000, dport: 8080, flags: tcpSYN}, wanIf, Accept},
		{"mapping (EIF off: same remote)", pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: mapped}, wanIf, Accept},
		{"lan tcp syn to router", pk{src: hostA, dst: lanAddr, proto: ProtoTCP, sport: 4000, dport: 80, flags: tcpSYN}, lanIf, Accept},
		{"lan udp to router", pk{src: hostA, dst: lanAddr, proto: ProtoUDP, sport: 4000, dport: 53}, lanIf, Accept},
		{"lan tcp syn to wan address", pk{src: hostA, dst: wanAddr, proto: ProtoTCP, sport: 4000, dport: 80, flags: tcpSYN}, lanIf, Accept},
	} {
		before := e.Stats().Drop(DropInput)
		if v := e.Prerouting(tt.pkt.build(), tt.in); v != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, v, tt.want)
		}
		counted := e.Stats().Drop(DropInput) - before
		if (tt.want == Drop) != (counted == 1) {
			t.Errorf("%s: %d input drops counted", tt.name, counted)
		}
	}
	if DropInput.String() != "input" {
		t.Errorf("DropInput.String() = %q", DropInput.String())
	}
}

// TestWANInputAcceptDefault checks that the zero Rules accept (no policy).
func TestWANInputAcceptDefault(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	syn := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 4000, dport: 22, flags: tcpSYN}.build()
	if v := e.Prerouting(syn, wanIf); v != Accept {
		t.Fatalf("SYN to the router with InputAccept: %v, want accept", v)
	}
	if err := e.SetRules(Rules{WANInput: 9}); err == nil {
		t.Error("SetRules(WANInput: 9) = nil, want an error")
	}
}
