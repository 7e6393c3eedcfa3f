package natengine

import (
	"errors"
	"net/netip"
	"testing"
)

// TestPortMappingForwards: a mapping added at run time takes a WAN host's
// new flow to the LAN host (DNAT both ways, as a Forward), survives a
// SetRules, follows a new WAN address, and after removal new inbound
// flows are no longer translated while the open flow keeps running.
func TestPortMappingForwards(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	in := func(sport uint16) []byte {
		return pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: sport, dport: 3074, payload: []byte("x")}.build()
	}
	// Without a mapping the packet is for the router's own sockets:
	// untracked, not translated.
	p := in(4000)
	e.Prerouting(p, wanIf)
	expectAddrs(t, p, ap(remote, 4000), ap(wanAddr, 3074))
	if e.Len() != 0 {
		t.Fatalf("before the mapping: %d flows, want 0", e.Len())
	}
	if err := e.AddPortMapping(PortMapping{Proto: ProtoUDP, In: wanIf, Port: 3074, To: ap(hostA, 3075)}); err != nil {
		t.Fatalf("AddPortMapping: %v", err)
	}
	p = in(4001)
	if v := fwd(t, e, p, wanIf, lanIf); v != Accept {
		t.Fatalf("through the mapping: %v, want accept", v)
	}
	expectAddrs(t, p, ap(remote, 4001), ap(hostA, 3075))
	reply := pk{src: hostA, dst: remote, proto: ProtoUDP, sport: 3075, dport: 4001, payload: []byte("y")}.build()
	if v := fwd(t, e, reply, lanIf, wanIf); v != Accept {
		t.Fatalf("reply: %v", v)
	}
	expectAddrs(t, reply, ap(wanAddr, 3074), ap(remote, 4001))

	// A reload keeps it.
	if err := e.SetRules(testRules()); err != nil {
		t.Fatal(err)
	}
	p = in(4002)
	if v := fwd(t, e, p, wanIf, lanIf); v != Accept {
		t.Fatalf("after SetRules: %v, want accept", v)
	}
	// A new WAN address: the mapping listens there.
	newWAN := netip.MustParseAddr("203.0.113.99")
	r := testRules()
	r.Ifaces[1].Addrs = []netip.Addr{newWAN}
	if err := e.SetRules(r); err != nil {
		t.Fatal(err)
	}
	p = pk{src: remote, dst: newWAN, proto: ProtoUDP, sport: 4003, dport: 3074}.build()
	if v := fwd(t, e, p, wanIf, lanIf); v != Accept {
		t.Fatalf("on the new address: %v, want accept", v)
	}
	expectAddrs(t, p, ap(remote, 4003), ap(hostA, 3075))

	if !e.RemovePortMapping(ProtoUDP, wanIf, 3074) {
		t.Fatal("RemovePortMapping = false, want true")
	}
	if e.RemovePortMapping(ProtoUDP, wanIf, 3074) {
		t.Fatal("second RemovePortMapping = true, want false")
	}
	flows := e.Len()
	p = pk{src: remote, dst: newWAN, proto: ProtoUDP, sport: 4004, dport: 3074}.build()
	e.Prerouting(p, wanIf)
	expectAddrs(t, p, ap(remote, 4004), ap(newWAN, 3074))
	if e.Len() != flows {
		t.Fatalf("after removal, a new flow: %d flows, want %d", e.Len(), flows)
	}
	p = pk{src: remote, dst: newWAN, proto: ProtoUDP, sport: 4003, dport: 3074}.build()
	if v := fwd(t, e, p, wanIf, lanIf); v != Accept {
		t.Fatalf("after removal, open flow: %v, want accept", v)
	}
}

