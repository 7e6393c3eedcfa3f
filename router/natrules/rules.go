// Package natrules compiles the config's NAT, firewall and forwarding
// settings into the NAT engine's terms: its construction-time Config and
// the Rules a reload swaps in. It is pure: the runtime gives it the
// interface IDs and port MTUs it has.
package natrules

import (
	"net/netip"
	"slices"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/stack"
	"github.com/gvrouter/gvrouter/wireguard"
)

// EngineConfig is the construction-time part of the NAT config: the table
// size, its per-host limits and router reserve, and the timeouts. They
// cannot change without a restart.
func EngineConfig(cfg *config.Config) natengine.Config {
	t := cfg.NAT.Conntrack.Timeouts
	return natengine.Config{
		MaxConns:        cfg.NAT.MaxConns(),
		MaxConnsPerHost: cfg.NAT.ConnsPerHost(),
		MaxPortsPerHost: cfg.NAT.PortsPerHost(),
		RouterReserve:   cfg.NAT.RouterReserve(),
		Timeouts: natengine.Timeouts{ // zero fields take the engine's defaults
			TCPEstablished: t.TCPEstablished,
			TCPTransitory:  t.TCPTransitory,
			UDPUnreplied:   t.UDPUnreplied,
			UDPStream:      t.UDPStream,
			ICMPQuery:      t.ICMP,
			Other:          t.Other,
		},
	}
}

// IDs maps an interface name to the engine's ID for it (the stack's
// NATIface); ok is false for an interface the stack does not have.
type IDs func(name string) (natengine.Iface, bool)

