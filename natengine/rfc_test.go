package natengine

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
)

// Checklist tests: RFC 4787 (U*), RFC 5382 (T*), RFC 5508 (I*), RFC 6888 (C*).
// Items without a test here, and why:
//   - U2 (paired pooling, RECOMMENDED): implemented (an internal address
//     prefers one pool address by hash) but not a required test item.
//   - U4 (port parity, RECOMMENDED): N/A, not implemented; port preservation
//     keeps parity whenever the port is free.
//   - U7 (internal/external address overlap): N/A in the core; routing is
//     netstack's, the engine never translates to a LAN-side address.
//   - U10, T6 (ALGs off by default): N/A, the engine has no ALGs at all.
//   - U11 (deterministic behaviour): N/A as a test; every behaviour is a
//     fixed function of the rules (filtering mode is one setting).
//   - T3 (EIF or address-dependent filtering for TCP): the TCP case of U8,
//     the same code path; TestRFC4787_U8_Filtering covers TCP too.
//   - I8 (ICMP dest-unreachable code 13 on no resources), I9-I11 (ICMP
//     policy): N/A in the core, which generates no ICMP; exhaustion is a
//     counted drop (DropNoPort / DropTableFull) the integration can answer.
//   - C1 (per-subscriber limits), C2 (port reuse hold-down), C4 (PCP),
//     C5 (logging), C6 (allocation randomness/logging): N/A, not implemented
//     (home router scope; see the report).

func TestRFC4787_U1_EndpointIndependentMapping(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	p1 := outboundUDP(t, e, hostA, 5000, remote, 53)
	p2 := outboundUDP(t, e, hostA, 5000, remote2, 1234)
	p3 := outboundUDP(t, e, hostA, 5000, remote, 54)
	if p1 != p2 || p1 != p3 {
		t.Fatalf("external ports %d, %d, %d for one internal endpoint, want equal", p1, p2, p3)
	}
	if p1 != 5000 {
		t.Errorf("external port %d, want 5000 (port preservation when free)", p1)
	}
}

func TestRFC4787_U3_NoPortOverloading(t *testing.T) {
	e, _ := newTestEngine(t, 0, func(r *Rules) {
		r.Reserved = func(proto uint8, a netip.Addr, port uint16) bool { return port == 6000 }
		r.Forwards = []Forward{{Proto: ProtoUDP, In: wanIf, FirstPort: 7000, LastPort: 7000, To: ap(hostB, 7000)}}
	})
	pa := outboundUDP(t, e, hostA, 5000, remote, 53)
	pb := outboundUDP(t, e, hostB, 5000, remote, 53)
	if pa == pb {
		t.Fatalf("two internal endpoints share external port %d", pa)
	}
	// REQ-3a: a low port maps into 1-1023.
	if pa, pb := outboundUDP(t, e, hostA, 123, remote, 123), outboundUDP(t, e, hostB, 123, remote, 123); pa == pb || pb == 0 || pb > 1023 {
		t.Fatalf("low ports mapped to %d and %d, want distinct in 1-1023", pa, pb)
	}
	// The router's own sockets and port forwards are never allocated.
	if p := outboundUDP(t, e, hostA, 6000, remote, 53); p == 6000 {
		t.Fatalf("mapped onto reserved local port 6000")
	}
	if p := outboundUDP(t, e, hostA, 7000, remote, 53); p == 7000 {
		t.Fatalf("mapped onto forwarded port 7000")
	}
}

func TestRFC4787_U5_MappingTimer(t *testing.T) {
	d := DefaultTimeouts()
	if d.UDPUnreplied < 2*time.Minute || d.UDPStream < 2*time.Minute {
		t.Fatalf("default UDP timeouts %v/%v, want >= 2 min", d.UDPUnreplied, d.UDPStream)
	}
	for _, tc := range []struct {
		name string
		to   time.Duration
	}{{"default", 0}, {"configured 5m", 5 * time.Minute}} {
		t.Run(tc.name, func(t *testing.T) {
			clk := fakeclock.NewAt(baseTime)
			e := New(Config{TimeNow: clk.Now, Timeouts: Timeouts{UDPUnreplied: tc.to}})
			if err := e.SetRules(testRules()); err != nil {
				t.Fatal(err)
			}
			want := tc.to
			if want == 0 {
				want = d.UDPUnreplied
			}
			p := outboundUDP(t, e, hostA, 5000, remote, 53)
			clk.Forward(want - time.Second)
			reply := pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: p}.build()
			if v := fwd(t, e, reply, wanIf, lanIf); v != Accept {
				t.Fatalf("reply after %v: %v, want accept", want-time.Second, v)
			}
			// The reply made it a stream; let it idle out completely.
			clk.Forward(d.UDPStream + time.Second)
			e.Sweep()
			reply = pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: p}.build()
			if v := e.Prerouting(reply, wanIf); e.Len() != 0 || v != Accept {
				t.Fatalf("after expiry: %d flows, verdict %v (want 0 flows, untracked to the local stack)", e.Len(), v)
			}
		})
	}
}

