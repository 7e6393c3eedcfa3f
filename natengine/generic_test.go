package natengine

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
)

// portless lists IP protocols without ports, which the IPv6 firewall once
// let through unchecked: IPv6 in IPv4, GRE, ESP, SCTP, experimental, No
// Next Header.
var portless = []uint8{41, 47, 50, 132, 253, 59}

func gen(src, dst netip.Addr, proto uint8) []byte {
	return pk{src: src, dst: dst, proto: proto, payload: []byte("generic!")}.build()
}

// preCT runs Prerouting and returns the verdict and conntrack state.
func preCT(e *Engine, pkt []byte, in Iface) (Verdict, CTState) {
	v, st, _ := e.PreroutingCT(pkt, in, false)
	return v, st
}

func TestGenericUnsolicitedDropped(t *testing.T) {
	e, _ := newTestEngine(t, 0, func(r *Rules) {
		r.Allow6 = []Allow6{{Proto: ProtoTCP, Dst: netip.PrefixFrom(host6, 128), FirstPort: 22, LastPort: 22}}
	})
	for i, proto := range portless {
		if v := e.Prerouting(gen(remote6, host6, proto), wanIf); v != Drop {
			t.Errorf("IPv6 proto %d from WAN to a LAN host: %v, want drop", proto, v)
		}
		if v := e.Prerouting(gen(remote, hostA, proto), wanIf); v != Drop {
			t.Errorf("IPv4 proto %d from WAN to a LAN host: %v, want drop", proto, v)
		}
		if got, want := e.Stats().Drop(DropUnsolicited), uint64(2*(i+1)); got != want {
			t.Fatalf("after proto %d: unsolicited drops %d, want %d", proto, got, want)
		}
		// To the router: the engine passes it untracked as CTNew, which
		// the WAN input policy drops.
		for _, dst := range []netip.Addr{wan6, wanAddr} {
			src := remote
			if dst.Is6() {
				src = remote6
			}
			if v, st := preCT(e, gen(src, dst, proto), wanIf); v != Accept || st != CTNew {
				t.Errorf("proto %d from WAN to the router %v: %v %v, want accept, new", proto, dst, v, st)
			}
		}
	}
	if e.Len() != 0 {
		t.Fatalf("%d flows tracked for unsolicited packets", e.Len())
	}
}

func TestGenericReplyAdmitted(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	for _, proto := range portless {
		out := gen(host6, remote6, proto)
		if v := fwd(t, e, out, lanIf, wanIf); v != Accept {
			t.Fatalf("IPv6 proto %d outbound: %v", proto, v)
		}
		in := gen(remote6, host6, proto)
		if v, st := preCT(e, in, wanIf); v != Accept || st != CTEstablished {
			t.Fatalf("IPv6 proto %d reply: %v %v", proto, v, st)
		}
		// Another remote address is not the flow's.
		if v := e.Prerouting(gen(netip.MustParseAddr("2001:db8:ffff::8"), host6, proto), wanIf); v != Drop {
			t.Fatalf("IPv6 proto %d from another remote: %v", proto, v)
		}

		// IPv4 behind masquerade: address-only NAT.
		out = gen(hostA, remote, proto)
		if v := fwd(t, e, out, lanIf, wanIf); v != Accept {
			t.Fatalf("IPv4 proto %d outbound: %v", proto, v)
		}
		expectAddrs(t, out, ap(wanAddr, 0), ap(remote, 0))
		in = gen(remote, wanAddr, proto)
		if v, st := preCT(e, in, wanIf); v != Accept || st != CTEstablished {
			t.Fatalf("IPv4 proto %d reply: %v %v", proto, v, st)
		}
		mustVerify(t, in)
		expectAddrs(t, in, ap(remote, 0), ap(hostA, 0))
		if v := e.Postrouting(in, lanIf); v != Accept {
			t.Fatalf("IPv4 proto %d reply postrouting: %v", proto, v)
		}
		if v, st := preCT(e, gen(remote2, wanAddr, proto), wanIf); v != Accept || st != CTNew {
			t.Fatalf("IPv4 proto %d from another remote to the WAN address: %v %v, want accept (to the router), new", proto, v, st)
		}
	}
	sc := e.StateCounts()
	if sc.Other != 2*len(portless) || sc.Assured != 2*len(portless) {
		t.Fatalf("census: %d other flows, %d assured; want %d of each", sc.Other, sc.Assured, 2*len(portless))
	}
}

