package stack

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
)

// InterfaceConfig describes one interface: one netstack NIC.
type InterfaceConfig struct {
	// Name is the NIC name, e.g. "lan" or "eth0.1". Unique.
	Name string
	// MAC is the interface's Ethernet address, e.g. 02:00:00:00:00:01.
	MAC net.HardwareAddr
	// MTU is the L3 MTU, e.g. 1500; 0 means 1500.
	MTU uint32
	// Addresses are the interface's static addresses with their prefix
	// length, e.g. 192.168.1.1/24 and fd00:1::1/64. The first IPv4 one is
	// the primary address (the source of ICMP errors). Each one also makes
	// a connected route for its subnet.
	Addresses []netip.Prefix
	// Writer is where frames for this interface go, e.g. a *hw.Port.
	Writer hw.FrameWriter
	// VLAN is the interface's VIDs, outer first: nil for untagged, [1]
	// for 802.1Q VLAN 1, [100, 10] for QinQ. Each is 1..4094.
	VLAN []uint16
	// VLANProtocol is the outer tag's TPID: TPID8021Q (0x8100, also
	// when 0) or TPID8021AD (0x88a8). Valid iff VLAN is not empty.
	VLANProtocol uint16
	// PCP is the priority (0..7) in the tags of the frames this
	// interface sends; ignored when untagged.
	PCP uint8
	// GRO is the receive coalescing policy, e.g. GROSelective (the zero
	// value).
	GRO GROMode
	// DropNewInput drops new connections to the router's own addresses
	// arriving here (TCP SYN, UDP), after NAT: the input policy of WAN
	// interfaces (config "firewall: wan_input: drop"). ICMP passes.
	DropNewInput bool
	// AdmitUDP are UDP ports of the router's own that new flows may
	// reach despite DropNewInput, e.g. [51820], a WireGuard listen port.
	AdmitUDP []uint16
	// IngressFilter drops IP packets received here from a source outside
	// the interface's subnets and the routes through it (RFC 3704
	// ingress filtering, srcfilter.go): lan interfaces.
	IngressFilter bool
	// EgressFilter drops the router's own packets leaving here with a
	// source inside an IngressFilter interface's prefixes
	// (srcfilter.go): wan interfaces.
	EgressFilter bool
	// PPPoE makes the interface a PPPoE client's link (pppoe.go): point
	// to point, no ARP or NDP, its IP frames carried in the session
	// Interface.SetPPPoESession gives, plain IP frames dropped. A change
	// recreates the interface.
	PPPoE bool
}

// RouteConfig is one static route.
type RouteConfig struct {
	// To is the destination, e.g. 0.0.0.0/0 (default) or 10.2.0.0/16.
	To netip.Prefix
	// Via is the gateway, e.g. 203.0.113.1; zero means on-link.
	Via netip.Addr
	// Dev is the interface name, e.g. "wan"; "" means the interface
	// whose subnet contains Via.
	Dev string
}

// Config is the whole netstack configuration.
type Config struct {
	Interfaces []InterfaceConfig
	Routes     []RouteConfig
	// Links are the point-to-point interfaces on the caller's own link
	// endpoints, e.g. WireGuard's (link.go).
	Links []LinkConfig
	// NAT is the conntrack/NAT engine with its fast path; nil runs the
	// router without conntrack. Only New reads it: the engine is the same
	// for the Netstack's life (reload keeps every tracked flow).
	NAT *natengine.Engine
}

// validate reports every problem in c at once.
func (c *Config) validate() error {
	var errs []error
	names := make(map[string]bool)
	for i, ifc := range c.Interfaces {
		switch {
		case ifc.Name == "":
			errs = append(errs, fmt.Errorf("interface %d: no name", i))
		case names[ifc.Name]:
			errs = append(errs, fmt.Errorf("interface %s: duplicate name", ifc.Name))
		}
		names[ifc.Name] = true
		if len(ifc.MAC) != 6 {
			errs = append(errs, fmt.Errorf("interface %s: MAC %q is not 6 bytes", ifc.Name, ifc.MAC))
		}
		if ifc.Writer == nil {
			errs = append(errs, fmt.Errorf("interface %s: no writer", ifc.Name))
		}
		if ifc.MTU != 0 && ifc.MTU < 68 {
			errs = append(errs, fmt.Errorf("interface %s: MTU %d below 68 (RFC 791)", ifc.Name, ifc.MTU))
		}
		if len(ifc.VLAN) > maxTags {
			errs = append(errs, fmt.Errorf("interface %s: %d VLAN tags, at most %d", ifc.Name, len(ifc.VLAN), maxTags))
		}
		for _, vid := range ifc.VLAN {
			if vid == 0 || vid > maxVID {
				errs = append(errs, fmt.Errorf("interface %s: VLAN %d out of range 1..%d", ifc.Name, vid, maxVID))
			}
		}
		switch {
		case ifc.VLANProtocol != 0 && ifc.VLANProtocol != TPID8021Q && ifc.VLANProtocol != TPID8021AD:
			errs = append(errs, fmt.Errorf("interface %s: VLAN protocol %#04x is neither 0x8100 nor 0x88a8", ifc.Name, ifc.VLANProtocol))
		case ifc.PCP > 7:
			errs = append(errs, fmt.Errorf("interface %s: PCP %d out of range 0..7", ifc.Name, ifc.PCP))
		}
		if int(ifc.GRO) >= len(groModeNames) {
			errs = append(errs, fmt.Errorf("interface %s: unknown %s", ifc.Name, ifc.GRO))
		}
		seen := make(map[netip.Addr]bool)
		for _, p := range ifc.Addresses {
			if !p.IsValid() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
				errs = append(errs, fmt.Errorf("interface %s: invalid address %s", ifc.Name, p))
				continue
			}
			if seen[p.Addr()] {
				errs = append(errs, fmt.Errorf("interface %s: duplicate address %s", ifc.Name, p))
			}
			seen[p.Addr()] = true
		}
	}
	errs = c.validateLinks(names, errs)
	for _, r := range c.Routes {
		if _, err := c.resolveRoute(r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resolveRoute checks r and fills in Dev from Via when it is empty.
func (c *Config) resolveRoute(r RouteConfig) (RouteConfig, error) {
	if !r.To.IsValid() {
		return r, fmt.Errorf("route %s: invalid destination", r.To)
	}
	r.To = r.To.Masked()
	if r.Via.IsValid() && r.Via.Is4() != r.To.Addr().Is4() {
		return r, fmt.Errorf("route %s via %s: address families differ", r.To, r.Via)
	}
	if r.Dev != "" {
		for _, ifc := range c.Interfaces {
			if ifc.Name == r.Dev {
				return r, nil
			}
		}
		for _, l := range c.Links {
			if l.Name == r.Dev {
				return r, nil
			}
		}
		return r, fmt.Errorf("route %s: no interface %q", r.To, r.Dev)
	}
	if !r.Via.IsValid() {
		return r, fmt.Errorf("route %s: neither gateway nor interface", r.To)
	}
	for _, ifc := range c.Interfaces {
		for _, p := range ifc.Addresses {
			if p.Masked().Contains(r.Via) {
				r.Dev = ifc.Name
				return r, nil
			}
		}
	}
	for _, l := range c.Links {
		for _, p := range l.Addresses {
			if p.Masked().Contains(r.Via) {
				r.Dev = l.Name
				return r, nil
			}
		}
	}
	return r, fmt.Errorf("route %s: gateway %s is on no interface's subnet", r.To, r.Via)
}
