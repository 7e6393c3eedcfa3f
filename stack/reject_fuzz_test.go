package stack

import (
	"bytes"
	"net/netip"
	"testing"

	"golang.org/x/time/rate"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
)

// rejectNet is a two-interface router (lan 10.1.0.1/24 fd00:1::1/64, wan
// 10.2.0.1/24 fd00:2::1/64) whose hosts A and B are static neighbours,
// so that a reject answer to either goes out at once, and whose ICMP
// limiter never refuses: what the answer builder decides is all there is
// to see.
type rejectNet struct {
	r        *Netstack
	lan, wan *captureWriter // what each interface sends (vlan_test.go)
}

func newRejectNet(tb testing.TB) *rejectNet {
	tb.Helper()
	n := &rejectNet{lan: &captureWriter{}, wan: &captureWriter{}}
	var err error
	n.r, err = New(Config{Interfaces: []InterfaceConfig{
		{Name: "lan", MAC: lanMAC, Addresses: []netip.Prefix{netip.MustParsePrefix("10.1.0.1/24"), netip.MustParsePrefix("fd00:1::1/64")}, Writer: n.lan},
		{Name: "wan", MAC: wanMAC, Addresses: []netip.Prefix{netip.MustParsePrefix("10.2.0.1/24"), netip.MustParsePrefix("fd00:2::1/64")}, Writer: n.wan},
	}}, nil)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(n.r.Close)
	n.r.s.SetICMPLimit(rate.Inf)
	for _, nb := range []struct {
		ifc  string
		addr netip.Addr
		mac  []byte
	}{{"lan", aIP4, aMAC}, {"lan", aIP6, aMAC}, {"wan", bIP4, bMAC}, {"wan", bIP6, bMAC}} {
		proto := ipv4.ProtocolNumber
		if nb.addr.Is6() {
			proto = ipv6.ProtocolNumber
		}
		if err := n.r.s.AddStaticNeighbor(n.r.Interface(nb.ifc).id, proto, tcpip.AddrFromSlice(nb.addr.AsSlice()), tcpip.LinkAddress(nb.mac)); err != nil {
			tb.Fatalf("AddStaticNeighbor(%s, %v): %v", nb.ifc, nb.addr, err)
		}
	}
	return n
}

// reject answers ip as the lan interface's receive path (toRouter) or
// the transmit path does, and returns the frames sent on either
// interface meanwhile.
func (n *rejectNet) reject(ip []byte, toRouter bool) [][]byte {
	n.r.Interface("lan").ep.sendReject(ip, toRouter)
	return append(n.lan.take(), n.wan.take()...)
}

// rejectInput is the fuzz input's IP packet and path: the first octet's
// low bit says the packet was to the router.
func rejectInput(data []byte) (ip []byte, toRouter bool) {
	if len(data) == 0 {
		return nil, false
	}
	return data[1:], data[0]&1 != 0
}

// rejectCase is a fuzz input and the answer it gets: "rst", "icmp" (or
// ICMPv6), or "" for none.
type rejectCase struct {
	name string
	data []byte
	want string
}

