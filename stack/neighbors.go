package stack

import (
	"net"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Neighbor is one entry of an interface's IPv6 neighbour cache (RFC 4861
// §5.1) that netstack holds a link address for.
type Neighbor struct {
	Addr netip.Addr
	MAC  net.HardwareAddr
}

// Neighbors6 returns the IPv6 neighbours of the interface that have a
// link address (states REACHABLE, STALE, DELAY, PROBE and static ones):
// the hosts it has heard from or reached. The DNS forwarder names a DHCP
// lease's host by the SLAAC addresses seen with its MAC. nil when the
// interface does not exist.
func (i *Interface) Neighbors6() []Neighbor {
	entries, err := i.r.s.Neighbors(i.id, ipv6.ProtocolNumber)
	if err != nil {
		return nil
	}
	var out []Neighbor
	for _, e := range entries {
		switch e.State {
		case stack.Reachable, stack.Stale, stack.Delay, stack.Probe, stack.Static:
		default:
			continue
		}
		if len(e.LinkAddr) != 6 {
			continue
		}
		out = append(out, Neighbor{Addr: netip.AddrFrom16(e.Addr.As16()), MAC: net.HardwareAddr(append([]byte(nil), e.LinkAddr...))})
	}
	return out
}
