package stack

import (
	"encoding/binary"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// FuzzRouter's seeds: the packet shapes the router must survive (expiring
// TTLs, IPv4 options, IPv6 extension header chains, fragments, NAT'd flows,
// ICMP errors, GRO and GSO frames), each in a frame netstack must forward
// or deliver. The long-header-chain crashers are in
// testdata/fuzz/FuzzRouter (written by routerCrashSeeds); they panicked
// netstack until the forward guard (fwdguard.go).

// fzRec is one frame of a FuzzRouter input.
func fzRec(ctl byte, payload []byte) []byte {
	b := []byte{ctl, 0, 0}
	binary.BigEndian.PutUint16(b[1:], uint16(len(payload)))
	return append(b, payload...)
}

func fzInput(recs ...[]byte) []byte {
	var b []byte
	for _, r := range recs {
		b = append(b, r...)
	}
	return b
}

// extHdr is one IPv6 extension header (RFC 8200 section 4): its identifier
// and its octets after the Next Header octet.
type extHdr struct {
	id   uint8
	rest []byte
}

// optsHdr is a Hop-by-Hop (0) or Destination Options (60) header with the
// given options, padded to a multiple of 8 octets (RFC 8200 section 4.2).
func optsHdr(id uint8, opts ...[]byte) extHdr {
	b := []byte{0}
	for _, o := range opts {
		b = append(b, o...)
	}
	switch pad := (8 - (len(b)+1)%8) % 8; pad {
	case 0:
	case 1:
		b = append(b, 0) // Pad1
	default:
		b = append(b, padN(pad)...)
	}
	b[0] = byte((len(b)+1)/8 - 1)
	return extHdr{id, b}
}

// padN is a PadN option of n octets in all (n >= 2).
func padN(n int) []byte {
	o := make([]byte, n)
	o[0], o[1] = 1, byte(n-2)
	return o
}

// routingHdr is a Routing header of type typ (0 and 2: RFC 8200 4.4 and
// RFC 6275 6.4; 4: the Segment Routing header, RFC 8754) listing addrs.
func routingHdr(typ, segLeft uint8, addrs ...netip.Addr) extHdr {
	b := []byte{byte(2 * len(addrs)), typ, segLeft, 0, 0, 0, 0}
	if typ == 4 {
		b[3] = byte(len(addrs) - 1) // last entry; flags and tag stay 0
	}
	for _, a := range addrs {
		s := a.As16()
		b = append(b, s[:]...)
	}
	return extHdr{43, b}
}

// fragHdr is a Fragment header (RFC 8200 section 4.5); off is in octets.
func fragHdr(off int, more bool, id uint32) extHdr {
	b := make([]byte, 7)
	v := uint16(off) &^ 7
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(b[1:], v)
	binary.BigEndian.PutUint32(b[3:], id)
	return extHdr{44, b}
}

// ipv6Chain builds an IPv6 packet with extension headers exts, then an
// upper-layer message of protocol proto whose checksum it fills in
// (computed as if unfragmented).
func ipv6Chain(src, dst netip.Addr, hop uint8, proto tcpip.TransportProtocolNumber, l4 []byte, exts ...extHdr) []byte {
	var chain []byte
	next := uint8(proto)
	for i := len(exts) - 1; i >= 0; i-- {
		h := append([]byte{next}, exts[i].rest...)
		chain = append(h, chain...)
		next = exts[i].id
	}
	l4 = append([]byte(nil), l4...)
	s, d := src.As16(), dst.As16()
	if proto == header.ICMPv6ProtocolNumber {
		binary.BigEndian.PutUint16(l4[2:], 0)
		binary.BigEndian.PutUint16(l4[2:], ^checksum.Checksum(l4, pseudoHeaderSum(s[:], d[:], uint8(proto), len(l4))))
	} else {
		setL4Checksum(s[:], d[:], uint8(proto), l4)
	}
	p := ipv6Packet(src, dst, hop, 253, append(chain, l4...))
	p[6] = next
	return p
}

// ipv4Opts builds an IPv4 packet with options opts (padded with End of
// Option List to a multiple of 4 octets, RFC 791).
func ipv4Opts(src, dst netip.Addr, ttl uint8, proto tcpip.TransportProtocolNumber, l4 []byte, opts []byte) []byte {
	opts = append([]byte(nil), opts...)
	for len(opts)%4 != 0 {
		opts = append(opts, 0)
	}
	base := ipv4Packet(src, dst, ttl, proto, l4)
	p := append(append(append([]byte(nil), base[:20]...), opts...), base[20:]...)
	h := header.IPv4(p)
	h.SetHeaderLength(uint8(20 + len(opts)))
	h.SetTotalLength(uint16(len(p)))
	h.SetChecksum(0)
	h.SetChecksum(^h.CalculateChecksum())
	return p
}

// ipv4Frag is ipv4Packet as the fragment at octet off (more: MF set) of a
// datagram with identification id; the L4 checksum is left as given.
func ipv4Frag(src, dst netip.Addr, proto tcpip.TransportProtocolNumber, id uint16, off int, more bool, data []byte) []byte {
	p := ipv4Packet(src, dst, 64, 0, data)
	h := header.IPv4(p)
	h.SetID(id)
	p[9] = uint8(proto)
	flags := uint16(off / 8)
	if more {
		flags |= 0x2000
	}
	binary.BigEndian.PutUint16(p[6:], flags)
	h.SetChecksum(0)
	h.SetChecksum(^h.CalculateChecksum())
	return p
}

// tcpSeg is a TCP segment with flags, sequence and ack numbers, options
// (a multiple of 4 octets) and payload; its checksum is filled in by the
// packet builders.
func tcpSeg(src, dst uint16, flags header.TCPFlags, seq, ack uint32, opts, payload []byte) []byte {
	b := make([]byte, header.TCPMinimumSize+len(opts)+len(payload))
	header.TCP(b).Encode(&header.TCPFields{SrcPort: src, DstPort: dst, SeqNum: seq, AckNum: ack, DataOffset: uint8(header.TCPMinimumSize + len(opts)), Flags: flags, WindowSize: 65535})
	copy(b[header.TCPMinimumSize:], opts)
	copy(b[header.TCPMinimumSize+len(opts):], payload)
	return b
}

// icmpErr4 is an ICMP error of type typ and code quoting orig (RFC 792).
func icmpErr4(typ, code uint8, orig []byte) []byte {
	m := append([]byte{typ, code, 0, 0, 0, 0, 0, 0}, orig...)
	if typ == uint8(header.ICMPv4DstUnreachable) && code == uint8(header.ICMPv4FragmentationNeeded) {
		binary.BigEndian.PutUint16(m[6:], 576)
	}
	binary.BigEndian.PutUint16(m[2:], ^checksum.Checksum(m, 0))
	return m
}

// icmpErr6 is an ICMPv6 error of type typ and code with the 32-bit field
// val quoting orig (RFC 4443); ipv6Chain fills in its checksum.
func icmpErr6(typ, code uint8, val uint32, orig []byte) []byte {
	m := []byte{typ, code, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(m[4:], val)
	return append(m, orig...)
}

// longDestOpts is the header that crashed the router: a 1264-octet
// Destination Options header of five 250-octet PadN options (and the
// padding to a multiple of 8).
func longDestOpts() extHdr {
	return optsHdr(60, padN(250), padN(250), padN(250), padN(250), padN(250))
}

// routerCrashSeeds are the inputs that crashed the router (gVisor's
// "unrecognized tcpip forwarding error: header is malformed"), kept in
// testdata/fuzz/FuzzRouter under these names.
func routerCrashSeeds() map[string][]byte {
	udp := udpDatagram(5000, 53, []byte("long chain"))
	return map[string][]byte{
		"crash-ipv6-long-destopts-lan-to-wan": fzInput(
			fzRec(ctlFix, ipv6Chain(fzHost6, fzFar6, 64, header.UDPProtocolNumber, udp, longDestOpts()))),
		"crash-ipv6-long-destopts-wan-to-allow6": fzInput(
			fzRec(ctlWAN|ctlFix, ipv6Chain(fzFar6, fzHost6, 64, header.TCPProtocolNumber, tcpSeg(40000, fzAllow6Port, header.TCPFlagSyn, 1, 0, nil, nil), longDestOpts()))),
		"crash-ipv6-long-destopts-udp-reply": fzInput(
			fzRec(ctlFix, ipv6Packet(fzHost6, fzFar6, 64, header.UDPProtocolNumber, udp)),
			fzRec(ctlWAN|ctlFix, ipv6Chain(fzFar6, fzHost6, 64, header.UDPProtocolNumber, udpDatagram(53, 5000, []byte("reply")), longDestOpts()))),
	}
}

func routerSeeds() [][]byte {
	var seeds [][]byte
	add := func(recs ...[]byte) { seeds = append(seeds, fzInput(recs...)) }
	udp := func(sp, dp uint16) []byte { return udpDatagram(sp, dp, []byte("gvrouter fuzz seed")) }
	lan4 := func(dst netip.Addr, ttl uint8, l4 []byte) []byte {
		return ipv4Packet(fzHost4, dst, ttl, header.UDPProtocolNumber, l4)
	}
	far := fzFar6

	// Plain forwarding and local delivery, both families.
	add(fzRec(ctlFix, lan4(fzFar4, 64, udp(5000, 53))))
	add(fzRec(ctlFix, ipv6Packet(fzHost6, far, 64, header.UDPProtocolNumber, udp(5000, 53))))
	add(fzRec(ctlFix, ipv4Packet(fzHost4, fzLAN4, 64, header.ICMPv4ProtocolNumber, icmpEcho(1, 1, []byte("ping")))))
	add(fzRec(ctlFix, ipv6Packet(fzHost6, fzLAN6, 64, header.ICMPv6ProtocolNumber, icmpv6Echo(1, 1))))
	add(fzRec(ctlFix, ipv4Packet(fzHost4, netip.MustParseAddr("192.168.1.20"), 64, header.UDPProtocolNumber, udp(1, 2))))
	arp := make([]byte, header.ARPSize)
	a := header.ARP(arp)
	a.SetIPv4OverEthernet()
	a.SetOp(header.ARPRequest)
	copy(a.HardwareAddressSender(), fzHostMAC)
	copy(a.ProtocolAddressSender(), fzHost4.AsSlice())
	copy(a.ProtocolAddressTarget(), fzLAN4.AsSlice())
	add(fzRec(ctlRaw, ethFrame(bcastMAC, fzHostMAC, header.ARPProtocolNumber, arp)))

	// TTL 1 and 2, hop limit 1, towards the WAN and to the router.
	add(fzRec(ctlFix, lan4(fzFar4, 1, udp(5000, 33434))))
	add(fzRec(ctlFix, lan4(fzFar4, 2, udp(5000, 33435))))
	add(fzRec(ctlFix, lan4(fzLAN4, 1, udp(5000, 33436))))
	// TTL 1 to class E: counted as local, it skipped the TTL rule, and
	// netstack forwarded it with TTL 0 (found by FuzzRouter).
	add(fzRec(ctlFix, lan4(netip.MustParseAddr("255.168.1.1"), 1, udp(5000, 33437))))
	add(fzRec(ctlFix, lan4(netip.MustParseAddr("240.0.0.1"), 2, udp(5000, 33438))))
	add(fzRec(ctlFix, ipv6Packet(fzHost6, far, 1, header.UDPProtocolNumber, udp(5000, 33434))))
	add(fzRec(ctlWAN|ctlFix, ipv4Packet(fzFar4, fzWAN4, 1, header.TCPProtocolNumber, tcpSeg(40000, fzForwardExt, header.TCPFlagSyn, 1, 0, nil, nil))))

	// IPv4 options of every length (IHL 6..15), record route, timestamp,
	// loose and strict source routes, router alert, and broken ones.
	for ihl := 6; ihl <= 15; ihl++ {
		nops := make([]byte, 4*(ihl-5))
		for i := range nops[:len(nops)-1] {
			nops[i] = 1
		}
		add(fzRec(ctlFix, ipv4Opts(fzHost4, fzFar4, 64, header.UDPProtocolNumber, udp(5000, 53), nops)))
	}
	rr := make([]byte, 39)
	rr[0], rr[1], rr[2] = 7, 39, 4
	add(fzRec(ctlFix, ipv4Opts(fzHost4, fzFar4, 64, header.UDPProtocolNumber, udp(5000, 53), rr)))
	rrFull := append([]byte(nil), rr...)
	rrFull[2] = 40
	add(fzRec(ctlFix, ipv4Opts(fzHost4, fzFar4, 64, header.UDPProtocolNumber, udp(5000, 53), rrFull)))
	for _, flag := range []byte{0, 1, 3} {
		ts := make([]byte, 36)
		ts[0], ts[1], ts[2], ts[3] = 68, 36, 5, flag
		if flag == 3 {
			copy(ts[4:], fzLAN4.AsSlice())
		}
		add(fzRec(ctlFix, ipv4Opts(fzHost4, fzFar4, 64, header.UDPProtocolNumber, udp(5000, 53), ts)))
	}
	lsrr := append([]byte{131, 11, 4}, append(fzGw4.AsSlice(), fzFar4.AsSlice()...)...)
	add(fzRec(ctlFix, ipv4Opts(fzHost4, fzLAN4, 64, header.UDPProtocolNumber, udp(5000, 53), lsrr)))
	ssrr := append([]byte{137, 7, 4}, fzFar4.AsSlice()...)
	add(fzRec(ctlFix, ipv4Opts(fzHost4, fzFar4, 64, header.UDPProtocolNumber, udp(5000, 53), ssrr)))
	add(fzRec(ctlFix, ipv4Opts(fzHost4, fzFar4, 64, header.UDPProtocolNumber, udp(5000, 53), []byte{148, 4, 0, 0})))
	add(fzRec(ctlFix, ipv4Opts(fzHost4, fzFar4, 64, header.UDPProtocolNumber, udp(5000, 53), []byte{7, 0, 4, 0})))
	add(fzRec(ctlFix, ipv4Opts(fzHost4, fzFar4, 64, header.UDPProtocolNumber, udp(5000, 53), []byte{68, 40, 5, 0})))

	// IPv6 extension headers: hop-by-hop, routing types 0, 2 and 4,
	// destination options, fragments, long chains, a jumbogram.
	ext := func(l4 []byte, exts ...extHdr) []byte {
		return ipv6Chain(fzHost6, far, 64, header.UDPProtocolNumber, l4, exts...)
	}
	add(fzRec(ctlFix, ext(udp(5000, 53), optsHdr(0, padN(4)))))
	add(fzRec(ctlFix, ext(udp(5000, 53), optsHdr(0, []byte{5, 2, 0, 0}))))    // router alert
	add(fzRec(ctlFix, ext(udp(5000, 53), optsHdr(0, []byte{0x80, 2, 0, 0})))) // unknown, discard and ICMP
	add(fzRec(ctlFix, ext(udp(5000, 53), optsHdr(60, padN(6)))))
	for _, typ := range []uint8{0, 2, 4} {
		add(fzRec(ctlFix, ext(udp(5000, 53), routingHdr(typ, 1, fzFar6))))
		add(fzRec(ctlFix, ext(udp(5000, 53), routingHdr(typ, 0, fzFar6))))
		add(fzRec(ctlFix, ipv6Chain(fzHost6, fzLAN6, 64, header.UDPProtocolNumber, udp(5000, 53), routingHdr(typ, 1, far))))
		add(fzRec(ctlWAN|ctlFix, ipv6Chain(far, fzHost6, 64, header.TCPProtocolNumber, tcpSeg(40000, fzAllow6Port, header.TCPFlagSyn, 1, 0, nil, nil), routingHdr(typ, 1, fzHost6))))
	}
	add(fzRec(ctlFix, ext(udp(5000, 53), fragHdr(0, false, 7)))) // atomic fragment
	add(fzRec(0, ext(udp(5000, 53), fragHdr(0, true, 8))))
	add(fzRec(0, ext(make([]byte, 16), fragHdr(64, true, 8))))
	add(fzRec(0, ext(udp(5000, 53), fragHdr(0, true, 9))), fzRec(0, ext(make([]byte, 24), fragHdr(8, false, 9)))) // overlapping
	add(fzRec(0, ext(udpDatagram(5000, 53, nil), fragHdr(0, true, 10))))                                          // tiny first fragment
	many := []extHdr{optsHdr(0, padN(6))}
	for range 10 {
		many = append(many, optsHdr(60, padN(14)))
	}
	many = append(many, routingHdr(0, 0, far), optsHdr(60, padN(6)), fragHdr(0, false, 11))
	add(fzRec(ctlFix, ext(udp(5000, 53), many...)))
	add(fzRec(ctlFix, ext(udp(5000, 53), optsHdr(60, padN(250), padN(250), padN(250), padN(250), padN(220)))))  // a 1232-octet chain
	add(fzRec(ctlFix, ext(udp(5000, 53), optsHdr(0, padN(250)), optsHdr(60, padN(250), padN(250), padN(200))))) // two headers, 1000 octets
	jumbo := ext(udp(5000, 53), optsHdr(0, []byte{0xc2, 4, 0, 0, 0, 0}))
	binary.BigEndian.PutUint32(jumbo[header.IPv6MinimumSize+4:], uint32(len(jumbo)-header.IPv6MinimumSize))
	binary.BigEndian.PutUint16(jumbo[4:], 0)
	add(fzRec(0, jumbo))

	// IPv4 fragments: first, middle, overlapping (RFC 1858's offset-8
	// rewrite of the TCP flags through the port forward), tiny.
	syn := ipv4Packet(fzFar4, fzWAN4, 64, header.TCPProtocolNumber, tcpSeg(40000, fzForwardExt, header.TCPFlagSyn, 1, 0, nil, nil))[20:]
	add(fzRec(ctlWAN, ipv4Frag(fzFar4, fzWAN4, header.TCPProtocolNumber, 77, 0, true, syn[:8])),
		fzRec(ctlWAN, ipv4Frag(fzFar4, fzWAN4, header.TCPProtocolNumber, 77, 8, false, syn[8:])))
	add(fzRec(ctlWAN, ipv4Frag(fzFar4, fzWAN4, header.TCPProtocolNumber, 78, 0, true, append(append([]byte(nil), syn...), make([]byte, 8)...))),
		fzRec(ctlWAN, ipv4Frag(fzFar4, fzWAN4, header.TCPProtocolNumber, 78, 8, false, []byte{0, 0, 0, 0, 0x50, 0x12, 0xff, 0xff})))
	big := udpDatagram(5000, 53, make([]byte, 64))
	setL4Checksum(fzHost4.AsSlice(), fzFar4.AsSlice(), protoUDP, big)
	add(fzRec(0, ipv4Frag(fzHost4, fzFar4, header.UDPProtocolNumber, 79, 0, true, big[:32])),
		fzRec(0, ipv4Frag(fzHost4, fzFar4, header.UDPProtocolNumber, 79, 32, true, big[32:48])),
		fzRec(0, ipv4Frag(fzHost4, fzFar4, header.UDPProtocolNumber, 79, 48, false, big[48:])))
	add(fzRec(0, ipv4Frag(fzHost4, fzFar4, header.UDPProtocolNumber, 80, 24, false, big[24:])),
		fzRec(0, ipv4Frag(fzHost4, fzFar4, header.UDPProtocolNumber, 80, 0, true, big[:32])))
	add(fzRec(0, ipv4Frag(fzHost4, fzLAN4, header.UDPProtocolNumber, 81, 0, true, big[:8])))
	// A fragment the NAT engine holds until its first fragment comes, with
	// TTL 1: delivered after the batch, it was forwarded with TTL 0 (found
	// by FuzzRouter).
	ttl1 := ipv4Frag(fzHost4, fzFar4, header.UDPProtocolNumber, 82, 32, false, big[32:])
	ttl1[8] = 1
	header.IPv4(ttl1).SetChecksum(0)
	header.IPv4(ttl1).SetChecksum(^header.IPv4(ttl1).CalculateChecksum())
	add(fzRec(0, ttl1), fzRec(0, ipv4Frag(fzHost4, fzFar4, header.UDPProtocolNumber, 82, 0, true, big[:32])))
	add(fzRec(ctlFix, ipv4Packet(fzHost4, fzFar4, 64, header.UDPProtocolNumber, udpDatagram(5000, 53, make([]byte, 1450))))) // fragmented to the WAN's MTU

	// The port forward, hairpin, masqueraded flows and their replies.
	mss := []byte{2, 4, 0x05, 0xb4}
	add(fzRec(ctlWAN|ctlFix, ipv4Packet(fzFar4, fzWAN4, 64, header.TCPProtocolNumber, tcpSeg(40000, fzForwardExt, header.TCPFlagSyn, 1, 0, mss, nil))),
		fzRec(ctlFix, ipv4Packet(fzHost4, fzFar4, 64, header.TCPProtocolNumber, tcpSeg(fzForwardInt, 40000, header.TCPFlagSyn|header.TCPFlagAck, 100, 2, mss, nil))),
		fzRec(ctlWAN|ctlFix, ipv4Packet(fzFar4, fzWAN4, 64, header.TCPProtocolNumber, tcpSeg(40000, fzForwardExt, header.TCPFlagAck, 2, 101, nil, []byte("GET /")))))
	add(fzRec(ctlFix, ipv4Packet(netip.MustParseAddr("192.168.1.20"), fzWAN4, 64, header.TCPProtocolNumber, tcpSeg(40000, fzForwardExt, header.TCPFlagSyn, 1, 0, nil, nil))))
	add(fzRec(ctlFix, lan4(fzFar4, 64, udp(5000, 53))),
		fzRec(ctlWAN|ctlFix, ipv4Packet(fzFar4, fzWAN4, 64, header.UDPProtocolNumber, udp(53, 5000))))
	add(fzRec(ctlFix, ipv4Packet(fzHost4, fzFar4, 64, header.TCPProtocolNumber, tcpSeg(40001, 443, header.TCPFlagSyn, 1, 0, mss, nil))),
		fzRec(ctlWAN|ctlFix, ipv4Packet(fzFar4, fzWAN4, 64, header.TCPProtocolNumber, tcpSeg(443, 40001, header.TCPFlagSyn|header.TCPFlagAck, 500, 2, mss, nil))),
		fzRec(ctlFix, ipv4Packet(fzHost4, fzFar4, 64, header.TCPProtocolNumber, tcpSeg(40001, 443, header.TCPFlagAck, 2, 501, nil, []byte("hello")))),
		fzRec(ctlWAN|ctlFix|ctlCsumValid, ipv4Packet(fzFar4, fzWAN4, 64, header.TCPProtocolNumber, tcpSeg(443, 40001, header.TCPFlagAck|header.TCPFlagPsh, 501, 7, nil, []byte("world")))))
	// An offloaded flow's packet whose IPv4 header checksum is wrong (the
	// TOS changed after it was computed): the fast path forwarded it with
	// the checksum still wrong (found by FuzzRouter).
	tosFlipped := ipv4Packet(fzHost4, fzFar4, 64, header.TCPProtocolNumber, tcpSeg(40004, 443, header.TCPFlagAck, 7, 501, nil, []byte("again")))
	tosFlipped[1] ^= 0x04
	add(fzRec(ctlFix, ipv4Packet(fzHost4, fzFar4, 64, header.TCPProtocolNumber, tcpSeg(40004, 443, header.TCPFlagSyn, 1, 0, mss, nil))),
		fzRec(ctlWAN|ctlFix, ipv4Packet(fzFar4, fzWAN4, 64, header.TCPProtocolNumber, tcpSeg(443, 40004, header.TCPFlagSyn|header.TCPFlagAck, 500, 2, mss, nil))),
		fzRec(ctlFix, ipv4Packet(fzHost4, fzFar4, 64, header.TCPProtocolNumber, tcpSeg(40004, 443, header.TCPFlagAck, 2, 501, nil, []byte("hello")))),
		fzRec(0, tosFlipped))
	add(fzRec(ctlFix, ipv6Packet(fzHost6, far, 64, header.UDPProtocolNumber, udp(5000, 53))),
		fzRec(ctlWAN|ctlFix, ipv6Packet(far, fzHost6, 64, header.UDPProtocolNumber, udp(53, 5000))))
	add(fzRec(ctlFix|ctlPartial, lan4(fzFar4, 64, udp(5001, 53))))
	// The forward's reply spoofed from the WAN, CHECKSUM_PARTIAL with no
	// pseudo-header sum: un-NATed and sent back out with a checksum the
	// router cannot get right (found by FuzzRouter, a harness false alarm).
	add(fzRec(ctlWAN|ctlFix, ipv4Packet(fzFar4, fzWAN4, 64, header.TCPProtocolNumber, tcpSeg(40000, fzForwardExt, header.TCPFlagSyn, 1, 0, mss, nil))),
		fzRec(ctlWAN|ctlPartial, ipv4Packet(fzHost4, fzFar4, 64, header.TCPProtocolNumber, tcpSeg(fzForwardInt, 40000, header.TCPFlagSyn|header.TCPFlagAck, 100, 2, mss, nil))))
	add(fzRec(ctlFix|ctlPartial, ipv6Chain(fzHost6, far, 64, header.UDPProtocolNumber, udp(5001, 53), optsHdr(60, padN(6)))))

	// Superframes (fuzzGSO): a local sender's TSO frame of an established
	// flow, which takes the fast path whole and leaves cut to the WAN's
	// MTU with the WAN's tag; one of a flow the router has not seen (cut
	// before the slow path); a UDP one (USO); an IPv6 one.
	super := make([]byte, 6000)
	super[len(super)-1] = 8 // the GSO type its headers say
	add(fzRec(ctlFix, ipv4Packet(fzHost4, fzFar4, 64, header.TCPProtocolNumber, tcpSeg(40005, 443, header.TCPFlagSyn, 1, 0, mss, nil))),
		fzRec(ctlWAN|ctlFix, ipv4Packet(fzFar4, fzWAN4, 64, header.TCPProtocolNumber, tcpSeg(443, 40005, header.TCPFlagSyn|header.TCPFlagAck, 500, 2, mss, nil))),
		fzRec(ctlFix, ipv4Packet(fzHost4, fzFar4, 64, header.TCPProtocolNumber, tcpSeg(40005, 443, header.TCPFlagAck, 2, 501, nil, []byte("hello")))),
		fzRec(ctlFix|ctlPartial, ipv4Packet(fzHost4, fzFar4, 64, header.TCPProtocolNumber, tcpSeg(40005, 443, header.TCPFlagAck|header.TCPFlagPsh, 7, 501, nil, super))))
	add(fzRec(ctlFix|ctlPartial, ipv4Packet(fzHost4, fzFar4, 64, header.TCPProtocolNumber, tcpSeg(40006, 443, header.TCPFlagAck, 7, 501, nil, super))))
	add(fzRec(ctlFix|ctlPartial, lan4(fzFar4, 64, udpDatagram(5003, 443, super))))
	add(fzRec(ctlFix|ctlPartial, ipv6Packet(fzHost6, far, 64, header.TCPProtocolNumber, tcpSeg(40007, 443, header.TCPFlagAck, 7, 501, nil, super))))

	// What the firewall must stop: new inbound flows to LAN hosts with no
	// forward or allow rule, and new connections to the router.
	add(fzRec(ctlWAN|ctlFix, ipv4Packet(fzFar4, fzHost4, 64, header.TCPProtocolNumber, tcpSeg(40000, 80, header.TCPFlagSyn, 1, 0, nil, nil))))
	add(fzRec(ctlWAN|ctlFix, ipv6Packet(far, fzHost6, 64, header.TCPProtocolNumber, tcpSeg(40000, 23, header.TCPFlagSyn, 1, 0, nil, nil))))
	add(fzRec(ctlWAN|ctlFix, ipv6Packet(far, fzHost6, 64, header.UDPProtocolNumber, udp(53, 5000))))
	add(fzRec(ctlWAN|ctlFix, ipv6Packet(far, fzHost6, 64, header.TCPProtocolNumber, tcpSeg(40000, fzAllow6Port, header.TCPFlagSyn, 1, 0, nil, nil))))
	add(fzRec(ctlWAN|ctlFix, ipv4Packet(fzFar4, fzWAN4, 64, header.TCPProtocolNumber, tcpSeg(40000, fzListenPort, header.TCPFlagSyn, 1, 0, nil, nil))))

	// ICMP errors quoting the flows above and the shapes above.
	quote4 := ipv4Packet(fzWAN4, fzFar4, 63, header.UDPProtocolNumber, udp(5000, 53))
	add(fzRec(ctlFix, lan4(fzFar4, 64, udp(5000, 53))),
		fzRec(ctlWAN|ctlFix, ipv4Packet(fzFar4, fzWAN4, 64, header.ICMPv4ProtocolNumber, icmpErr4(3, 3, quote4[:28]))))
	add(fzRec(ctlFix, lan4(fzFar4, 64, udp(5000, 53))),
		fzRec(ctlWAN|ctlFix, ipv4Packet(fzFar4, fzWAN4, 64, header.ICMPv4ProtocolNumber, icmpErr4(3, 4, quote4))))
	add(fzRec(ctlWAN|ctlFix, ipv4Packet(fzFar4, fzWAN4, 64, header.ICMPv4ProtocolNumber,
		icmpErr4(11, 0, ipv4Opts(fzWAN4, fzFar4, 1, header.UDPProtocolNumber, udp(5000, 53), rr)))))
	quote6 := ipv6Chain(fzHost6, far, 63, header.UDPProtocolNumber, udp(5000, 53), optsHdr(60, padN(6)), routingHdr(0, 0, far))
	add(fzRec(ctlFix, ipv6Packet(fzHost6, far, 64, header.UDPProtocolNumber, udp(5000, 53))),
		fzRec(ctlWAN|ctlFix, ipv6Packet(far, fzHost6, 64, header.ICMPv6ProtocolNumber, icmpErr6(1, 4, 0, quote6))))
	add(fzRec(ctlWAN|ctlFix, ipv6Packet(far, fzHost6, 64, header.ICMPv6ProtocolNumber, icmpErr6(2, 0, 1280, quote6))))
	add(fzRec(ctlWAN|ctlFix, ipv6Packet(far, fzHost6, 64, header.ICMPv6ProtocolNumber, icmpErr6(4, 1, 40, quote6))))
	add(fzRec(ctlWAN|ctlFix, ipv6Packet(far, fzWAN6, 64, header.ICMPv6ProtocolNumber, icmpErr6(3, 0, 0, ext(udp(5000, 53), fragHdr(0, true, 12))))))

	// GRO: segments of one flow to the router (selective GRO coalesces
	// them), and VLAN handling: a WAN frame untagged, a LAN frame tagged,
	// the WAN tag in-band.
	var gro [][]byte
	for i := range 4 {
		flags := header.TCPFlagAck
		if i == 3 {
			flags |= header.TCPFlagPsh
		}
		gro = append(gro, fzRec(ctlFix|ctlCsumValid, ipv4Packet(fzHost4, fzLAN4, 64, header.TCPProtocolNumber, tcpSeg(40002, fzListenPort, flags, uint32(1+100*i), 1, nil, make([]byte, 100)))))
	}
	add(gro...)
	// Two flows in one of gVisor's GRO buckets: its Flush delivered only
	// the first, the second leaked (found by FuzzRouter).
	add(fzRec(ctlFix|ctlCsumValid, ipv4Packet(fzHost4, fzLAN4, 64, header.TCPProtocolNumber, tcpSeg(40002, 13904, header.TCPFlagAck, 1, 1, nil, make([]byte, 100)))),
		fzRec(ctlFix|ctlCsumValid, ipv4Packet(fzHost4, fzLAN4, 64, header.TCPProtocolNumber, tcpSeg(40002, 65104, header.TCPFlagAck, 201, 1, nil, make([]byte, 100)))))
	add(fzRec(ctlFix, ipv4Packet(fzHost4, fzLAN4, 64, header.TCPProtocolNumber, tcpSeg(40003, fzListenPort, header.TCPFlagSyn, 1, 0, mss, nil))))
	add(fzRec(ctlWAN|ctlWrongTag|ctlFix, ipv4Packet(fzFar4, fzWAN4, 64, header.ICMPv4ProtocolNumber, icmpEcho(2, 1, nil))))
	add(fzRec(ctlWrongTag|ctlFix, ipv4Packet(fzHost4, fzLAN4, 64, header.ICMPv4ProtocolNumber, icmpEcho(3, 1, nil))))
	add(fzRec(ctlWAN|ctlInband|ctlFix, ipv4Packet(fzFar4, fzWAN4, 64, header.ICMPv4ProtocolNumber, icmpEcho(4, 1, nil))))
	add(fzRec(ctlBacklog|ctlFix, lan4(fzFar4, 64, udp(5002, 53))))
	return seeds
}