// rejectSeeds are FuzzReject's seeds beside testdata/fuzz/FuzzReject:
// each kind of packet a reject rule refuses, and the ones it must never
// answer.
func rejectSeeds() []rejectCase {
	syn := make([]byte, header.TCPMinimumSize)
	header.TCP(syn).Encode(&header.TCPFields{SrcPort: 40000, DstPort: 22, SeqNum: 1000, DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagSyn})
	ack := bytes.Clone(syn)
	header.TCP(ack).Encode(&header.TCPFields{SrcPort: 40000, DstPort: 22, SeqNum: 1000, AckNum: 77, DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagAck})
	rst := bytes.Clone(syn)
	header.TCP(rst).Encode(&header.TCPFields{SrcPort: 40000, DstPort: 22, SeqNum: 1000, DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagRst})
	udp := udpDatagram(40000, 53, []byte("query"))
	unreach := make([]byte, header.ICMPv4MinimumSize+28)
	unreach[0] = byte(header.ICMPv4DstUnreachable)
	unreach6 := make([]byte, header.ICMPv6ErrorHeaderSize+48)
	unreach6[0] = byte(header.ICMPv6DstUnreachable)
	frag := ipv4Packet(aIP4, bIP4, 64, header.UDPProtocolNumber, udp)
	frag[6], frag[7] = 0, 10 // a later fragment: offset 80
	frag[10], frag[11] = 0, 0
	header.IPv4(frag).SetChecksum(^header.IPv4(frag).CalculateChecksum())
	in := func(toRouter bool, ip []byte) []byte {
		b := byte(0)
		if toRouter {
			b = 1
		}
		return append([]byte{b}, ip...)
	}
	return []rejectCase{
		{"tcp syn to the router", in(true, ipv4Packet(aIP4, lanIP4, 64, header.TCPProtocolNumber, syn)), "rst"},
		{"tcp ack to the router", in(true, ipv4Packet(aIP4, lanIP4, 64, header.TCPProtocolNumber, ack)), "rst"},
		{"tcp rst to the router", in(true, ipv4Packet(aIP4, lanIP4, 64, header.TCPProtocolNumber, rst)), ""},
		{"udp to the router", in(true, ipv4Packet(aIP4, lanIP4, 64, header.UDPProtocolNumber, udp)), "icmp"},
		{"forwarded tcp", in(false, ipv4Packet(aIP4, bIP4, 63, header.TCPProtocolNumber, syn)), "icmp"},
		{"forwarded udp from wan", in(false, ipv4Packet(bIP4, aIP4, 63, header.UDPProtocolNumber, udp)), "icmp"},
		{"echo request", in(true, ipv4Packet(aIP4, lanIP4, 64, header.ICMPv4ProtocolNumber, icmpEcho(1, 1, nil))), "icmp"},
		{"icmp error", in(true, ipv4Packet(aIP4, lanIP4, 64, header.ICMPv4ProtocolNumber, unreach)), ""},
		{"later fragment", in(false, frag), ""},
		{"udp to the limited broadcast", in(true, ipv4Packet(aIP4, netip.MustParseAddr("255.255.255.255"), 64, header.UDPProtocolNumber, udp)), ""},
		{"udp to the lan's subnet broadcast", in(true, ipv4Packet(aIP4, netip.MustParseAddr("10.1.0.255"), 64, header.UDPProtocolNumber, udp)), ""},
		{"forwarded udp to the wan's subnet broadcast", in(false, ipv4Packet(aIP4, netip.MustParseAddr("10.2.0.255"), 63, header.UDPProtocolNumber, udp)), ""},
		{"udp to mdns", in(true, ipv4Packet(aIP4, netip.MustParseAddr("224.0.0.251"), 255, header.UDPProtocolNumber, udp)), ""},
		{"tcp syn to a group", in(true, ipv4Packet(aIP4, netip.MustParseAddr("239.255.255.250"), 1, header.TCPProtocolNumber, syn)), ""},
		{"from 0.0.0.0", in(true, ipv4Packet(netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("255.255.255.255"), 64, header.UDPProtocolNumber, udp)), ""},
		{"from a group", in(true, ipv4Packet(netip.MustParseAddr("224.0.0.9"), lanIP4, 64, header.UDPProtocolNumber, udp)), ""},
		{"ipv6 tcp syn to the router", in(true, ipv6Packet(aIP6, lanIP6, 64, header.TCPProtocolNumber, syn)), "rst"},
		{"ipv6 udp to the router", in(true, ipv6Packet(aIP6, lanIP6, 64, header.UDPProtocolNumber, udp)), "icmp"},
		{"ipv6 forwarded udp", in(false, ipv6Packet(bIP6, aIP6, 63, header.UDPProtocolNumber, udp)), "icmp"},
		{"ipv6 echo request", in(true, ipv6Packet(aIP6, lanIP6, 64, header.ICMPv6ProtocolNumber, icmpv6Echo(1, 1))), "icmp"},
		{"ipv6 icmp error", in(true, ipv6Packet(aIP6, lanIP6, 64, header.ICMPv6ProtocolNumber, unreach6)), ""},
		{"ipv6 udp to all nodes", in(true, ipv6Packet(aIP6, netip.MustParseAddr("ff02::1"), 255, header.UDPProtocolNumber, udp)), ""},
		{"ipv6 tcp syn to a group", in(true, ipv6Packet(aIP6, netip.MustParseAddr("ff02::1:ff00:1"), 255, header.TCPProtocolNumber, syn)), ""},
		{"ipv6 from ::", in(true, ipv6Packet(netip.MustParseAddr("::"), lanIP6, 64, header.UDPProtocolNumber, udp)), ""},
		{"ipv6 tcp syn behind hop-by-hop options", in(true, ipv6Packet(aIP6, lanIP6, 64, tcpip.TransportProtocolNumber(header.IPv6HopByHopOptionsExtHdrIdentifier), append([]byte{uint8(header.TCPProtocolNumber), 0, 1, 4, 0, 0, 0, 0}, syn...))), "rst"},
		{"ipv4 header cut short", in(true, []byte{0x45, 0, 0, 20}), ""},
		{"ipv6 header cut short", in(true, []byte{0x60, 0, 0, 0, 0, 8, 6, 64}), ""},
	}
}