func TestRFC4787_U6_OutboundRefresh(t *testing.T) {
	e, clk := newTestEngine(t, 0, nil)
	p := outboundUDP(t, e, hostA, 5000, remote, 53)
	for i := 0; i < 5; i++ {
		clk.Forward(100 * time.Second) // < 120 s each time, > 120 s in total
		if q := outboundUDP(t, e, hostA, 5000, remote, 53); q != p {
			t.Fatalf("mapping changed %d -> %d", p, q)
		}
	}
	clk.Forward(100 * time.Second)
	reply := pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: p}.build()
	if v := fwd(t, e, reply, wanIf, lanIf); v != Accept {
		t.Fatalf("reply after outbound refreshes: %v", v)
	}
	expectAddrs(t, reply, ap(remote, 53), ap(hostA, 5000))
}

func TestRFC4787_U8_Filtering(t *testing.T) {
	for _, tc := range []struct {
		name                           string
		f                              Filtering
		samePort, otherPort, otherAddr bool
	}{
		{"address-and-port-dependent (default)", AddressAndPortDependent, true, false, false},
		{"address-dependent", AddressDependent, true, true, false},
		{"endpoint-independent", EndpointIndependent, true, true, true},
	} {
		for _, proto := range []uint8{ProtoUDP, ProtoTCP} {
			t.Run(tc.name+"/"+protoName(proto), func(t *testing.T) {
				e, _ := newTestEngine(t, 0, func(r *Rules) { r.Filtering = tc.f })
				out := pk{src: hostA, dst: remote, proto: proto, sport: 5000, dport: 53, flags: tcpSYN}.build()
				if v := fwd(t, e, out, lanIf, wanIf); v != Accept {
					t.Fatal(v)
				}
				s, _ := addrs(out)
				try := func(from netip.AddrPort, want bool) {
					t.Helper()
					in := pk{src: from.Addr(), dst: wanAddr, proto: proto, sport: from.Port(), dport: s.Port(), flags: tcpSYN | tcpACK}.build()
					if proto == ProtoTCP && from != ap(remote, 53) {
						in = pk{src: from.Addr(), dst: wanAddr, proto: proto, sport: from.Port(), dport: s.Port(), flags: tcpSYN}.build()
					}
					v := fwd(t, e, in, wanIf, lanIf)
					if got := v == Accept; got != want {
						t.Fatalf("inbound from %v: %v, want accepted=%v", from, v, want)
					}
					if want {
						expectAddrs(t, in, from, ap(hostA, 5000))
					}
				}
				try(ap(remote, 53), tc.samePort)
				try(ap(remote, 54), tc.otherPort)
				try(ap(remote2, 53), tc.otherAddr)
				if !tc.otherAddr && e.Stats().Drop(DropFiltered) == 0 {
					t.Fatalf("filtered drops not counted")
				}
			})
		}
	}
}

func TestRFC4787_U9_Hairpinning(t *testing.T) {
	e, _ := newTestEngine(t, 0, func(r *Rules) { r.Filtering = EndpointIndependent })
	pa := outboundUDP(t, e, hostA, 5000, remote, 53)
	pb := outboundUDP(t, e, hostB, 6000, remote, 53)
	// B sends to A's external endpoint; A sees B's external endpoint (REQ-9a).
	pkt := pk{src: hostB, dst: wanAddr, proto: ProtoUDP, sport: 6000, dport: pa, payload: []byte("hi")}.build()
	if v := fwd(t, e, pkt, lanIf, lanIf); v != Accept {
		t.Fatalf("hairpin: %v", v)
	}
	expectAddrs(t, pkt, ap(wanAddr, pb), ap(hostA, 5000))
	// A answers B's external endpoint.
	back := pk{src: hostA, dst: wanAddr, proto: ProtoUDP, sport: 5000, dport: pb}.build()
	if v := fwd(t, e, back, lanIf, lanIf); v != Accept {
		t.Fatalf("hairpin reply: %v", v)
	}
	expectAddrs(t, back, ap(wanAddr, pa), ap(hostB, 6000))
}