func TestGenericTimeout(t *testing.T) {
	clk := fakeclock.NewAt(baseTime)
	e := New(Config{TimeNow: clk.Now, Timeouts: Timeouts{Other: 30 * time.Second}})
	if err := e.SetRules(testRules()); err != nil {
		t.Fatal(err)
	}
	fwd(t, e, gen(host6, remote6, 47), lanIf, wanIf)
	clk.Forward(29 * time.Second)
	if v := e.Prerouting(gen(remote6, host6, 47), wanIf); v != Accept {
		t.Fatalf("reply within the timeout: %v", v)
	}
	clk.Forward(29 * time.Second) // the reply refreshed the flow
	if fl := e.Flows(); len(fl) != 1 || fl[0].Expires != time.Second {
		t.Fatalf("flows %+v, want one expiring in 1s", fl)
	}
	if v := e.Prerouting(gen(remote6, host6, 47), wanIf); v != Accept {
		t.Fatalf("reply after a refresh: %v", v)
	}
	clk.Forward(31 * time.Second)
	if v := e.Prerouting(gen(remote6, host6, 47), wanIf); v != Drop {
		t.Fatalf("reply after the timeout: %v, want drop", v)
	}
	if e.Stats().Expired.Load() != 1 || e.Len() != 0 {
		t.Fatalf("expired %d, %d flows left", e.Stats().Expired.Load(), e.Len())
	}
	// The default is Linux's generic timeout.
	if DefaultTimeouts().Other != 600*time.Second {
		t.Fatalf("default other timeout %v", DefaultTimeouts().Other)
	}
}

func TestAllow6Proto(t *testing.T) {
	gre := netip.MustParseAddr("2001:db8:1::47")
	anyHost := netip.MustParseAddr("2001:db8:1::99")
	e, _ := newTestEngine(t, 0, func(r *Rules) {
		r.Allow6 = []Allow6{
			{Proto: 47, Dst: netip.PrefixFrom(gre, 128)},
			{AnyProto: true, Dst: netip.PrefixFrom(anyHost, 128)},
			{Dst: netip.PrefixFrom(host6, 128), FirstPort: 22, LastPort: 22}, // TCP and UDP
		}
	})
	for _, tc := range []struct {
		pkt  []byte
		want Verdict
	}{
		{gen(remote6, gre, 47), Accept},
		{gen(remote6, gre, 50), Drop},
		{pk{src: remote6, dst: gre, proto: ProtoTCP, sport: 1, dport: 22, flags: tcpSYN}.build(), Drop},
		{gen(remote6, anyHost, 50), Accept},
		{gen(remote6, anyHost, 59), Accept},
		{pk{src: remote6, dst: anyHost, proto: ProtoTCP, sport: 1, dport: 443, flags: tcpSYN}.build(), Accept},
		{pk{src: remote6, dst: anyHost, proto: ProtoUDP, sport: 1, dport: 4500}.build(), Accept},
		{pk{src: remote6, dst: host6, proto: ProtoUDP, sport: 1, dport: 22}.build(), Accept},
		{pk{src: remote6, dst: host6, proto: ProtoTCP, sport: 1, dport: 23, flags: tcpSYN}.build(), Drop},
		{gen(remote6, host6, 47), Drop},
	} {
		var p Parsed
		parse(tc.pkt, &p, true)
		if v := fwd(t, e, tc.pkt, wanIf, lanIf); v != tc.want {
			t.Errorf("%v from WAN: %v, want %v", p.tuple(tc.pkt), v, tc.want)
		}
	}
	// An admitted generic flow's replies go out and its next packets in.
	if v := fwd(t, e, gen(gre, remote6, 47), lanIf, wanIf); v != Accept {
		t.Fatalf("reply to an admitted GRE flow: %v", v)
	}
	if _, st := preCT(e, gen(remote6, gre, 47), wanIf); st != CTEstablished {
		t.Fatalf("second packet of an admitted GRE flow: %v", st)
	}
}

