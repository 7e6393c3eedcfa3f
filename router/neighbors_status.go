package router

import (
	"net"
	"net/netip"
	"strings"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/router/status"
)

// neighborsStatusLocked returns netstack's ARP and NDP neighbour tables
// of every interface for the status page: the hosts on each network the
// router has resolved or heard from. r.mu must be held (for r.net).
func (r *Router) neighborsStatusLocked() []status.Neighbor {
	return neighborsStatus(r.net.Stack())
}

// neighborsStatus reads the neighbour tables of every NIC of s, named by
// their NIC names (the interface names).
func neighborsStatus(s *gstack.Stack) []status.Neighbor {
	out := []status.Neighbor{}
	for id, info := range s.NICInfo() {
		for _, proto := range []tcpip.NetworkProtocolNumber{ipv4.ProtocolNumber, ipv6.ProtocolNumber} {
			entries, err := s.Neighbors(id, proto)
			if err != nil {
				continue // the NIC went away, or has no neighbour table (loopback)
			}
			for _, e := range entries {
				a, ok := netip.AddrFromSlice(e.Addr.AsSlice())
				if !ok {
					continue
				}
				mac := ""
				if len(e.LinkAddr) == 6 {
					mac = net.HardwareAddr(e.LinkAddr).String()
				}
				out = append(out, status.Neighbor{Interface: info.Name, Address: a, MAC: mac, State: strings.ToLower(e.State.String())})
			}
		}
	}
	return out
}