// TestRFC4787_U9_HairpinHolePunch is what P2P applications do after
// STUN: two LAN endpoints that each opened a UDP mapping send to each
// other's external endpoint. Under every filtering behaviour (the default
// address-and-port-dependent one included) both directions arrive, from
// the peer's external endpoint (REQ-9a), in either order, and nothing is
// counted as filtered; the hairpinned send is the sender's outbound
// packet to the peer's external endpoint, which its mapping then permits.
func TestRFC4787_U9_HairpinHolePunch(t *testing.T) {
	type end struct {
		host netip.Addr
		port uint16
	}
	for _, f := range []Filtering{AddressAndPortDependent, AddressDependent, EndpointIndependent} {
		for _, order := range []string{"A first", "B first"} {
			t.Run(filteringName(f)+"/"+order, func(t *testing.T) {
				e, _ := newTestEngine(t, 0, func(r *Rules) { r.Filtering = f })
				a, b := end{hostA, 5000}, end{hostB, 6000}
				// Each asks the reflector on the WAN side for its mapping.
				ea := outboundUDP(t, e, a.host, a.port, remote, 3478)
				eb := outboundUDP(t, e, b.host, b.port, remote, 3478)
				ext := map[end]uint16{a: ea, b: eb}
				first, second := a, b
				if order == "B first" {
					first, second = b, a
				}
				send := func(from, to end) {
					t.Helper()
					pkt := pk{src: from.host, dst: wanAddr, proto: ProtoUDP, sport: from.port, dport: ext[to], payload: []byte("punch")}.build()
					if v := fwd(t, e, pkt, lanIf, lanIf); v != Accept {
						t.Fatalf("%v:%d -> %v:%d (peer's external endpoint): %v, want accept (filtered drops %d)",
							from.host, from.port, wanAddr, ext[to], v, e.Stats().Drop(DropFiltered))
					}
					expectAddrs(t, pkt, ap(wanAddr, ext[from]), ap(to.host, to.port))
				}
				send(first, second)
				if !permits(e, first.host, first.port, ap(wanAddr, ext[second])) {
					t.Errorf("after the hairpinned send, %v:%d's mapping does not list %v:%d as a destination it sent to",
						first.host, first.port, wanAddr, ext[second])
				}
				send(second, first)
				send(first, second)
				send(second, first)
				if n := e.Stats().Drop(DropFiltered); n != 0 {
					t.Errorf("filtered drops %d, want 0", n)
				}
				// The outside still meets the filter: a host the
				// mappings never sent to, on the reflector's port.
				in := pk{src: remote2, dst: wanAddr, proto: ProtoUDP, sport: 3478, dport: ea}.build()
				v := fwd(t, e, in, wanIf, lanIf)
				if want := f == EndpointIndependent; (v == Accept) != want {
					t.Fatalf("from %v:3478 on the WAN to %v:%d: %v, want accepted=%v", remote2, wanAddr, ea, v, want)
				}
			})
		}
	}
}

// permits reports whether the mapping of internal endpoint host:port
// has a flow whose far end, as the mapping's filter sees it, is to.
func permits(e *Engine, host netip.Addr, port uint16, to netip.AddrPort) bool {
	n := e.nat
	n.mu.Lock()
	defer n.mu.Unlock()
	h, _ := fromAddr(host)
	want, _ := fromAddr(to.Addr())
	for _, m := range n.byInt {
		if m.ik.addr != h || m.ik.port != port || m.ik.proto != ProtoUDP {
			continue
		}
		for c := m.conns; c != nil; c = c.mapNext {
			if ra, rp := c.remote(); ra == want && rp == to.Port() {
				return true
			}
		}
	}
	return false
}

func filteringName(f Filtering) string {
	switch f {
	case AddressAndPortDependent:
		return "address-and-port-dependent"
	case AddressDependent:
		return "address-dependent"
	}
	return "endpoint-independent"
}

func TestRFC4787_U12_ICMPErrorKeepsMapping(t *testing.T) {
	e, clk := newTestEngine(t, 0, nil)
	p := outboundUDP(t, e, hostA, 5000, remote, 53)
	sent := pk{src: wanAddr, dst: remote, proto: ProtoUDP, sport: p, dport: 53, payload: []byte("hello")}.build()
	before := e.Flows()[0].Expires
	clk.Forward(10 * time.Second)
	for _, code := range []uint8{1, 3} { // host and port unreachable
		icmp := pk{src: remote, dst: wanAddr, proto: ProtoICMP, typ: 3, code: code, payload: sent}.build()
		if v := fwd(t, e, icmp, wanIf, lanIf); v != Accept {
			t.Fatalf("ICMP 3/%d: %v", code, v)
		}
		expectAddrs(t, icmp, ap(remote, 0), ap(hostA, 0))
	}
	fl := e.Flows()
	if len(fl) != 1 || fl[0].Expires != before-10*time.Second {
		t.Fatalf("flows after ICMP errors: %+v, want the flow, not refreshed (expires %v)", fl, before-10*time.Second)
	}
	if q := outboundUDP(t, e, hostA, 5000, remote, 53); q != p {
		t.Fatalf("mapping changed after ICMP error: %d -> %d", p, q)
	}
}

func TestRFC4787_U13_DFTooBigGoesToSlowPath(t *testing.T) {
	// The fast path never forwards a packet larger than the egress MTU: it
	// hands it back and netstack's slow path sends "fragmentation needed"
	// (DF=1) or fragments it. The slow path keeps the packet unchanged.
	e, clk, f := offloadedUDP(t)
	_ = clk
	big := pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: f.ext, df: true, payload: make([]byte, 1600)}.build()
	frame := eth(macRtrW, macGw, big)
	orig := append([]byte(nil), frame...)
	if _, ok := e.FastPath(frame, wanIf); ok {
		t.Fatalf("fast path forwarded a %d-byte packet over MTU %d", len(big), testMTU)
	}
	if string(frame) != string(orig) {
		t.Fatalf("hand-back modified the frame")
	}
	if e.Stats().Slow[SlowMTU].Load() != 1 {
		t.Fatalf("SlowMTU = %d, want 1", e.Stats().Slow[SlowMTU].Load())
	}
}