func TestGenericNATOneHostPerRemote(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	if v := fwd(t, e, gen(hostA, remote, 47), lanIf, wanIf); v != Accept {
		t.Fatalf("host A GRE: %v", v)
	}
	// Host B to the same remote and protocol would share host A's reply
	// tuple: dropped and counted, and host A's flow is untouched.
	if v := fwd(t, e, gen(hostB, remote, 47), lanIf, wanIf); v != Drop || e.Stats().Drop(DropNATAddrTaken) != 1 {
		t.Fatalf("host B GRE to the same remote: %v, nat_addr_taken %d", v, e.Stats().Drop(DropNATAddrTaken))
	}
	if e.Len() != 1 {
		t.Fatalf("%d flows, want host A's only", e.Len())
	}
	in := gen(remote, wanAddr, 47)
	if v := fwd(t, e, in, wanIf, lanIf); v != Accept {
		t.Fatalf("reply: %v", v)
	}
	expectAddrs(t, in, ap(remote, 0), ap(hostA, 0))
	// Another remote, or another protocol, is free for host B.
	for _, pkt := range [][]byte{gen(hostB, remote2, 47), gen(hostB, remote, 50)} {
		if v := fwd(t, e, pkt, lanIf, wanIf); v != Accept {
			t.Fatalf("host B: %v", v)
		}
		if s, _ := addrs(pkt); s != ap(wanAddr, 0) {
			t.Fatalf("host B's source after NAT: %v", s)
		}
	}

	// With an SNAT pool of two addresses the second host takes the other.
	pool := []netip.Addr{netip.MustParseAddr("198.18.0.5"), netip.MustParseAddr("198.18.0.6")}
	e, _ = newTestEngine(t, 0, func(r *Rules) { r.Ifaces[1].SNAT = pool })
	a, b := gen(hostA, remote, 47), gen(hostB, remote, 47)
	if fwd(t, e, a, lanIf, wanIf) != Accept || fwd(t, e, b, lanIf, wanIf) != Accept {
		t.Fatalf("two hosts, one remote, a pool of two: drops %d", e.Stats().Drop(DropNATAddrTaken))
	}
	sa, _ := addrs(a)
	sb, _ := addrs(b)
	if sa == sb {
		t.Fatalf("both hosts appear as %v", sa)
	}
	if v := fwd(t, e, gen(netip.MustParseAddr("192.168.1.30"), remote, 47), lanIf, wanIf); v != Drop {
		t.Fatalf("a third host with both pool addresses taken: %v", v)
	}
}

