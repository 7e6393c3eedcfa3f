package stack

import (
	"errors"
	"math"
	"net/netip"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

// writeBatchRouted sends bufs to addr as the socket's own write would,
// datagram by datagram, but with one route for the whole batch: on an
// unconnected socket netstack looks the route up (and allocates it) for
// every datagram, which was most of the cost of a WireGuard Bind's send.
// Each datagram still goes through the route's network output (IP
// header, the stack's output hooks, neighbour, link), so the router's
// own-flow rules and counters see what they would see otherwise; the
// UDP header and the send counters are written here as netstack's UDP
// write does.
//
// It returns how many datagrams it sent and a write error that stops the
// batch. It sends none, with no error, where the case is not the plain
// one it handles (a socket closed, connected or bound to another
// family, a pending socket error, a multicast or broadcast destination,
// no route): the caller's per-datagram write then gives netstack's own
// answer.
func (c *UDPConn) writeBatchRouted(bufs [][]byte, addr netip.AddrPort) (int, error) {
	dst := addr.Addr()
	if addr.Port() == 0 || dst.Is4In6() || dst.IsMulticast() || (dst.Is4() && dst == netip.AddrFrom4([4]byte{255, 255, 255, 255})) {
		return 0, nil
	}
	if c.ep.State() != uint32(transport.DatagramEndpointStateBound) {
		return 0, nil
	}
	info, ok := c.ep.Info().(*stack.TransportEndpointInfo)
	if !ok || info.NetProto != protoOf(dst) {
		return 0, nil
	}
	if err := c.ep.LastError(); err != nil {
		// Put it back for the per-datagram write, which reports it.
		if h, ok := c.ep.(interface{ UpdateLastError(tcpip.Error) }); ok {
			h.UpdateLastError(err)
		}
		return 0, nil
	}
	nic := tcpip.NICID(c.ep.SocketOptions().GetBindToDevice())
	if nic == 0 {
		nic = info.BindNICID
	}
	local := info.ID.LocalAddress
	route, terr := c.s.FindRoute(nic, local, tcpipAddrFast(dst), info.NetProto, false)
	if terr != nil {
		return 0, nil
	}
	defer route.Release()
	if route.IsOutboundBroadcast() {
		return 0, nil
	}
	params := c.headerParams(route)
	sum := route.RequiresTXTransportChecksum() && (info.NetProto == header.IPv6ProtocolNumber || !c.ep.SocketOptions().GetNoChecksum())
	reserve := header.UDPMinimumSize + int(route.MaxHeaderLength())
	stats := c.s.Stats()
	epStats, _ := c.ep.Stats().(*tcpip.TransportEndpointStats)
	for i, b := range bufs {
		if len(b) > header.UDPMaximumPacketSize-header.UDPMinimumSize {
			return i, nil // netstack's write answers it
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
			ReserveHeaderBytes: reserve,
			Payload:            buffer.MakeWithData(b),
		})
		u := header.UDP(pkt.TransportHeader().Push(header.UDPMinimumSize))
		pkt.TransportProtocolNumber = udp.ProtocolNumber
		length := uint16(header.UDPMinimumSize + len(b))
		u.Encode(&header.UDPFields{SrcPort: info.ID.LocalPort, DstPort: addr.Port(), Length: length})
		if sum {
			xsum := u.CalculateChecksum(checksum.Combine(
				header.PseudoHeaderChecksum(udp.ProtocolNumber, route.LocalAddress(), route.RemoteAddress(), length),
				checksum.Checksum(b, 0)))
			if xsum != math.MaxUint16 { // RFC 768: a zero sum is sent as all ones
				xsum = ^xsum
			}
			u.SetChecksum(xsum)
		}
		terr := route.WritePacket(params, pkt)
		pkt.DecRef()
		if terr != nil {
			stats.UDP.PacketSendErrors.Increment()
			if epStats != nil {
				epStats.SendErrors.SendToNetworkFailed.Increment()
			}
			return i, errors.New("stack: udp write: " + terr.String())
		}
		stats.UDP.PacketsSent.Increment()
		if epStats != nil {
			epStats.PacketsSent.Increment()
		}
	}
	return len(bufs), nil
}

// headerParams is the IP header the socket's options ask for on route, as
// netstack's write derives it: TTL or hop limit (the route's default
// unless set), TOS or traffic class, and DF unless path MTU discovery is
// off.
func (c *UDPConn) headerParams(route *stack.Route) stack.NetworkHeaderParams {
	p := stack.NetworkHeaderParams{Protocol: udp.ProtocolNumber, TTL: route.DefaultTTL()}
	// An unset TTL reads 0 (IPv4) or -1 (IPv6 hop limit).
	ttlOpt, tosOpt, unset := tcpip.IPv4TTLOption, tcpip.IPv4TOSOption, 0
	if route.NetProto() == header.IPv6ProtocolNumber {
		ttlOpt, tosOpt, unset = tcpip.IPv6HopLimitOption, tcpip.IPv6TrafficClassOption, -1
	}
	if v, err := c.ep.GetSockOptInt(ttlOpt); err == nil && v > unset {
		p.TTL = uint8(v)
	}
	if v, err := c.ep.GetSockOptInt(tosOpt); err == nil {
		p.TOS = uint8(v)
	}
	if v, err := c.ep.GetSockOptInt(tcpip.MTUDiscoverOption); err == nil {
		switch tcpip.PMTUDStrategy(v) {
		case tcpip.PMTUDiscoveryWant, tcpip.PMTUDiscoveryDo, tcpip.PMTUDiscoveryProbe:
			p.DF = true
		}
	}
	return p
}
