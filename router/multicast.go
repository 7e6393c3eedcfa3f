package router

import (
	"net"
	"net/netip"
	"slices"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/hw/xdpport"
	"github.com/gvrouter/gvrouter/mka"
	"github.com/gvrouter/gvrouter/router/config"
)

// IPv6 groups of RFC 4291 §2.7.1 and RFC 8415 §7.1.
var (
	allNodes      = [16]byte{0xff, 0x02, 15: 1}
	allRouters    = [16]byte{0xff, 0x02, 15: 2}
	allDHCPAgents = [16]byte{0xff, 0x02, 13: 1, 15: 2}
)

// multicastSetter is a port whose NIC filter can be told which multicast
// groups to accept (*hw.Port, *xdpport.Port); the host TAP accepts
// everything.
type multicastSetter interface {
	SetMulticast([]net.HardwareAddr) error
}

var (
	_ multicastSetter = (*hw.Port)(nil)
	_ multicastSetter = (*xdpport.Port)(nil)
)

// portGroups returns the Ethernet multicast groups the router's
// interfaces on port (mac) must hear, in a stable order. The port's
// kernel interface has IPv6 off, so without these a real NIC drops the
// neighbour solicitations for the router's addresses, the hosts' router
// solicitations and their DHCPv6 (veths accept everything and hide it):
//
//   - all-nodes (ff02::1): RAs from the ISP, netstack's own NDP;
//   - the solicited-node group of the link-local address (EUI-64 of the
//     MAC, as netstack forms it) and of every static IPv6 address of the
//     port's interfaces and of the SecYs on them;
//   - the PAE group (01-80-C2-00-00-03, 802.1X 11.1.1) on an interface
//     whose SecY runs MKA: MKPDUs go there;
//   - on an interface of a zone permitted to map ports with UPnP on
//     (port_mapping:, config.PortMapIfaces), SSDP's
//     239.255.255.250: the M-SEARCHes of the LAN's UPnP clients;
//   - on a lan interface, all-routers (ff02::2: RS, RFC 4291 §2.8 makes a
//     router a member) and, with its stateless DHCPv6 server on,
//     all-DHCP-agents (ff02::1:2).
func portGroups(cfg *config.Config, port string, mac net.HardwareAddr) []net.HardwareAddr {
	var groups []net.HardwareAddr
	add := func(m net.HardwareAddr) {
		if !slices.ContainsFunc(groups, func(g net.HardwareAddr) bool { return string(g) == string(m) }) {
			groups = append(groups, m)
		}
	}
	seen := false
	for i := range cfg.Interfaces {
		ic := &cfg.Interfaces[i]
		if ic.Port != port {
			continue
		}
		if !seen {
			seen = true
			add(hw.IPv6MulticastMAC(allNodes))
			if len(mac) == 6 {
				add(hw.SolicitedNodeMAC(eui64LinkLocal(mac)))
			}
		}
		for _, p := range ic.Addresses {
			if p.Addr().Is6() && !p.Addr().Is4In6() {
				add(hw.SolicitedNodeMAC(p.Addr().As16()))
			}
		}
		for _, ms := range cfg.MACsec {
			if ms.On != ic.Name {
				continue
			}
			for _, p := range ms.Addresses {
				if p.Addr().Is6() {
					add(hw.SolicitedNodeMAC(p.Addr().As16()))
				}
			}
			if ms.MKA != nil {
				add(net.HardwareAddr(mka.PAEGroupAddress[:]))
			}
		}
		if cfg.PortMapping != nil && cfg.PortMapping.UPnP && slices.ContainsFunc(cfg.PortMapIfaces(), func(pi config.PortMapIface) bool { return pi.Name == ic.Name && pi.Permitted }) {
			add(ipv4MulticastMAC(ssdpGroup))
		}
		if ic.Role == config.RoleLAN {
			add(hw.IPv6MulticastMAC(allRouters))
			if cfg.IPv6Settings(ic).DHCPv6 {
				add(hw.IPv6MulticastMAC(allDHCPAgents))
			}
		}
	}
	return groups
}

// eui64LinkLocal is the link-local address netstack generates for mac
// (RFC 4291 appendix A: fe80::, the MAC with ff:fe in its middle and the
// universal/local bit flipped).
func eui64LinkLocal(mac net.HardwareAddr) [16]byte {
	return [16]byte{0xfe, 0x80, 8: mac[0] ^ 2, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe, 13: mac[3], 14: mac[4], 15: mac[5]}
}

// syncMulticastLocked puts each port's groups (portGroups) on its NIC's
// filter. A failure is logged, not fatal: the router still works on a
// NIC that accepts the groups anyway (most do for all-nodes).
func (r *Router) syncMulticastLocked() {
	for name, rp := range r.ports {
		ms, ok := rp.port.(multicastSetter)
		if !ok {
			continue
		}
		if err := ms.SetMulticast(portGroups(r.cfg, name, rp.port.HardwareAddr())); err != nil {
			r.log.Warn("port multicast groups", "port", name, "err", err)
		}
	}
}

// ipv4MulticastMAC is the Ethernet group of IPv4 group a: 01-00-5e and
// its low 23 bits (RFC 1112 section 6.4).
func ipv4MulticastMAC(a netip.Addr) net.HardwareAddr {
	b := a.As4()
	return net.HardwareAddr{0x01, 0x00, 0x5e, b[1] & 0x7f, b[2], b[3]}
}