func TestRouterOwnFlows(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	// A DNS query from the router's WAN address, and its answer.
	q := pk{src: wanAddr, dst: remote, proto: ProtoUDP, sport: 40000, dport: 53}.build()
	if v := e.PostroutingLocal(q, wanIf); v != Accept {
		t.Fatalf("router's query: %v", v)
	}
	expectAddrs(t, q, ap(wanAddr, 40000), ap(remote, 53))
	ans := pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: 40000}.build()
	if v, st := preCT(e, ans, wanIf); v != Accept || st != CTEstablished {
		t.Fatalf("answer to the router's query: %v %v", v, st)
	}
	expectAddrs(t, ans, ap(remote, 53), ap(wanAddr, 40000))
	for _, pkt := range [][]byte{
		pk{src: remote2, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: 40000}.build(), // another server
		pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 54, dport: 40000}.build(),  // another port
		pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: 40001}.build(),
	} {
		if v, st := preCT(e, pkt, wanIf); v != Accept || st != CTNew {
			t.Fatalf("UDP to the router that answers nothing it sent: %v %v, want accept, new", v, st)
		}
	}
	// IPv6, TCP: the SYN-ACK and later segments belong to the flow.
	syn := pk{src: wan6, dst: remote6, proto: ProtoTCP, sport: 40000, dport: 443, flags: tcpSYN}.build()
	if v := e.PostroutingLocal(syn, wanIf); v != Accept {
		t.Fatalf("router's SYN: %v", v)
	}
	sa := pk{src: remote6, dst: wan6, proto: ProtoTCP, sport: 443, dport: 40000, flags: tcpSYN | tcpACK}.build()
	if _, st := preCT(e, sa, wanIf); st != CTEstablished {
		t.Fatalf("SYN-ACK to the router's SYN: %v", st)
	}
	if v := e.PostroutingLocal(pk{src: wan6, dst: remote6, proto: ProtoTCP, sport: 40000, dport: 443, flags: tcpACK}.build(), wanIf); v != Accept {
		t.Fatalf("router's ACK: %v", v)
	}
	if fl := e.Flows(); len(fl) != 2 {
		t.Fatalf("%d flows, want the query's and the connection's", len(fl))
	}
	// Replies, RSTs, echo replies and multicast open nothing.
	for _, pkt := range [][]byte{
		pk{src: wanAddr, dst: remote2, proto: ProtoTCP, sport: 22, dport: 5555, flags: tcpSYN | tcpACK}.build(),
		pk{src: wanAddr, dst: remote2, proto: ProtoTCP, sport: 22, dport: 5555, flags: tcpRST}.build(),
		pk{src: wanAddr, dst: remote2, proto: ProtoICMP, typ: 0, sport: 7}.build(),
		pk{src: netip.MustParseAddr("fe80::2"), dst: netip.MustParseAddr("ff02::1:2"), proto: ProtoUDP, sport: 546, dport: 547}.build(),
		pk{src: wanAddr, dst: netip.MustParseAddr("255.255.255.255"), proto: ProtoUDP, sport: 68, dport: 67}.build(),
	} {
		if v := e.PostroutingLocal(pkt, wanIf); v != Accept {
			t.Fatalf("router's packet: %v", v)
		}
	}
	if e.Len() != 2 {
		t.Fatalf("%d flows, want 2", e.Len())
	}
	// ICMP to the router: echo is untracked, an error about the router's
	// flow related.
	if _, st := preCT(e, pk{src: remote2, dst: wanAddr, proto: ProtoICMP, typ: 8, sport: 9}.build(), wanIf); st != CTUntracked {
		t.Fatalf("echo request to the router: %v", st)
	}
	unreach := pk{src: remote, dst: wanAddr, proto: ProtoICMP, typ: 3, code: 3, payload: pk{src: wanAddr, dst: remote, proto: ProtoUDP, sport: 40000, dport: 53}.build()}.build()
	if v, st := preCT(e, unreach, wanIf); v != Accept || st != CTRelated {
		t.Fatalf("port unreachable about the router's query: %v %v", v, st)
	}
}

func TestIGMPUntracked(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	for _, dst := range []netip.Addr{netip.MustParseAddr("224.0.0.1"), wanAddr} {
		q := gen(netip.MustParseAddr("203.0.113.1"), dst, ProtoIGMP)
		if v, st := preCT(e, q, wanIf); v != Accept || st != CTUntracked {
			t.Fatalf("IGMP from WAN to %s: %v %v", dst, v, st)
		}
	}
	if e.Len() != 0 {
		t.Fatalf("IGMP tracked")
	}
}

// TestProtocol2ToHostsIsGeneric: protocol 2 is untracked IGMP only to a
// group or the router. To a LAN host from the WAN it is an unsolicited
// generic flow in both families (IPv6 next header 2 is not IGMP), and a
// LAN host's own protocol-2 flow out gets its reply.
func TestProtocol2ToHostsIsGeneric(t *testing.T) {
	e, _ := newTestEngine(t, 0, func(r *Rules) {
		r.Allow6 = []Allow6{{Proto: ProtoTCP, Dst: netip.PrefixFrom(host6, 128), FirstPort: 22, LastPort: 22}}
	})
	before := e.Stats().Drops[DropUnsolicited].Load()
	for _, q := range [][]byte{gen(remote, hostA, ProtoIGMP), gen(remote6, host6, ProtoIGMP)} {
		if v := e.Prerouting(q, wanIf); v != Drop {
			t.Errorf("protocol 2 from the WAN to a LAN host: %v, want Drop", v)
		}
	}
	if got := e.Stats().Drops[DropUnsolicited].Load() - before; got != 2 {
		t.Errorf("unsolicited drops rose by %d, want 2", got)
	}
	out := gen(host6, remote6, ProtoIGMP)
	if v := e.Prerouting(out, lanIf); v != Accept {
		t.Fatalf("protocol 2 out from a LAN host: %v", v)
	}
	if v := e.Postrouting(out, wanIf); v != Accept {
		t.Fatalf("protocol 2 out from a LAN host, postrouting: %v", v)
	}
	if v := e.Prerouting(gen(remote6, host6, ProtoIGMP), wanIf); v != Accept {
		t.Errorf("the reply to a LAN host's protocol-2 flow: %v, want Accept", v)
	}
}