func TestRFC4787_U14_OutOfOrderFragments(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	payload := make([]byte, 3000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	whole := pk{src: hostA, dst: remote, proto: ProtoUDP, sport: 5000, dport: 9000, id: 4242, payload: payload}.build()
	frags := fragment4(whole, 1000)
	if len(frags) != 4 {
		t.Fatalf("%d fragments", len(frags))
	}
	// Last, then middle ones, then the first: held until the first comes.
	var out [][]byte
	for _, i := range []int{3, 1, 2} {
		if v := e.Prerouting(frags[i], lanIf); v != Stolen {
			t.Fatalf("fragment %d before the first: %v, want stolen", i, v)
		}
	}
	if v := e.Prerouting(frags[0], lanIf); v != Accept {
		t.Fatalf("first fragment: %v", v)
	}
	if v := e.Postrouting(frags[0], wanIf); v != Accept {
		t.Fatalf("first fragment postrouting: %v", v)
	}
	out = append(out, frags[0])
	e.DrainHeld(func(pkt []byte, in Iface) {
		if v := e.Postrouting(pkt, wanIf); v != Accept {
			t.Fatalf("released fragment postrouting: %v", v)
		}
		out = append(out, pkt)
	})
	if len(out) != 4 {
		t.Fatalf("%d fragments out, want 4", len(out))
	}
	re := reassemble4(t, out)
	mustVerify(t, re)
	expectAddrs(t, re, ap(wanAddr, 5000), ap(remote, 9000))

	// The reply, fragmented, in order, is translated back.
	reply := pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 9000, dport: 5000, id: 99, payload: payload}.build()
	var back [][]byte
	for i, f := range fragment4(reply, 1200) {
		if v := fwd(t, e, f, wanIf, lanIf); v != Accept {
			t.Fatalf("reply fragment %d: %v", i, v)
		}
		back = append(back, f)
	}
	re = reassemble4(t, back)
	mustVerify(t, re)
	expectAddrs(t, re, ap(remote, 9000), ap(hostA, 5000))
}

func TestRFC5382_T1_EndpointIndependentMapping(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	var ports []uint16
	for _, dst := range []netip.AddrPort{ap(remote, 80), ap(remote2, 443), ap(remote, 22)} {
		syn := pk{src: hostA, dst: dst.Addr(), proto: ProtoTCP, sport: 40000, dport: dst.Port(), flags: tcpSYN}.build()
		if v := fwd(t, e, syn, lanIf, wanIf); v != Accept {
			t.Fatal(v)
		}
		s, _ := addrs(syn)
		ports = append(ports, s.Port())
	}
	if ports[0] != ports[1] || ports[1] != ports[2] {
		t.Fatalf("external ports %v, want one", ports)
	}
}

func TestRFC5382_T2_SimultaneousOpenAndStates(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	out := func(flags uint8) {
		t.Helper()
		p := pk{src: hostA, dst: remote, proto: ProtoTCP, sport: 40000, dport: 80, flags: flags}.build()
		if v := fwd(t, e, p, lanIf, wanIf); v != Accept {
			t.Fatalf("outbound %#x: %v", flags, v)
		}
		expectAddrs(t, p, ap(wanAddr, 40000), ap(remote, 80))
	}
	in := func(flags uint8) {
		t.Helper()
		p := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: 40000, flags: flags}.build()
		if v := fwd(t, e, p, wanIf, lanIf); v != Accept {
			t.Fatalf("inbound %#x: %v", flags, v)
		}
		expectAddrs(t, p, ap(remote, 80), ap(hostA, 40000))
	}
	state := func(want TCPState) {
		t.Helper()
		if got := e.Flows()[0].TCPState; got != want {
			t.Fatalf("state %v, want %v", got, want)
		}
	}
	// Simultaneous open: SYN out, SYN in, SYN-ACK both ways, ACK.
	out(tcpSYN)
	state(TCPSynSent)
	in(tcpSYN)
	state(TCPSynSent2)
	in(tcpSYN | tcpACK)
	state(TCPSynRecv)
	out(tcpSYN | tcpACK)
	out(tcpACK)
	state(TCPEstablished)
	if !e.Flows()[0].Assured {
		t.Fatalf("not assured after the handshake")
	}
	// Close: FIN out, ACK in, FIN in, ACK out.
	out(tcpFIN | tcpACK)
	state(TCPFinWait)
	in(tcpACK)
	state(TCPCloseWait)
	in(tcpFIN | tcpACK)
	state(TCPLastAck)
	out(tcpACK)
	state(TCPTimeWait)
	// A new SYN reuses the tuple; RST closes.
	out(tcpSYN)
	state(TCPSynSent)
	in(tcpRST | tcpACK)
	state(TCPClose)
}

