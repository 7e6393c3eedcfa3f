package stack

import (
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Firewall reject answers (natengine's Reject verdict, fw4's REJECT with
// tcp-reset and port-unreachable). The engine has already applied its
// reject rate limit; netstack's ICMP limiter applies on top for ICMP.
//
// A new flow to the router that a rule rejects gets a TCP RST if it is
// TCP (from the address it was sent to, so the client's connect fails at
// once) and an ICMP or ICMPv6 port unreachable otherwise. A forwarded
// flow that a rule rejects gets an ICMP port unreachable (ICMPv6 for
// IPv6) from the router's own address whatever its protocol: an RST
// would have to come from the remote host's address, which netstack
// does not send from.

// sendReject answers ip, a packet refused by a reject rule, which
// arrived on e. toRouter says it was addressed to the router. ip is only
// read. It runs on the receive or transmit goroutine, for refused flows
// only.
func (e *Endpoint) sendReject(ip []byte, toRouter bool) {
	if len(ip) < header.IPv4MinimumSize {
		return
	}
	if ip[0]>>4 == 6 {
		e.reject6(ip, toRouter)
		return
	}
	e.reject4(ip, toRouter)
}

func (e *Endpoint) reject4(ip []byte, toRouter bool) {
	h, l4, ok := ipv4Parts(ip)
	if !ok || !mayAnswerWithICMP(h) || e.toGroupOrBroadcast4(h.DestinationAddress()) {
		return
	}
	if toRouter && h.Protocol() == protoTCP {
		e.sendRST(ipv4.ProtocolNumber, h.DestinationAddress(), h.SourceAddress(), l4)
		return
	}
	s := e.stack
	if s == nil || !s.AllowICMPMessage() {
		return
	}
	r, err := s.FindRoute(0, tcpip.Address{}, h.SourceAddress(), ipv4.ProtocolNumber, false /* multicastLoop */)
	if err != nil {
		return
	}
	defer r.Release()
	quote := ip[:min(int(h.TotalLength()), len(ip), icmpErrorMaxSize-header.IPv4MinimumSize-header.ICMPv4MinimumSize)]
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		ReserveHeaderBytes: int(r.MaxHeaderLength()) + header.ICMPv4MinimumSize,
		Payload:            buffer.MakeWithData(quote),
	})
	defer pkt.DecRef()
	pkt.TransportProtocolNumber = header.ICMPv4ProtocolNumber
	icmp := header.ICMPv4(pkt.TransportHeader().Push(header.ICMPv4MinimumSize))
	icmp.SetType(header.ICMPv4DstUnreachable)
	icmp.SetCode(header.ICMPv4PortUnreachable)
	icmp.SetChecksum(header.ICMPv4Checksum(icmp, pkt.Data().Checksum()))
	_ = r.WritePacket(stack.NetworkHeaderParams{Protocol: header.ICMPv4ProtocolNumber, TTL: r.DefaultTTL(), TOS: stack.DefaultTOS}, pkt)
}

// toGroupOrBroadcast4 reports whether dst is a multicast group, a class
// E address, the limited broadcast or the subnet broadcast of one of the
// router's interfaces. A packet sent there gets no answer: no ICMP error
// (RFC 1122 section 3.2.2) and no RST (section 4.2.3.10: a SYN to such
// an address is discarded), or one host's packet would draw an answer
// for every member.
func (e *Endpoint) toGroupOrBroadcast4(dst tcpip.Address) bool {
	if dst.As4()[0] >= 224 {
		return true
	}
	return e.stack != nil && e.stack.IsSubnetBroadcast(0, ipv4.ProtocolNumber, dst)
}

func (e *Endpoint) reject6(ip []byte, toRouter bool) {
	if len(ip) < header.IPv6MinimumSize {
		return
	}
	h := header.IPv6(ip)
	end := header.IPv6MinimumSize + int(h.PayloadLength())
	if end > len(ip) {
		return // cut short
	}
	ip = ip[:end] // without what trails the packet in its frame
	src := h.SourceAddress()
	if src.Unspecified() || header.IsV6MulticastAddress(src) || header.IsV6MulticastAddress(h.DestinationAddress()) {
		return // RFC 4443 section 2.4 (e): no error about a packet to a group
	}
	proto, off, ok := ipv6Transport(ip)
	if !ok {
		return
	}
	if proto == uint8(header.ICMPv6ProtocolNumber) && (off >= len(ip) || isICMPv6Error(header.ICMPv6Type(ip[off]))) {
		return // RFC 4443 section 2.4 (e)
	}
	if toRouter && proto == protoTCP {
		e.sendRST(ipv6.ProtocolNumber, h.DestinationAddress(), src, ip[off:])
		return
	}
	e.sendICMPv6Error(src, header.ICMPv6DstUnreachable, header.ICMPv6PortUnreachable, 0, ip)
}

// sendRST answers the TCP segment seg, sent from remote to local, with
// a reset (RFC 9293 section 3.10.7.1: for a segment without ACK, seq 0
// and ACK of its sequence space; else seq = its ACK number).
func (e *Endpoint) sendRST(netProto tcpip.NetworkProtocolNumber, local, remote tcpip.Address, seg []byte) {
	if len(seg) < header.TCPMinimumSize {
		return
	}
	in := header.TCP(seg)
	if in.Flags().Contains(header.TCPFlagRst) {
		return // never answer a reset
	}
	if off := int(in.DataOffset()); off < header.TCPMinimumSize || off > len(seg) {
		return // no header to answer: its data length, the ACK's base, is unknown
	}
	s := e.stack
	if s == nil {
		return
	}
	r, err := s.FindRoute(0, local, remote, netProto, false /* multicastLoop */)
	if err != nil {
		return
	}
	defer r.Release()
	f := header.TCPFields{
		SrcPort:    in.DestinationPort(),
		DstPort:    in.SourcePort(),
		DataOffset: header.TCPMinimumSize,
	}
	if in.Flags().Contains(header.TCPFlagAck) {
		f.SeqNum, f.Flags = in.AckNumber(), header.TCPFlagRst
	} else {
		n := uint32(len(seg) - int(in.DataOffset()))
		if in.Flags().Contains(header.TCPFlagSyn) {
			n++
		}
		if in.Flags().Contains(header.TCPFlagFin) {
			n++
		}
		f.AckNum, f.Flags = in.SequenceNumber()+n, header.TCPFlagRst|header.TCPFlagAck
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: int(r.MaxHeaderLength()) + header.TCPMinimumSize})
	defer pkt.DecRef()
	pkt.TransportProtocolNumber = header.TCPProtocolNumber
	t := header.TCP(pkt.TransportHeader().Push(header.TCPMinimumSize))
	t.Encode(&f)
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, r.LocalAddress(), r.RemoteAddress(), header.TCPMinimumSize)
	t.SetChecksum(^t.CalculateChecksum(xsum))
	_ = r.WritePacket(stack.NetworkHeaderParams{Protocol: header.TCPProtocolNumber, TTL: r.DefaultTTL(), TOS: stack.DefaultTOS}, pkt)
}