// Compile builds the engine's rules from cfg. ids gives each interface's
// engine ID; interfaces the stack does not have (a port that failed to
// open) are left out, with the forwards that listen on them. portMTU gives
// the MTU of an interface that sets none (its port's). reserved lists the
// router's own listening sockets, which SNAT must never allocate.
func Compile(cfg *config.Config, ids IDs, portMTU func(port string) int, reserved []Reserved) natengine.Rules {
	n := &cfg.NAT
	r := natengine.Rules{
		Hairpin:   n.HairpinOn(),
		Filtering: filteringOf(n.FilteringMode()),
	}
	id := make(map[string]natengine.Iface)
	var wans []string
	for _, ic := range cfg.Interfaces {
		nid, ok := ids(ic.Name)
		if !ok {
			continue
		}
		id[ic.Name] = nid
		mtu := ic.MTU
		switch {
		case mtu == 0 && ic.WireGuard != nil:
			// The tunnel's default, not a port's: the fast path
			// forwards into the tunnel and must leave what is larger
			// to netstack (frag-needed, packet-too-big).
			mtu = wireguard.DefaultMTU
		case mtu == 0 && portMTU != nil:
			mtu = portMTU(ic.Port)
		}
		c := natengine.IfaceConfig{
			ID:         nid,
			Name:       ic.Name,
			WAN:        ic.Role == config.RoleWAN,
			Masquerade: slices.Contains(n.Masquerade, ic.Name),
			MTU:        mtu,
		}
		for _, p := range ic.Addresses {
			c.Addrs = append(c.Addrs, p.Addr())
			c.Subnets = append(c.Subnets, p.Masked())
		}
		for _, s := range n.SNAT {
			if s.On == ic.Name {
				c.SNAT = append(c.SNAT, s.To...)
			}
		}
		if c.WAN && has4(&ic) {
			wans = append(wans, ic.Name)
		}
		r.Ifaces = append(r.Ifaces, c)
	}
	// SecYs are NICs of their own. Their link is authenticated, so they
	// are never outside interfaces, but the engine needs them as egress
	// interfaces to offload flows through them (their MTU is the lower
	// one's minus the SecTAG and ICV, as Linux).
	for _, ms := range cfg.MACsec {
		nid, ok := ids(ms.Name)
		if !ok {
			continue
		}
		mtu := ms.MTU
		if lower := cfg.Interface(ms.On); mtu == 0 && lower != nil {
			mtu = lower.MTU
			if mtu == 0 && portMTU != nil {
				mtu = portMTU(lower.Port)
			}
			if mtu > 0 {
				mtu -= stack.MACsecOverhead
			}
		}
		c := natengine.IfaceConfig{ID: nid, Name: ms.Name, Masquerade: slices.Contains(n.Masquerade, ms.Name), MTU: mtu}
		for _, p := range ms.Addresses {
			c.Addrs = append(c.Addrs, p.Addr())
			c.Subnets = append(c.Subnets, p.Masked())
		}
		id[ms.Name] = nid
		r.Ifaces = append(r.Ifaces, c)
	}
	// Routed networks behind an inside interface are inside too: a WAN
	// packet from one of them is spoofed like one from a connected
	// subnet (natengine.IfaceConfig.Subnets). Default routes say nothing.
	for _, rt := range cfg.Routes {
		if rt.To.Bits() == 0 {
			continue
		}
		for i := range r.Ifaces {
			c := &r.Ifaces[i]
			if rt.Dev == c.Name || rt.Dev == "" && slices.ContainsFunc(c.Subnets, func(p netip.Prefix) bool { return p.Contains(rt.Via) }) {
				c.Subnets = append(c.Subnets, rt.To)
				break
			}
		}
	}
	for _, f := range n.Forwards {
		on := []string{f.On}
		if f.On == "" {
			on = wans
		}
		for _, name := range on {
			nid, ok := id[name]
			if !ok || !has4(cfg.Interface(name)) {
				continue // a DHCP interface without a lease yet: back with the lease
			}
			r.Forwards = append(r.Forwards, natengine.Forward{
				Proto:     protoOf(f.Proto),
				In:        nid,
				FirstPort: f.FirstPort,
				LastPort:  f.LastPort,
				To:        f.To,
			})
		}
	}
	r.Forwards = append(r.Forwards, hostForwards(cfg, id)...)
	r.Forwards = append(r.Forwards, redirectForwards(cfg, id)...)
	zoneIfaceFlags(cfg, r.Ifaces)
	r.Zones = ruleset(cfg, id, r.Ifaces)
	for _, a := range cfg.Firewall.Allow6 {
		proto, any := a.ProtoNumber()
		for _, dst := range allow6Dsts(cfg, a) {
			r.Allow6 = append(r.Allow6, natengine.Allow6{
				Proto:     proto,
				AnyProto:  any,
				Dst:       dst,
				FirstPort: a.FirstPort,
				LastPort:  a.LastPort,
			})
		}
	}
	if len(reserved) > 0 {
		set := make(map[Reserved]bool, len(reserved))
		for _, p := range reserved {
			set[p] = true
		}
		r.Reserved = func(proto uint8, addr netip.Addr, port uint16) bool {
			return set[Reserved{proto, addr.Unmap(), port}]
		}
	}
	return r
}

// has4 reports whether ic has an IPv4 address now (a DHCP interface
// only while it holds a lease).
func has4(ic *config.Interface) bool {
	return ic != nil && slices.ContainsFunc(ic.Addresses, func(p netip.Prefix) bool { return p.Addr().Is4() })
}

// DropNewInput reports whether new flows to the router arriving on ic
// are dropped: wan interfaces under firewall: wan_input: drop. With
// firewall: zones: the zones' input policies decide, in the engine.
func DropNewInput(cfg *config.Config, ic config.Interface) bool {
	return ic.Role == config.RoleWAN && cfg.Firewall.WANInputDrop() && len(cfg.Firewall.Zones) == 0
}

// Reserved is a port one of the router's own netstack sockets uses.
type Reserved struct {
	Proto uint8
	Addr  netip.Addr
	Port  uint16
}