// TestPortMappingConflicts: a mapping is refused on a forward's, a NAT
// mapping's or a reservation's port; SNAT and reservations avoid a
// mapping's port; bad mappings are ErrInvalidPortMapping.
func TestPortMappingConflicts(t *testing.T) {
	e, _ := newTestEngine(t, 0, func(r *Rules) {
		r.Forwards = []Forward{{Proto: ProtoTCP, In: wanIf, FirstPort: 8080, LastPort: 8080, To: ap(hostB, 80)}}
	})
	if err := e.AddPortMapping(PortMapping{Proto: ProtoTCP, In: wanIf, Port: 8080, To: ap(hostA, 80)}); !errors.Is(err, ErrPortInUse) {
		t.Errorf("on a forward's port: %v, want ErrPortInUse", err)
	}
	ext := outboundUDP(t, e, hostB, 5000, remote, 53)
	if err := e.AddPortMapping(PortMapping{Proto: ProtoUDP, In: wanIf, Port: ext, To: ap(hostA, 5000)}); !errors.Is(err, ErrPortInUse) {
		t.Errorf("on a NAT mapping's port: %v, want ErrPortInUse", err)
	}
	rel, err := e.ReservePortAny(ProtoUDP, 68)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.AddPortMapping(PortMapping{Proto: ProtoUDP, In: wanIf, Port: 68, To: ap(hostA, 68)}); !errors.Is(err, ErrPortInUse) {
		t.Errorf("on a reserved port: %v, want ErrPortInUse", err)
	}
	rel()

	// SNAT does not take a mapped port: hostB's flow from 6000 gets another.
	if err := e.AddPortMapping(PortMapping{Proto: ProtoUDP, In: wanIf, Port: 6000, To: ap(hostA, 6000)}); err != nil {
		t.Fatal(err)
	}
	if got := outboundUDP(t, e, hostB, 6000, remote, 53); got == 6000 {
		t.Errorf("SNAT took the mapped port 6000")
	}
	if _, err := e.ReservePort(ProtoUDP, wanAddr, 6000); !errors.Is(err, ErrPortInUse) {
		t.Errorf("ReservePort on a mapped port: %v, want ErrPortInUse", err)
	}
	// Re-adding the same port changes the target (a renewal from the owner).
	if err := e.AddPortMapping(PortMapping{Proto: ProtoUDP, In: wanIf, Port: 6000, To: ap(hostA, 6001)}); err != nil {
		t.Errorf("re-add: %v", err)
	}
	if got := e.PortMappings(); len(got) != 1 || got[0].To != ap(hostA, 6001) {
		t.Errorf("PortMappings() = %v, want one to %v", got, ap(hostA, 6001))
	}

	for _, m := range []PortMapping{
		{Proto: ProtoICMP, In: wanIf, Port: 1, To: ap(hostA, 1)},
		{Proto: ProtoUDP, In: wanIf, Port: 0, To: ap(hostA, 1)},
		{Proto: ProtoUDP, In: wanIf, Port: 1, To: ap(host6, 1)},
		{Proto: ProtoUDP, In: wanIf, Port: 1, To: ap(hostA, 0)},
		{Proto: ProtoUDP, In: 9, Port: 1, To: ap(hostA, 1)},
	} {
		if err := e.AddPortMapping(m); !errors.Is(err, ErrInvalidPortMapping) {
			t.Errorf("AddPortMapping(%+v) = %v, want ErrInvalidPortMapping", m, err)
		}
	}
}

// TestPortMappingLookupAllocs: the new-flow lookup of a mapping does not
// allocate.
func TestPortMappingLookupAllocs(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	for p := uint16(10000); p < 10100; p++ {
		if err := e.AddPortMapping(PortMapping{Proto: ProtoTCP, In: wanIf, Port: p, To: ap(hostA, p)}); err != nil {
			t.Fatal(err)
		}
	}
	s := e.rules.Load()
	dst, _ := fromAddr(wanAddr)
	if n := testing.AllocsPerRun(1000, func() {
		if _, _, ok := e.nat.portMapped(s, ProtoTCP, &dst, 10050); !ok {
			t.Fatal("not found")
		}
	}); n != 0 {
		t.Errorf("portMapped allocates %v times, want 0", n)
	}
}

// TestPortMappingOutboundAndPeers: the mapped host's own outbound flow
// leaves from the mapped port (RFC 6887 section 11: a mapping serves both
// ways); a mapping with peers (PCP PEER) admits new flows from them only.
func TestPortMappingOutboundAndPeers(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	if err := e.AddPortMapping(PortMapping{Proto: ProtoUDP, In: wanIf, Port: 40000, To: ap(hostA, 3074)}); err != nil {
		t.Fatal(err)
	}
	if got := outboundUDP(t, e, hostA, 3074, remote, 9); got != 40000 {
		t.Errorf("outbound from the mapped endpoint left from port %d, want 40000", got)
	}
	if got := outboundUDP(t, e, hostB, 3074, remote, 9); got == 40000 {
		t.Errorf("another host's outbound flow took the mapped port")
	}

	peer := ap(remote, 5000)
	if err := e.AddPortMapping(PortMapping{Proto: ProtoTCP, In: wanIf, Port: 7000, To: ap(hostA, 7000), Peers: []netip.AddrPort{peer}}); err != nil {
		t.Fatal(err)
	}
	other := pk{src: remote2, dst: wanAddr, proto: ProtoTCP, sport: 5000, dport: 7000, flags: tcpSYN}.build()
	e.Prerouting(other, wanIf)
	expectAddrs(t, other, ap(remote2, 5000), ap(wanAddr, 7000))
	p := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 5000, dport: 7000, flags: tcpSYN}.build()
	if v := fwd(t, e, p, wanIf, lanIf); v != Accept {
		t.Fatalf("from the peer: %v", v)
	}
	expectAddrs(t, p, peer, ap(hostA, 7000))
}
