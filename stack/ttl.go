package stack

import (
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// sendTimeExceeded answers an IPv4 packet that arrived with TTL <= 1 and
// was not for the router with ICMP Time Exceeded, code 0 (RFC 792), from
// the ingress interface's primary IPv4 address, as gVisor does for its
// own ICMP errors. The error quotes the packet as received (TTL 1) up to
// 576 bytes in all (RFC 1812 section 4.3.2.3). It is rate limited by
// netstack's global ICMP limiter and routed through netstack, which
// resolves the neighbour. ip is the IPv4 packet, already validated by
// classify4; it is only read.
//
// This runs on the receive goroutine, only for expired packets.
func (e *Endpoint) sendTimeExceeded(ip []byte) {
	s := e.stack
	if s == nil {
		return
	}
	h, _, ok := ipv4Parts(ip)
	if !ok || !mayAnswerWithICMP(h) || !s.AllowICMPMessage() {
		return
	}
	src, err := s.GetMainNICAddress(e.nicID, ipv4.ProtocolNumber)
	if err != nil || src.Address.BitLen() == 0 {
		return
	}
	r, err := s.FindRoute(e.nicID, src.Address, h.SourceAddress(), ipv4.ProtocolNumber, false /* multicastLoop */)
	if err != nil {
		return
	}
	defer r.Release()

	quote := ip[:min(int(h.TotalLength()), icmpErrorMaxSize-header.IPv4MinimumSize-header.ICMPv4MinimumSize)]
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		ReserveHeaderBytes: int(r.MaxHeaderLength()) + header.ICMPv4MinimumSize,
		Payload:            buffer.MakeWithData(quote),
	})
	defer pkt.DecRef()
	pkt.TransportProtocolNumber = header.ICMPv4ProtocolNumber
	icmp := header.ICMPv4(pkt.TransportHeader().Push(header.ICMPv4MinimumSize))
	icmp.SetType(header.ICMPv4TimeExceeded)
	icmp.SetCode(header.ICMPv4TTLExceeded)
	icmp.SetChecksum(header.ICMPv4Checksum(icmp, pkt.Data().Checksum()))
	_ = r.WritePacket(stack.NetworkHeaderParams{
		Protocol: header.ICMPv4ProtocolNumber,
		TTL:      r.DefaultTTL(),
		TOS:      stack.DefaultTOS,
	}, pkt)
}

// mayAnswerWithICMP applies RFC 1812 section 4.3.2.7: no ICMP error about
// an ICMP error, a non-initial fragment, or a packet whose source is not
// a unique host (unspecified, loopback, multicast, broadcast, class E).
func mayAnswerWithICMP(h header.IPv4) bool {
	if h.FragmentOffset() != 0 {
		return false
	}
	src := h.SourceAddress().As4()
	if src[0] == 0 || src[0] == 127 || src[0] >= 224 {
		return false
	}
	if h.Protocol() == uint8(header.ICMPv4ProtocolNumber) {
		payload := h.Payload()
		if len(payload) < 1 || isICMPv4Error(header.ICMPv4Type(payload[0])) {
			return false
		}
	}
	return true
}

func isICMPv4Error(t header.ICMPv4Type) bool {
	switch t {
	case header.ICMPv4DstUnreachable, header.ICMPv4SrcQuench, header.ICMPv4Redirect,
		header.ICMPv4TimeExceeded, header.ICMPv4ParamProblem:
		return true
	}
	return false
}