// ReservedPorts lists the netstack listeners cfg asks for (the status
// page's interface:port entries, WireGuard listen ports) and the extra
// ones (the bench sink).
func ReservedPorts(cfg *config.Config, extra []netip.AddrPort) []Reserved {
	var out []Reserved
	for _, l := range cfg.Status.Listen {
		ic := cfg.Interface(l.Interface)
		if l.Interface == "" || ic == nil {
			continue // a host listener is the kernel's
		}
		for _, p := range ic.Addresses {
			out = append(out, Reserved{natengine.ProtoTCP, p.Addr(), l.Port})
		}
	}
	for _, ap := range extra {
		out = append(out, Reserved{natengine.ProtoTCP, ap.Addr().Unmap(), ap.Port()})
	}
	// A WireGuard listen port: the router's UDP socket holds it on
	// every address (router/wireguard.go).
	for _, w := range cfg.Interfaces {
		if w.WireGuard == nil || w.WireGuard.ListenPort == 0 {
			continue
		}
		for _, ic := range cfg.Interfaces {
			for _, p := range ic.Addresses {
				out = append(out, Reserved{natengine.ProtoUDP, p.Addr(), uint16(w.WireGuard.ListenPort)})
			}
		}
	}
	return out
}

func protoOf(s string) uint8 {
	switch s {
	case config.ProtoTCP:
		return natengine.ProtoTCP
	case config.ProtoUDP:
		return natengine.ProtoUDP
	}
	return 0
}

func filteringOf(s string) natengine.Filtering {
	switch s {
	case config.FilteringEndpointIndependent:
		return natengine.EndpointIndependent
	case config.FilteringAddressDependent:
		return natengine.AddressDependent
	}
	return natengine.AddressAndPortDependent
}

// RestartNeeded reports what of the conntrack config a reload cannot
// change (the engine is built once), or "".
func RestartNeeded(old, cfg *config.Config) string {
	switch {
	case old.NAT.MaxConns() != cfg.NAT.MaxConns():
		return "nat: conntrack: max"
	case old.NAT.Conntrack.Timeouts != cfg.NAT.Conntrack.Timeouts:
		return "nat: conntrack: timeouts"
	case old.NAT.ConnsPerHost() != cfg.NAT.ConnsPerHost():
		return "nat: conntrack: per_host"
	case old.NAT.PortsPerHost() != cfg.NAT.PortsPerHost():
		return "nat: conntrack: ports_per_host"
	case old.NAT.RouterReserve() != cfg.NAT.RouterReserve():
		return "nat: conntrack: router_reserve"
	}
	return ""
}

// RoutingChanged reports whether interfaces or routes differ, so offloaded
// flows may now take another way.
func RoutingChanged(old, cfg *config.Config) bool {
	return !slices.EqualFunc(old.Interfaces, cfg.Interfaces, config.Interface.Equal) ||
		!slices.EqualFunc(old.Routes, cfg.Routes, config.Route.Equal) ||
		!slices.EqualFunc(old.Ports, cfg.Ports, config.Port.Equal)
}

// allow6Dsts is what an allow6 rule admits flows to: its to: prefix, or
// for a suffix: rule the host with that interface ID in each IPv6 /64 of
// the lan interfaces (or of its interface:) in force, delegated ones
// included, so the rule follows a renumbering by the ISP.
func allow6Dsts(cfg *config.Config, a config.Allow6) []netip.Prefix {
	if !a.Suffix.IsValid() {
		return []netip.Prefix{a.To}
	}
	id := a.Suffix.As16()
	var out []netip.Prefix
	for _, ic := range cfg.Interfaces {
		if ic.Role != config.RoleLAN || a.Interface != "" && ic.Name != a.Interface {
			continue
		}
		for _, p := range ic.Addresses {
			if !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() != config.LANPrefixLength || p.Addr().IsLinkLocalUnicast() {
				continue
			}
			b := p.Masked().Addr().As16()
			copy(b[8:], id[8:])
			host := netip.PrefixFrom(netip.AddrFrom16(b), 128)
			if !slices.Contains(out, host) {
				out = append(out, host)
			}
		}
	}
	return out
}
