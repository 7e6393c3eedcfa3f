package stack

import (
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// The forward guard refuses, in the CheckForward hook, the packets that
// the pinned gVisor's forward path cannot send and does not know how to
// refuse. Its handleForwardingError (network/ipv4 and network/ipv6)
// panics on every tcpip.Error from the egress write other than
// ErrClosedForSend, ErrNoBufferSpace and ErrMessageTooLong, and
// writePacket/writePacketPostRouting raise two of them before anything
// reaches a link endpoint, in calculateNetworkMTU:
//
//   - ErrMalformedHeader for an IPv6 header chain (the fixed header plus
//     the extension headers that parse.IPv6 puts into NetworkHeader: up
//     to the upper-layer header, or the Fragment header) longer than
//     1280 bytes. One such packet from any host the router forwards for,
//     or a reply from any server a LAN host talks to, would kill the
//     process. RFC 7112 section 5 lets a router drop a packet whose
//     chain it cannot process, and RFC 8883 section 4.3.3 defines the
//     error it sends: Parameter Problem, code 7 "extension header chain
//     too long", the pointer at the first octet beyond the limit.
//   - ErrInvalidEndpointState for an egress link MTU below the family's
//     minimum (68 for IPv4, RFC 791; 1280 for IPv6, RFC 8200 section 5),
//     which a MACsec interface on a small lower MTU, a config MTU on an
//     interface without addresses of that family, or a DHCP/RA MTU option
//     can set. No ICMP error fits (the packet is not too big: the link
//     is too small for the protocol), so it is a counted drop.
//
// The hook runs in forwardPacketWithRoute before the packet is copied and
// before calculateNetworkMTU, with the same inputs, so the two checks see
// exactly what would fail. Each refusal is counted on the ingress
// interface (drop reasons ipv6_header_chain and
// egress_mtu_below_minimum). The rest of the error class is handled
// elsewhere: IPv4 headers cannot exceed 60 bytes (the IHL field), and our
// endpoints' WritePackets returns only ErrClosedForSend.

// Forward guard limits.
const (
	// maxForwardHeaderChain is calculateNetworkMTU's IPv6 limit: the
	// IPv6 minimum MTU (RFC 7112 section 5).
	maxForwardHeaderChain = header.IPv6MinimumMTU
	// icmpv6ParamProblemChainTooLong is RFC 8883 section 4.3.3's code.
	icmpv6ParamProblemChainTooLong = 7
	// icmpv6ErrorMaxQuote keeps an ICMPv6 error within the minimum MTU
	// (RFC 4443 section 2.4 (c)).
	icmpv6ErrorMaxQuote = header.IPv6MinimumMTU - header.IPv6MinimumSize - header.ICMPv6ErrorHeaderSize
)

// refuseForward reports whether the forward of pkt over route must be
// refused (see the guard's comment above); it counts the refusal and
// answers a too-long header chain with Parameter Problem. route is nil
// when netstack hands a packet to one of its own addresses on another NIC,
// which writes nothing and is not checked.
func (p *forwardPins) refuseForward(pkt *stack.PacketBuffer, route *stack.Route, af stack.AddressFamily) bool {
	if route == nil {
		return false
	}
	var reason dropReason
	switch af {
	case stack.IP6:
		if p.refuseUnassigned(pkt) {
			return true
		}
		if len(pkt.NetworkHeader().Slice()) > maxForwardHeaderChain {
			reason = dropHeaderChain
		} else if p.egressTooSmall(route, header.IPv6MinimumMTU) {
			reason = dropEgressMTU
		} else {
			return false
		}
	case stack.IP:
		if p.egressTooSmall(route, header.IPv4MinimumMTU) {
			reason = dropEgressMTU
		} else {
			return false
		}
	default:
		return false
	}
	if in := p.endpoint(pkt.NICID); in != nil {
		in.stats.drop(reason)
		if reason == dropHeaderChain {
			in.sendHeaderChainTooLong(pkt)
		}
	}
	return true
}

// endpoint returns our endpoint of NIC id, or nil.
func (p *forwardPins) endpoint(id tcpip.NICID) *Endpoint {
	if p.egress == nil {
		return nil
	}
	tab := p.egress.Load()
	if tab == nil {
		return nil
	}
	return tab.get(natIface(id))
}

// egressTooSmall reports whether route's egress link MTU, as netstack
// reads it (our endpoint's MTU), is below min. For a NIC not yet (or no
// longer) in the table, during a reload, it asks the route: its MTU is 0
// exactly when calculateNetworkMTU fails, since the router's routes carry
// no MTU of their own.
func (p *forwardPins) egressTooSmall(route *stack.Route, min uint32) bool {
	if ep := p.endpoint(route.NICID()); ep != nil {
		return ep.MTU() < min
	}
	return route.MTU() == 0
}

// sendHeaderChainTooLong answers pkt, an IPv6 packet received on e whose
// header chain is longer than maxForwardHeaderChain, with ICMPv6
// Parameter Problem code 7 pointing at octet 1280 (RFC 8883 section
// 4.3.3), quoting as much of pkt as fits in the minimum MTU. It follows
// RFC 4443 section 2.4: no error about an ICMPv6 error, or to a source
// that is not a unicast host; rate limited by netstack's ICMP limiter;
// the source address is netstack's choice for the ingress interface.
// It runs on the receive goroutine, inside the forward hook, only for
// refused packets.
func (e *Endpoint) sendHeaderChainTooLong(pkt *stack.PacketBuffer) {
	chain := pkt.NetworkHeader().Slice()
	h := header.IPv6(chain)
	src := h.SourceAddress()
	if src.Unspecified() || header.IsV6MulticastAddress(src) || header.IsV6LoopbackAddress(src) {
		return
	}
	if proto, _, ok := ipv6Transport(chain); ok && proto == uint8(header.ICMPv6ProtocolNumber) {
		// The chain ends where the ICMPv6 header starts: in pkt.Data().
		if t, ok := pkt.Data().PullUp(1); ok && isICMPv6Error(header.ICMPv6Type(t[0])) {
			return
		}
	}
	quote := stack.PayloadSince(pkt.NetworkHeader())
	defer quote.Release()
	e.sendICMPv6Error(src, header.ICMPv6ParamProblem, icmpv6ParamProblemChainTooLong, maxForwardHeaderChain, quote.AsSlice())
}

// sendICMPv6Error sends an ICMPv6 error of type typ and code (e.g.
// Parameter Problem, RFC 4443 section 3.4, with its pointer in
// typeSpecific) to dst, an IPv6 unicast source of a packet received on e,
// quoting quote cut to fit in the minimum MTU (RFC 4443 section 2.4 (c)). The source address is netstack's choice for e's interface; sends
// are rate limited by netstack's ICMP limiter. The caller has applied the
// rest of RFC 4443 section 2.4 (e) (no error about an error, to a
// multicast source, or about a packet to a group).
func (e *Endpoint) sendICMPv6Error(dst tcpip.Address, typ header.ICMPv6Type, code header.ICMPv6Code, typeSpecific uint32, quote []byte) {
	s := e.stack
	if s == nil || !s.AllowICMPMessage() {
		return
	}
	r, err := s.FindRoute(e.nicID, tcpip.Address{}, dst, ipv6.ProtocolNumber, false /* multicastLoop */)
	if err != nil {
		return
	}
	defer r.Release()
	quote = quote[:min(len(quote), icmpv6ErrorMaxQuote)]
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		ReserveHeaderBytes: int(r.MaxHeaderLength()) + header.ICMPv6ErrorHeaderSize,
		Payload:            buffer.MakeWithData(quote),
	})
	defer pkt.DecRef()
	pkt.TransportProtocolNumber = header.ICMPv6ProtocolNumber
	icmp := header.ICMPv6(pkt.TransportHeader().Push(header.ICMPv6ErrorHeaderSize))
	icmp.SetType(typ)
	icmp.SetCode(code)
	icmp.SetTypeSpecific(typeSpecific)
	icmp.SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{
		Header:      icmp,
		Src:         r.LocalAddress(),
		Dst:         r.RemoteAddress(),
		PayloadCsum: pkt.Data().Checksum(),
		PayloadLen:  pkt.Data().Size(),
	}))
	_ = r.WritePacket(stack.NetworkHeaderParams{
		Protocol: header.ICMPv6ProtocolNumber,
		TTL:      r.DefaultTTL(),
		TOS:      stack.DefaultTOS,
	}, pkt)
}

// isICMPv6Error reports whether t is an ICMPv6 error message type (RFC
// 4443 section 2.1: types 0-127).
func isICMPv6Error(t header.ICMPv6Type) bool { return t < 128 }