func TestRFC5382_T4_UnsolicitedSYN(t *testing.T) {
	// Unsolicited inbound SYNs to a mapped port are dropped silently and
	// counted (no flow, no reply); the SHOULD-send ICMP port unreachable
	// after 6 s is not implemented. Once the inside host sends its own SYN
	// to that endpoint, the peer's SYN passes (simultaneous open).
	e, _ := newTestEngine(t, 0, nil)
	syn := pk{src: hostA, dst: remote, proto: ProtoTCP, sport: 40000, dport: 80, flags: tcpSYN}.build()
	fwd(t, e, syn, lanIf, wanIf)
	usyn := pk{src: remote2, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: 40000, flags: tcpSYN}.build()
	if v := fwd(t, e, usyn, wanIf, lanIf); v != Drop {
		t.Fatalf("unsolicited SYN: %v, want drop", v)
	}
	if e.Len() != 1 || e.Stats().Drop(DropFiltered) != 1 {
		t.Fatalf("flows %d, filtered drops %d; want 1, 1", e.Len(), e.Stats().Drop(DropFiltered))
	}
	syn2 := pk{src: hostA, dst: remote2, proto: ProtoTCP, sport: 40000, dport: 80, flags: tcpSYN}.build()
	fwd(t, e, syn2, lanIf, wanIf)
	usyn = pk{src: remote2, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: 40000, flags: tcpSYN}.build()
	if v := fwd(t, e, usyn, wanIf, lanIf); v != Accept {
		t.Fatalf("SYN after outbound SYN: %v, want accept", v)
	}
	// To a non-mapped, non-forwarded port a SYN goes to the router's own
	// stack (which answers for its own sockets).
	other := pk{src: remote2, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: 23, flags: tcpSYN}.build()
	if v := e.Prerouting(other, wanIf); v != Accept || e.Len() != 2 {
		t.Fatalf("SYN to an unmapped port: %v with %d flows, want local delivery, no flow", v, e.Len())
	}
	// To a LAN address directly (no NAT), dropped and counted.
	direct := pk{src: remote2, dst: hostA, proto: ProtoTCP, sport: 80, dport: 22, flags: tcpSYN}.build()
	if v := e.Prerouting(direct, wanIf); v != Drop || e.Stats().Drop(DropUnsolicited) != 1 {
		t.Fatalf("SYN to a LAN address: %v, want drop counted", v)
	}
}

func TestRFC5382_T5_Timeouts(t *testing.T) {
	d := DefaultTimeouts()
	if d.TCPEstablished < 2*time.Hour+4*time.Minute || d.TCPTransitory < 4*time.Minute {
		t.Fatalf("defaults %v/%v", d.TCPEstablished, d.TCPTransitory)
	}
	e, clk := newTestEngine(t, 0, nil)
	est := establishTCP(t, e, hostA, 40000, remote, 80)
	half := pk{src: hostA, dst: remote2, proto: ProtoTCP, sport: 40001, dport: 80, flags: tcpSYN}.build()
	fwd(t, e, half, lanIf, wanIf)
	clk.Forward(4*time.Minute - time.Second)
	if n := e.Sweep(); n != 0 {
		t.Fatalf("swept %d flows before the transitory timeout", n)
	}
	clk.Forward(2 * time.Second)
	if n := e.Sweep(); n != 1 {
		t.Fatalf("swept %d flows after the transitory timeout, want 1", n)
	}
	clk.Forward(2*time.Hour + 4*time.Minute - 4*time.Minute - 2*time.Second)
	if n := e.Sweep(); n != 0 {
		t.Fatalf("established flow gone before 2h4m idle")
	}
	in := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: est, flags: tcpACK}.build()
	if v := fwd(t, e, in, wanIf, lanIf); v != Accept {
		t.Fatalf("established flow after 2h3m59s idle: %v", v)
	}
	clk.Forward(2*time.Hour + 4*time.Minute + time.Second)
	if n := e.Sweep(); n != 1 || e.Len() != 0 {
		t.Fatalf("swept %d, %d left; want the established flow gone", n, e.Len())
	}
}