// TestGenericKnownZeroAllocs: packets of a tracked generic flow and of the
// router's own flow cost no allocation in Prerouting, Postrouting and
// PostroutingLocal.
func TestGenericKnownZeroAllocs(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	fwd(t, e, gen(hostA, remote, 47), lanIf, wanIf)
	q := pk{src: wanAddr, dst: remote, proto: ProtoUDP, sport: 40000, dport: 53}.build()
	e.PostroutingLocal(q, wanIf)
	out, in := gen(hostA, remote, 47), gen(remote, wanAddr, 47)
	ans := pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: 40000}.build()
	o, i, a := append([]byte(nil), out...), append([]byte(nil), in...), append([]byte(nil), ans...)
	n := testing.AllocsPerRun(1000, func() {
		copy(o, out)
		copy(i, in)
		copy(a, ans)
		e.Prerouting(o, lanIf)
		e.Postrouting(o, wanIf)
		e.PreroutingCT(i, wanIf, false)
		e.PostroutingLocal(q, wanIf)
		e.PreroutingCT(a, wanIf, false)
	})
	if n != 0 {
		t.Fatalf("%v allocations per run", n)
	}
	if e.Len() != 2 {
		t.Fatalf("%d flows, want 2", e.Len())
	}
}

// TestDHCPClientPortsAdmitted: a DHCP server's answers to the router's
// client pass untracked from the WAN (fw4's Allow-DHCP-Renew and
// Allow-DHCPv6); the same ports on a LAN host do not.
func TestDHCPClientPortsAdmitted(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	ll := netip.MustParseAddr("fe80::2")
	for _, tc := range []struct {
		src, dst netip.Addr
		dport    uint16
		v        Verdict
		st       CTState
	}{
		{remote, wanAddr, 68, Accept, CTUntracked},
		{remote, netip.MustParseAddr("255.255.255.255"), 68, Accept, CTUntracked},
		{remote, wanAddr, 69, Accept, CTNew},
		{remote, hostA, 68, Drop, 0},
		{netip.MustParseAddr("fe80::1"), ll, 546, Accept, CTUntracked},
		{remote6, wan6, 546, Accept, CTNew}, // not from fc00::/6
		{netip.MustParseAddr("fe80::1"), netip.MustParseAddr("ff02::1"), 546, Accept, CTNew},
		{remote6, wan6, 547, Accept, CTNew},
		{remote6, host6, 546, Drop, 0},
	} {
		sport := uint16(67)
		if tc.src.Is6() {
			sport = 547
		}
		v, st := preCT(e, pk{src: tc.src, dst: tc.dst, proto: ProtoUDP, sport: sport, dport: tc.dport}.build(), wanIf)
		if v != tc.v || (v == Accept && st != tc.st) {
			t.Errorf("UDP %v:%d -> %v:%d from WAN: %v %v, want %v %v", tc.src, sport, tc.dst, tc.dport, v, st, tc.v, tc.st)
		}
	}
	// Not from the server port: new flows, which the input policy drops.
	for _, q := range [][]byte{
		pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 5353, dport: 68}.build(),
		pk{src: netip.MustParseAddr("fe80::1"), dst: ll, proto: ProtoUDP, sport: 5353, dport: 546}.build(),
	} {
		if v, st := preCT(e, q, wanIf); v != Accept || st != CTNew {
			t.Errorf("UDP to a DHCP client port from another port: %v %v, want a new flow", v, st)
		}
	}
	if e.Len() != 0 {
		t.Fatalf("%d flows tracked", e.Len())
	}
}