// FuzzReject feeds the reject answer builder (reject.go: a TCP RST or an
// ICMP/ICMPv6 port unreachable for a packet a reject rule refused)
// arbitrary packets, as the receive path (to the router) or the transmit
// path (forwarded) hands them over. An input is a path octet (low bit:
// to the router) and the IP packet.
//
// Invariants: nothing panics; at most one frame goes out, and only to
// the packet's source; none at all for a packet from or to a multicast
// or broadcast address (the limited broadcast or an interface's subnet
// broadcast), from an unspecified or loopback source, a later IPv4
// fragment, an ICMP or ICMPv6 error (RFC 1122 section 3.2.2, RFC 4443
// section 2.4 (e)) or a TCP reset (RFC 9293 section 3.10.7.1). A RST
// answers only TCP to the router, from the address and port it was sent
// to, with a valid checksum; an ICMP answer is type 3 code 3 (ICMPv6
// type 1 code 4) with a valid checksum and quotes the start of the
// packet.
func FuzzReject(f *testing.F) {
	for _, c := range rejectSeeds() {
		f.Add(c.data)
	}
	n := newRejectNet(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		ip, toRouter := rejectInput(data)
		sent := n.reject(ip, toRouter)
		checkRejectAnswer(t, ip, toRouter, sent)
	})
}

// TestRejectAnswers: each seed of FuzzReject gets the answer it should,
// through the fuzz target's checks: a RST for TCP to the router, a port
// unreachable for the rest, and nothing for the packets no host may
// answer (from or to a group or a broadcast address, an ICMP error, a
// reset, a later fragment, a cut header). Without the answers this
// would list, the fuzz target's invariants would hold vacuously.
func TestRejectAnswers(t *testing.T) {
	n := newRejectNet(t)
	for _, c := range rejectSeeds() {
		t.Run(c.name, func(t *testing.T) {
			ip, toRouter := rejectInput(c.data)
			sent := n.reject(ip, toRouter)
			checkRejectAnswer(t, ip, toRouter, sent)
			got := ""
			for _, f := range sent {
				if kind := rejectAnswerKind(f); kind != "" {
					got = kind
				}
			}
			if got != c.want {
				t.Errorf("answer %q, want %q (sent %x)", got, c.want, sent)
			}
		})
	}
}

// rejectAnswerKind says what frame f is: "rst", "icmp" (or ICMPv6 port
// unreachable), or "" for anything else (address resolution).
func rejectAnswerKind(f []byte) string {
	if len(f) < header.EthernetMinimumSize+header.IPv4MinimumSize {
		return ""
	}
	ip := f[header.EthernetMinimumSize:]
	var proto tcpip.TransportProtocolNumber
	var l4 []byte
	switch header.Ethernet(f).Type() {
	case header.IPv4ProtocolNumber:
		h := header.IPv4(ip)
		proto, l4 = tcpip.TransportProtocolNumber(h.Protocol()), h.Payload()
	case header.IPv6ProtocolNumber:
		if len(ip) < header.IPv6MinimumSize {
			return ""
		}
		proto, l4 = header.IPv6(ip).TransportProtocol(), ip[header.IPv6MinimumSize:]
	default:
		return ""
	}
	switch {
	case proto == header.TCPProtocolNumber:
		return "rst"
	case proto == header.ICMPv4ProtocolNumber && len(l4) > 0 && header.ICMPv4Type(l4[0]) == header.ICMPv4DstUnreachable,
		proto == header.ICMPv6ProtocolNumber && len(l4) > 0 && header.ICMPv6Type(l4[0]) == header.ICMPv6DstUnreachable:
		return "icmp"
	}
	return ""
}

// rejectQuiet says why ip must get no answer at all, or "".
func rejectQuiet(ip []byte) string {
	switch {
	case len(ip) < header.IPv4MinimumSize:
		return "shorter than an IPv4 header"
	case ip[0]>>4 == 6:
		if len(ip) < header.IPv6MinimumSize {
			return "shorter than an IPv6 header"
		}
		h := header.IPv6(ip)
		src, dst := h.SourceAddress(), h.DestinationAddress()
		switch {
		case src.Unspecified():
			return "from the unspecified address"
		case header.IsV6MulticastAddress(src), header.IsV6MulticastAddress(dst):
			return "from or to a multicast group"
		}
		return ""
	}
	h := header.IPv4(ip)
	src, dst := h.SourceAddress().As4(), h.DestinationAddress().As4()
	switch {
	case src[0] == 0 || src[0] == 127:
		return "from an unspecified or loopback source"
	case src[0] >= 224:
		return "from a multicast, reserved or broadcast source"
	case dst[0] >= 224:
		return "to a multicast group or the limited broadcast"
	case dst == [4]byte{10, 1, 0, 255} || dst == [4]byte{10, 2, 0, 255}:
		return "to an interface's subnet broadcast"
	case h.FragmentOffset() != 0:
		return "a later fragment"
	}
	return ""
}