func TestRFC5382_T7_NoPortOverloading(t *testing.T) {
	// Every port but 5000 and 5001 is taken by the router: the third
	// internal endpoint gets no mapping (counted) instead of sharing one.
	e, _ := newTestEngine(t, 0, func(r *Rules) {
		r.Reserved = func(proto uint8, a netip.Addr, port uint16) bool { return port != 5000 && port != 5001 }
	})
	var ext []uint16
	for _, h := range []netip.Addr{hostA, hostB} {
		syn := pk{src: h, dst: remote, proto: ProtoTCP, sport: 5000, dport: 80, flags: tcpSYN}.build()
		if v := fwd(t, e, syn, lanIf, wanIf); v != Accept {
			t.Fatalf("%v: %v", h, v)
		}
		s, _ := addrs(syn)
		ext = append(ext, s.Port())
	}
	if ext[0] == ext[1] {
		t.Fatalf("both hosts got port %d", ext[0])
	}
	third := pk{src: netip.MustParseAddr("192.168.1.30"), dst: remote, proto: ProtoTCP, sport: 5000, dport: 80, flags: tcpSYN}.build()
	if v := fwd(t, e, third, lanIf, wanIf); v != Drop || e.Stats().Drop(DropNoPort) != 1 {
		t.Fatalf("third host: %v, no_port drops %d; want drop counted", v, e.Stats().Drop(DropNoPort))
	}
	if e.Len() != 2 {
		t.Fatalf("%d flows, want 2", e.Len())
	}
}

func TestRFC5382_T8_Hairpinning(t *testing.T) {
	e, _ := newTestEngine(t, 0, func(r *Rules) {
		r.Forwards = []Forward{{Proto: ProtoTCP, In: wanIf, FirstPort: 8080, LastPort: 8080, To: ap(hostA, 80)}}
	})
	pb := func() uint16 { // B's mapping, created by an outbound flow
		syn := pk{src: hostB, dst: remote, proto: ProtoTCP, sport: 50000, dport: 80, flags: tcpSYN}.build()
		fwd(t, e, syn, lanIf, wanIf)
		s, _ := addrs(syn)
		return s.Port()
	}()
	syn := pk{src: hostB, dst: wanAddr, proto: ProtoTCP, sport: 50000, dport: 8080, flags: tcpSYN}.build()
	if v := fwd(t, e, syn, lanIf, lanIf); v != Accept {
		t.Fatalf("hairpin SYN: %v", v)
	}
	expectAddrs(t, syn, ap(wanAddr, pb), ap(hostA, 80))
	sa := pk{src: hostA, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: pb, flags: tcpSYN | tcpACK}.build()
	if v := fwd(t, e, sa, lanIf, lanIf); v != Accept {
		t.Fatalf("hairpin SYN-ACK: %v", v)
	}
	expectAddrs(t, sa, ap(wanAddr, 8080), ap(hostB, 50000))
}

func TestRFC5382_T9_ICMPDestUnreachableTranslated(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	syn := pk{src: hostA, dst: remote, proto: ProtoTCP, sport: 40000, dport: 80, flags: tcpSYN}.build()
	fwd(t, e, syn, lanIf, wanIf)
	hop := netip.MustParseAddr("198.51.100.1")    // an intermediate router
	for _, emb := range [][]byte{syn, syn[:28]} { // whole segment, and IP header + 8 bytes
		icmp := pk{src: hop, dst: wanAddr, proto: ProtoICMP, typ: 3, code: 1, payload: append([]byte(nil), emb...)}.build()
		if v := fwd(t, e, icmp, wanIf, lanIf); v != Accept {
			t.Fatalf("ICMP: %v", v)
		}
		expectAddrs(t, icmp, ap(hop, 0), ap(hostA, 0))
		expectAddrs(t, icmp[28:], ap(hostA, 40000), ap(remote, 80))
	}
}

func TestRFC5382_T10_ICMPDoesNotKillConnection(t *testing.T) {
	e, clk := newTestEngine(t, 0, nil)
	ext := establishTCP(t, e, hostA, 40000, remote, 80)
	sent := pk{src: wanAddr, dst: remote, proto: ProtoTCP, sport: ext, dport: 80, flags: tcpRST}.build()
	before := e.Flows()[0]
	clk.Forward(time.Second)
	for _, tc := range [][2]uint8{{3, 1}, {3, 3}, {11, 0}, {12, 0}} {
		icmp := pk{src: remote, dst: wanAddr, proto: ProtoICMP, typ: tc[0], code: tc[1], payload: sent}.build()
		if v := fwd(t, e, icmp, wanIf, lanIf); v != Accept {
			t.Fatalf("ICMP %d/%d: %v", tc[0], tc[1], v)
		}
	}
	after := e.Flows()[0]
	if after.TCPState != TCPEstablished || after.Expires != before.Expires-time.Second || e.Len() != 1 {
		t.Fatalf("after ICMP errors: %+v (before %+v)", after, before)
	}
}

func TestRFC5508_I1_ICMPQuery(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	var ids []uint16
	for _, h := range []netip.Addr{hostA, hostB} {
		req := pk{src: h, dst: remote, proto: ProtoICMP, typ: 8, sport: 77}.build()
		if v := fwd(t, e, req, lanIf, wanIf); v != Accept {
			t.Fatal(v)
		}
		s, _ := addrs(req)
		ids = append(ids, s.Port())
	}
	if ids[0] == ids[1] {
		t.Fatalf("two hosts share ICMP id %d", ids[0])
	}
	for i, h := range []netip.Addr{hostA, hostB} {
		rep := pk{src: remote, dst: wanAddr, proto: ProtoICMP, typ: 0, sport: ids[i]}.build()
		if v := fwd(t, e, rep, wanIf, lanIf); v != Accept {
			t.Fatal(v)
		}
		expectAddrs(t, rep, ap(remote, 77), ap(h, 77))
	}
	// A reply with no session is dropped; an inbound request is the router's.
	stray := pk{src: remote, dst: hostA, proto: ProtoICMP, typ: 0, sport: 5}.build()
	if v := e.Prerouting(stray, wanIf); v != Drop {
		t.Fatalf("stray echo reply: %v", v)
	}
}

