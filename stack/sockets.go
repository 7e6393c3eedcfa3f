package stack

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
)

// Sockets for the router's own services (DNS, the status page), in
// netstack: the host kernel never sees their traffic.

func protoOf(a netip.Addr) tcpip.NetworkProtocolNumber {
	if a.Unmap().Is4() {
		return ipv4.ProtocolNumber
	}
	return ipv6.ProtocolNumber
}

func fullAddr(ap netip.AddrPort) *tcpip.FullAddress {
	fa := &tcpip.FullAddress{Port: ap.Port()}
	if a := ap.Addr().Unmap(); a.IsValid() && !a.IsUnspecified() {
		fa.Addr = tcpipAddr(a)
	}
	return fa
}

// ListenUDP returns a UDP socket in the router's netstack bound to addr,
// e.g. 192.168.1.1:53.
func (r *Netstack) ListenUDP(addr netip.AddrPort) (net.PacketConn, error) {
	c, err := gonet.DialUDP(r.s, fullAddr(addr), nil, protoOf(addr.Addr()))
	if err != nil {
		return nil, fmt.Errorf("stack: listen udp %s: %w", addr, err)
	}
	return c, nil
}

// DialUDP returns a UDP socket in the router's netstack connected to
// raddr from local port lport (0: netstack picks one), from the address
// routing chooses.
func (r *Netstack) DialUDP(lport uint16, raddr netip.AddrPort) (net.Conn, error) {
	var laddr *tcpip.FullAddress
	if lport != 0 {
		laddr = &tcpip.FullAddress{Port: lport}
	}
	c, err := gonet.DialUDP(r.s, laddr, fullAddr(raddr), protoOf(raddr.Addr()))
	if err != nil {
		return nil, fmt.Errorf("stack: dial udp %s from port %d: %w", raddr, lport, err)
	}
	return c, nil
}

// DialTCP opens a TCP connection in the router's netstack to raddr.
func (r *Netstack) DialTCP(ctx context.Context, raddr netip.AddrPort) (net.Conn, error) {
	c, err := gonet.DialContextTCP(ctx, r.s, *fullAddr(raddr), protoOf(raddr.Addr()))
	if err != nil {
		return nil, fmt.Errorf("stack: dial tcp %s: %w", raddr, err)
	}
	return c, nil
}