func checkRejectAnswer(t *testing.T, ip []byte, toRouter bool, sent [][]byte) {
	t.Helper()
	var answers [][]byte
	for _, f := range sent {
		if len(f) < header.EthernetMinimumSize {
			t.Fatalf("sent a runt frame %x", f)
		}
		et := header.Ethernet(f).Type()
		if et == header.ARPProtocolNumber {
			continue // resolving a source that is no static neighbour
		}
		if et == header.IPv6ProtocolNumber && len(f) >= header.EthernetMinimumSize+header.IPv6MinimumSize+1 &&
			header.IPv6(f[header.EthernetMinimumSize:]).TransportProtocol() == header.ICMPv6ProtocolNumber &&
			header.ICMPv6Type(f[header.EthernetMinimumSize+header.IPv6MinimumSize]) == header.ICMPv6NeighborSolicit {
			continue
		}
		answers = append(answers, f[header.EthernetMinimumSize:])
	}
	if len(answers) == 0 {
		return
	}
	if why := rejectQuiet(ip); why != "" {
		t.Fatalf("answered a packet %s (to router %v):\n in  %x\n out %x", why, toRouter, ip, answers[0])
	}
	if len(answers) > 1 {
		t.Fatalf("%d answers to one packet %x", len(answers), ip)
	}
	out := answers[0]
	if ip[0]>>4 == 6 {
		checkRejectAnswer6(t, ip, toRouter, out)
		return
	}
	in := header.IPv4(ip)
	if len(out) < header.IPv4MinimumSize || out[0]>>4 != 4 {
		t.Fatalf("answer to IPv4 %x is not IPv4: %x", ip, out)
	}
	o := header.IPv4(out)
	if !o.IsChecksumValid() || o.DestinationAddress() != in.SourceAddress() {
		t.Fatalf("answer %x: checksum valid %v, to %v; want valid, to the source %v", out, o.IsChecksumValid(), o.DestinationAddress(), in.SourceAddress())
	}
	switch tcpip.TransportProtocolNumber(o.Protocol()) {
	case header.TCPProtocolNumber:
		checkRST(t, ip, in.Protocol(), in.Payload(), toRouter, out, o.Payload(), header.PseudoHeaderChecksum(header.TCPProtocolNumber, o.SourceAddress(), o.DestinationAddress(), uint16(len(o.Payload()))))
		if o.SourceAddress() != in.DestinationAddress() {
			t.Fatalf("RST from %v, want from %v: %x", o.SourceAddress(), in.DestinationAddress(), out)
		}
	case header.ICMPv4ProtocolNumber:
		icmp := header.ICMPv4(o.Payload())
		if len(icmp) < header.ICMPv4MinimumSize || icmp.Type() != header.ICMPv4DstUnreachable || icmp.Code() != header.ICMPv4PortUnreachable || checksum.Checksum(icmp, 0) != 0xffff {
			t.Fatalf("ICMP answer %x: want a port unreachable with a valid checksum", out)
		}
		if in.Protocol() == uint8(header.ICMPv4ProtocolNumber) && len(in.Payload()) > 0 && isICMPv4Error(header.ICMPv4Type(in.Payload()[0])) {
			t.Fatalf("answered the ICMP error %x", ip)
		}
		if q := icmp[header.ICMPv4MinimumSize:]; len(q) == 0 || !bytes.HasPrefix(ip, q) {
			t.Fatalf("ICMP answer quotes %x, want the start of %x", q, ip)
		}
	default:
		t.Fatalf("answer %x is neither TCP nor ICMP", out)
	}
}