func TestRFC5508_I2_QueryTimer(t *testing.T) {
	if DefaultTimeouts().ICMPQuery < 60*time.Second {
		t.Fatal("ICMP query timeout < 60 s")
	}
	e, clk := newTestEngine(t, 0, nil)
	req := pk{src: hostA, dst: remote, proto: ProtoICMP, typ: 8, sport: 77}.build()
	fwd(t, e, req, lanIf, wanIf)
	s, _ := addrs(req)
	clk.Forward(59 * time.Second)
	e.Sweep()
	rep := pk{src: remote, dst: wanAddr, proto: ProtoICMP, typ: 0, sport: s.Port()}.build()
	if v := fwd(t, e, rep, wanIf, lanIf); v != Accept {
		t.Fatalf("reply after 59 s: %v", v)
	}
	clk.Forward(61 * time.Second)
	if n := e.Sweep(); n != 1 {
		t.Fatalf("swept %d after 61 s idle, want 1", n)
	}
}

func TestRFC5508_I3_BadICMPChecksumDropped(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	p := outboundUDP(t, e, hostA, 5000, remote, 53)
	sent := pk{src: wanAddr, dst: remote, proto: ProtoUDP, sport: p, dport: 53}.build()
	icmp := pk{src: remote, dst: wanAddr, proto: ProtoICMP, typ: 3, code: 3, payload: sent}.build()
	icmp[22] ^= 0x55 // corrupt the ICMP checksum
	if v := e.Prerouting(icmp, wanIf); v != Drop || e.Stats().Drop(DropICMPChecksum) != 1 {
		t.Fatalf("bad checksum: %v, counter %d", v, e.Stats().Drop(DropICMPChecksum))
	}
}

func TestRFC5508_I4I5_ErrorTranslation(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	p := outboundUDP(t, e, hostA, 5000, remote, 53)
	// I4: from outside, about the translated outbound packet.
	sent := pk{src: wanAddr, dst: remote, proto: ProtoUDP, sport: p, dport: 53, payload: []byte("hello")}.build()
	icmp := pk{src: remote, dst: wanAddr, proto: ProtoICMP, typ: 3, code: 3, payload: sent}.build()
	if v := fwd(t, e, icmp, wanIf, lanIf); v != Accept {
		t.Fatal(v)
	}
	expectAddrs(t, icmp, ap(remote, 0), ap(hostA, 0))
	expectAddrs(t, icmp[28:], ap(hostA, 5000), ap(remote, 53))
	// I5: from inside, about the translated inbound reply.
	got := pk{src: remote, dst: hostA, proto: ProtoUDP, sport: 53, dport: 5000, payload: []byte("x")}.build()
	icmp = pk{src: hostA, dst: remote, proto: ProtoICMP, typ: 3, code: 3, payload: got}.build()
	if v := fwd(t, e, icmp, lanIf, wanIf); v != Accept {
		t.Fatal(v)
	}
	expectAddrs(t, icmp, ap(wanAddr, 0), ap(remote, 0))
	expectAddrs(t, icmp[28:], ap(remote, 53), ap(wanAddr, p))
	// No mapping for the embedded packet: dropped (forwarded) and counted.
	unknown := pk{src: hostB, dst: remote, proto: ProtoUDP, sport: 1, dport: 2}.build()
	icmp = pk{src: hostB, dst: remote, proto: ProtoICMP, typ: 3, code: 3, payload: unknown}.build()
	if v := e.Prerouting(icmp, lanIf); v != Drop || e.Stats().Drop(DropICMPNoConn) != 1 {
		t.Fatalf("error without a flow: %v", v)
	}
	if e.Stats().ICMPTranslated.Load() != 2 {
		t.Fatalf("translated %d, want 2", e.Stats().ICMPTranslated.Load())
	}
}

func TestRFC5508_I6_ErrorDoesNotRefreshQuery(t *testing.T) {
	e, clk := newTestEngine(t, 0, nil)
	req := pk{src: hostA, dst: remote, proto: ProtoICMP, typ: 8, sport: 77}.build()
	fwd(t, e, req, lanIf, wanIf)
	emb := append([]byte(nil), req...)
	before := e.Flows()[0].Expires
	clk.Forward(30 * time.Second)
	icmp := pk{src: netip.MustParseAddr("198.51.100.1"), dst: wanAddr, proto: ProtoICMP, typ: 11, payload: emb}.build()
	if v := fwd(t, e, icmp, wanIf, lanIf); v != Accept {
		t.Fatal(v)
	}
	expectAddrs(t, icmp[28:], ap(hostA, 77), ap(remote, 77))
	if got := e.Flows()[0].Expires; got != before-30*time.Second {
		t.Fatalf("error refreshed the session: expires %v, want %v", got, before-30*time.Second)
	}
	clk.Forward(31 * time.Second)
	if e.Sweep() != 1 {
		t.Fatalf("session not expired 61 s after the request")
	}
}