// TestLaterIPv6FragmentDataIsNotHeaders: the data of a fragment at a
// non-zero offset is parsed as data even when the Fragment header's next
// header is Destination Options and the data would be a malformed one.
func TestLaterIPv6FragmentDataIsNotHeaders(t *testing.T) {
	data := make([]byte, 16)
	data[0], data[1] = ProtoUDP, 200 // a "header" of 1608 bytes
	frag := append([]byte{60, 0, 0, 0, 0, 0, 0, 9}, data...)
	binary.BigEndian.PutUint16(frag[2:], 1480) // offset 1480, last
	pkt := pk{src: remote6, dst: host6, proto: 44, payload: frag}.build()
	var p Parsed
	if !parse(pkt, &p, true) {
		t.Fatal("parse refused a later fragment whose data looks like a bad header")
	}
	if p.Kind != KindFragment || p.FragOff != 1480 || p.FragID != 9 {
		t.Errorf("parse = kind %v offset %d id %d, want a fragment at 1480 with id 9", p.Kind, p.FragOff, p.FragID)
	}
}

// TestOwnFlowsOnlyOutOfWAN: the router's own UDP answers out of a LAN
// interface (a LAN-side DNS server's) open no flow; the same out of a wan
// interface (an upstream query) does.
func TestOwnFlowsOnlyOutOfWAN(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	for i := range 100 {
		ans := pk{src: lanAddr, dst: hostA, proto: ProtoUDP, sport: 53, dport: uint16(30000 + i)}.build()
		if v := e.PostroutingLocal(ans, lanIf); v != Accept {
			t.Fatalf("the router's answer to a LAN host: %v", v)
		}
	}
	if e.Len() != 0 {
		t.Fatalf("%d flows for the router's answers on the LAN, want 0", e.Len())
	}
	q := pk{src: wanAddr, dst: remote, proto: ProtoUDP, sport: 40000, dport: 53}.build()
	if v := e.PostroutingLocal(q, wanIf); v != Accept || e.Len() != 1 {
		t.Fatalf("the router's upstream query: %v, %d flows; want one", v, e.Len())
	}
}

// TestSpoofedSourceFromWAN: with the LAN's subnets known, a packet from
// the WAN whose source is a LAN address (here the reply direction of a
// port forward's flow, which conntrack would otherwise un-NAT back out of
// the WAN) or a router address is dropped as spoofed_source (RFC 3704);
// the real reply from the LAN and a WAN host's packets pass.
func TestSpoofedSourceFromWAN(t *testing.T) {
	e, _ := newTestEngine(t, 0, func(r *Rules) {
		r.Ifaces[0].Subnets = []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("fe80::/64")}
		r.Ifaces[1].Subnets = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
		r.Forwards = []Forward{{Proto: ProtoTCP, In: wanIf, FirstPort: 8080, LastPort: 8080, To: ap(hostB, 80)}}
	})
	syn := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 40000, dport: 8080, flags: tcpSYN}.build()
	if v := fwd(t, e, syn, wanIf, lanIf); v != Accept {
		t.Fatalf("SYN through the port forward: %v", v)
	}
	spoof := pk{src: hostB, dst: remote, proto: ProtoTCP, sport: 80, dport: 40000, flags: tcpSYN | tcpACK}.build()
	before := e.Stats().Drops[DropSpoofed].Load()
	if v := e.Prerouting(spoof, wanIf); v != Drop {
		t.Errorf("the forward's reply direction from the WAN: %v, want Drop", v)
	}
	for _, src := range []netip.Addr{wanAddr, lanAddr} {
		if v := e.Prerouting(gen(src, remote, 47), wanIf); v != Drop {
			t.Errorf("a router address %s as source from the WAN: %v, want Drop", src, v)
		}
	}
	if got := e.Stats().Drops[DropSpoofed].Load() - before; got != 3 {
		t.Errorf("spoofed_source drops rose by %d, want 3", got)
	}
	reply := pk{src: hostB, dst: remote, proto: ProtoTCP, sport: 80, dport: 40000, flags: tcpSYN | tcpACK}.build()
	if v := fwd(t, e, reply, lanIf, wanIf); v != Accept {
		t.Errorf("the real reply from the LAN: %v", v)
	}
	// A link-local source is on every link: not spoofed.
	ll := pk{src: netip.MustParseAddr("fe80::9"), dst: netip.MustParseAddr("fe80::1"), proto: ProtoUDP, sport: 547, dport: 546}.build()
	if v := e.Prerouting(ll, wanIf); v != Accept {
		t.Errorf("a link-local source from the WAN: %v", v)
	}
}