func checkRejectAnswer6(t *testing.T, ip []byte, toRouter bool, out []byte) {
	t.Helper()
	in := header.IPv6(ip)
	if len(out) < header.IPv6MinimumSize || out[0]>>4 != 6 {
		t.Fatalf("answer to IPv6 %x is not IPv6: %x", ip, out)
	}
	o := header.IPv6(out)
	if o.DestinationAddress() != in.SourceAddress() {
		t.Fatalf("answer %x to %v, want to the source %v", out, o.DestinationAddress(), in.SourceAddress())
	}
	payload := out[header.IPv6MinimumSize:]
	proto, off, ok := ipv6Transport(ip)
	switch o.TransportProtocol() {
	case header.TCPProtocolNumber:
		if !ok {
			t.Fatalf("RST %x for a packet whose transport the router cannot find: %x", out, ip)
		}
		checkRST(t, ip, proto, ip[off:min(len(ip), header.IPv6MinimumSize+int(in.PayloadLength()))], toRouter, out, payload, header.PseudoHeaderChecksum(header.TCPProtocolNumber, o.SourceAddress(), o.DestinationAddress(), uint16(len(payload))))
		if o.SourceAddress() != in.DestinationAddress() {
			t.Fatalf("RST from %v, want from %v: %x", o.SourceAddress(), in.DestinationAddress(), out)
		}
	case header.ICMPv6ProtocolNumber:
		icmp := header.ICMPv6(payload)
		if len(icmp) < header.ICMPv6ErrorHeaderSize || icmp.Type() != header.ICMPv6DstUnreachable || icmp.Code() != header.ICMPv6PortUnreachable {
			t.Fatalf("ICMPv6 answer %x: want a port unreachable", out)
		}
		if checksum.Checksum(icmp, header.PseudoHeaderChecksum(header.ICMPv6ProtocolNumber, o.SourceAddress(), o.DestinationAddress(), uint16(len(icmp)))) != 0xffff {
			t.Fatalf("ICMPv6 answer %x: bad checksum", out)
		}
		if ok && proto == uint8(header.ICMPv6ProtocolNumber) && (off >= len(ip) || isICMPv6Error(header.ICMPv6Type(ip[off]))) {
			t.Fatalf("answered the ICMPv6 error %x", ip)
		}
		if q := icmp[header.ICMPv6ErrorHeaderSize:]; len(q) == 0 || !bytes.HasPrefix(ip, q) {
			t.Fatalf("ICMPv6 answer quotes %x, want the start of %x", q, ip)
		}
	default:
		t.Fatalf("answer %x is neither TCP nor ICMPv6", out)
	}
}

// checkRST checks a RST answer (its TCP segment seg, pseudo-header sum
// xsum) to the packet ip, whose transport is proto with segment in.
func checkRST(t *testing.T, ip []byte, proto uint8, in []byte, toRouter bool, out, seg []byte, xsum uint16) {
	t.Helper()
	if !toRouter || proto != uint8(header.TCPProtocolNumber) || len(in) < header.TCPMinimumSize {
		t.Fatalf("a RST %x for %x (to router %v): only TCP to the router gets one", out, ip, toRouter)
	}
	i, o := header.TCP(in), header.TCP(seg)
	if len(seg) < header.TCPMinimumSize || !o.Flags().Contains(header.TCPFlagRst) {
		t.Fatalf("TCP answer %x is no reset", out)
	}
	if i.Flags().Contains(header.TCPFlagRst) {
		t.Fatalf("answered the reset %x", ip)
	}
	if o.SourcePort() != i.DestinationPort() || o.DestinationPort() != i.SourcePort() {
		t.Fatalf("RST ports %d→%d, want %d→%d", o.SourcePort(), o.DestinationPort(), i.DestinationPort(), i.SourcePort())
	}
	if checksum.Checksum(seg, xsum) != 0xffff {
		t.Fatalf("RST %x: bad checksum", out)
	}
	// RFC 9293 section 3.10.7.1: seq = the segment's ACK number if it
	// has one; else seq 0 and ACK of all the segment occupied.
	off := int(i.DataOffset())
	if off < header.TCPMinimumSize || off > len(in) {
		t.Fatalf("answered %x, whose TCP data offset %d does not fit its %d-octet segment", ip, off, len(in))
	}
	if i.Flags().Contains(header.TCPFlagAck) {
		if o.SequenceNumber() != i.AckNumber() || o.Flags() != header.TCPFlagRst {
			t.Fatalf("RST to an ACK segment: seq %d flags %v, want seq %d (its ACK), RST alone", o.SequenceNumber(), o.Flags(), i.AckNumber())
		}
		return
	}
	n := uint32(len(in) - off)
	for _, fl := range []header.TCPFlags{header.TCPFlagSyn, header.TCPFlagFin} {
		if i.Flags().Contains(fl) {
			n++
		}
	}
	if o.SequenceNumber() != 0 || o.AckNumber() != i.SequenceNumber()+n || o.Flags() != header.TCPFlagRst|header.TCPFlagAck {
		t.Fatalf("RST to a segment without ACK: seq %d ack %d flags %v, want seq 0, ack %d, RST|ACK", o.SequenceNumber(), o.AckNumber(), o.Flags(), i.SequenceNumber()+n)
	}
}