func TestRFC5508_I7_HairpinnedICMPError(t *testing.T) {
	e, _ := newTestEngine(t, 0, func(r *Rules) {
		r.Forwards = []Forward{{Proto: ProtoUDP, In: wanIf, FirstPort: 8080, LastPort: 8080, To: ap(hostA, 80)}}
	})
	q := pk{src: hostB, dst: wanAddr, proto: ProtoUDP, sport: 50000, dport: 8080, payload: []byte("q")}.build()
	if v := fwd(t, e, q, lanIf, lanIf); v != Accept {
		t.Fatal(v)
	}
	hb, _ := addrs(q) // B as A sees it
	icmp := pk{src: hostA, dst: hb.Addr(), proto: ProtoICMP, typ: 3, code: 3, payload: q}.build()
	if v := fwd(t, e, icmp, lanIf, lanIf); v != Accept {
		t.Fatal(v)
	}
	expectAddrs(t, icmp, ap(wanAddr, 0), ap(hostB, 0))
	expectAddrs(t, icmp[28:], ap(hostB, 50000), ap(wanAddr, 8080))
}

func TestRFC6888_C3_ExhaustionNeverEvictsAssured(t *testing.T) {
	// RFC 6888 REQ-11: on exhaustion drop the new flow, never delete an
	// existing mapping. Assured flows are never evicted; unassured ones may
	// be early-dropped as Linux does (TestConntrackFlood).
	const max = 16
	e, clk := newTestEngine(t, max, nil)
	for i := 0; i < max; i++ {
		establishTCP(t, e, hostA, uint16(40000+i), remote, 80)
	}
	clk.Forward(time.Second)
	for i := 0; i < 100; i++ {
		syn := pk{src: hostB, dst: remote, proto: ProtoTCP, sport: uint16(1000 + i), dport: 80, flags: tcpSYN}.build()
		if v := fwd(t, e, syn, lanIf, wanIf); v != Drop {
			t.Fatalf("new flow %d with a full table: %v", i, v)
		}
	}
	sc := e.StateCounts()
	if sc.Total != max || sc.Assured != max || e.Stats().Drop(DropTableFull) != 100 || e.Stats().EarlyDropped.Load() != 0 {
		t.Fatalf("census %+v, table_full %d, early drops %d", sc, e.Stats().Drop(DropTableFull), e.Stats().EarlyDropped.Load())
	}
}

// TestRFC4787_U14_FragmentedICMP: a fragmented echo request (ping -s 3000)
// goes out with its identifier translated in the first fragment and the
// source address in all; the fragmented reply comes back.
func TestRFC4787_U14_FragmentedICMP(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	// Another host holds id 77 first, so hostA's id is changed.
	fwd(t, e, pk{src: hostB, dst: remote, proto: ProtoICMP, typ: 8, sport: 77}.build(), lanIf, wanIf)
	req := pk{src: hostA, dst: remote, proto: ProtoICMP, typ: 8, sport: 77, id: 5, payload: make([]byte, 3000)}.build()
	frags := fragment4(req, 1480)
	// Out of order: the last fragment first.
	if v := e.Prerouting(frags[2], lanIf); v != Stolen {
		t.Fatalf("last fragment first: %v", v)
	}
	var out [][]byte
	for _, f := range frags[:2] {
		if v := fwd(t, e, f, lanIf, wanIf); v != Accept {
			t.Fatal(v)
		}
		out = append(out, f)
	}
	e.DrainHeld(func(p []byte, in Iface) {
		if v := e.Postrouting(p, wanIf); v != Accept {
			t.Fatal(v)
		}
		out = append(out, p)
	})
	re := reassemble4(t, out)
	mustVerify(t, re)
	s, _ := addrs(re)
	if s.Addr() != wanAddr || s.Port() == 77 {
		t.Fatalf("reassembled request from %v, want %v with a new id", s, wanAddr)
	}
	rep := pk{src: remote, dst: wanAddr, proto: ProtoICMP, typ: 0, sport: s.Port(), id: 9, payload: make([]byte, 3000)}.build()
	var back [][]byte
	for _, f := range fragment4(rep, 1480) {
		if v := fwd(t, e, f, wanIf, lanIf); v != Accept {
			t.Fatal(v)
		}
		back = append(back, f)
	}
	re = reassemble4(t, back)
	mustVerify(t, re)
	expectAddrs(t, re, ap(remote, 77), ap(hostA, 77))
}
