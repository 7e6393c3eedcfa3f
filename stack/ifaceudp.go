package stack

import (
	"errors"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// ListenUDP returns a UDP socket bound to addr (e.g. 192.168.1.1:5351, or
// 0.0.0.0:1900 for a multicast group's port) that takes datagrams only
// from this interface (SO_BINDTODEVICE), sends multicast out of it, and
// has joined groups (e.g. 239.255.255.250) on it. Port mapping's servers
// use it so that they hear and answer the LAN and nothing else: a
// datagram arriving on another interface never reaches the socket.
func (i *Interface) ListenUDP(addr netip.AddrPort, groups ...netip.Addr) (*UDPConn, error) {
	fail := func(what string, terr tcpip.Error) (*UDPConn, error) {
		return nil, errors.New("stack: listen udp " + addr.String() + " on " + i.name + ": " + what + ": " + terr.String())
	}
	var wq waiter.Queue
	ep, terr := i.r.s.NewEndpoint(udp.ProtocolNumber, protoOf(addr.Addr()), &wq)
	if terr != nil {
		return fail("endpoint", terr)
	}
	if terr := ep.SocketOptions().SetBindToDevice(int32(i.id)); terr != nil {
		ep.Close()
		return fail("bind to device", terr)
	}
	if terr := ep.SetSockOpt(&tcpip.MulticastInterfaceOption{NIC: i.id}); terr != nil {
		ep.Close()
		return fail("multicast interface", terr)
	}
	ep.SocketOptions().SetMulticastLoop(false)
	ep.SocketOptions().SetReuseAddress(true)
	for _, g := range groups {
		if terr := ep.SetSockOpt(&tcpip.AddMembershipOption{NIC: i.id, MulticastAddr: tcpipAddr(g)}); terr != nil {
			ep.Close()
			return fail("join "+g.String(), terr)
		}
	}
	if terr := ep.Bind(*fullAddr(addr)); terr != nil {
		ep.Close()
		return fail("bind", terr)
	}
	return &UDPConn{UDPConn: gonet.NewUDPConn(&wq, ep), ep: ep, wq: &wq, deadline: make(chan struct{})}, nil
}
