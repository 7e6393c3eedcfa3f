package natrules

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/gvrouter/gvrouter/firewall"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
)

// Zone names of the implicit zone set (LegacyPolicy).
const (
	LegacyLAN = "lan"
	LegacyWAN = "wan"
)

// LegacyPolicy is the zone set that a config without firewall: zones:
// means, so that wan_input and allow6 keep their meaning:
//
//   - zone wan: every wan interface; input drop (wan_input: drop, the
//     default) or accept (wan_input: accept), forward drop, output
//     accept;
//   - zone lan: every other interface, MACsec SecYs and the host TAP
//     included; input, forward and output accept;
//   - rule wan to the router, ICMP and ICMPv6 of every type, accept
//     (echo requests to the router always passed);
//   - rule wan to any zone, ICMPv6 echo request, accept (RFC 4890
//     4.3.1, as before);
//   - per allow6 entry and destination: a rule wan to any zone, IPv6,
//     its protocol (tcp and udp when none), ports and destination,
//     accept.
//
// IPv4 from wan to inside hosts stays what NAT allows: redirects (nat:
// forwards, the host TAP's forwards) and mappings, which a zone policy
// accepts unless a rule refuses them (natengine's firewall.go).
func LegacyPolicy(cfg *config.Config, ifaces []natengine.IfaceConfig) firewall.Policy {
	wan := firewall.Zone{Name: LegacyWAN, Input: firewall.Drop, Forward: firewall.Drop, Output: firewall.Accept}
	if !cfg.Firewall.WANInputDrop() {
		wan.Input = firewall.Accept
	}
	lan := firewall.Zone{Name: LegacyLAN, Input: firewall.Accept, Forward: firewall.Accept, Output: firewall.Accept}
	for _, ic := range ifaces {
		if ic.WAN {
			wan.Ifaces = append(wan.Ifaces, int32(ic.ID))
		} else {
			lan.Ifaces = append(lan.Ifaces, int32(ic.ID))
		}
	}
	p := firewall.Policy{
		Zones: []firewall.Zone{lan, wan},
		Rules: []firewall.Rule{
			{Name: "wan-icmp-input", Src: LegacyWAN, Protos: []uint8{natengine.ProtoICMP, natengine.ProtoICMPv6}},
			{Name: "wan-ping6", Src: LegacyWAN, Dest: firewall.Any, ICMPTypes: []firewall.ICMPType{{Type: 128, AnyCode: true, V6: true}}},
		},
	}
	for _, a := range cfg.Firewall.Allow6 {
		proto, any := a.ProtoNumber()
		r := firewall.Rule{Name: "allow6", Src: LegacyWAN, Dest: firewall.Any, Family: 6}
		switch {
		case any:
		case proto == 0:
			r.Protos = []uint8{natengine.ProtoTCP, natengine.ProtoUDP}
		default:
			r.Protos = []uint8{proto}
		}
		if !any && (proto == 0 || proto == natengine.ProtoTCP || proto == natengine.ProtoUDP) && a.LastPort != 0 {
			r.DestPorts = []firewall.PortRange{{First: a.FirstPort, Last: a.LastPort}}
		}
		r.DestAddrs = allow6Dsts(cfg, a)
		if len(r.DestAddrs) == 0 {
			continue // a suffix rule before any prefix: nothing to admit yet
		}
		if any && len(r.DestPorts) == 0 {
			r.Protos = nil
		}
		p.Rules = append(p.Rules, r)
	}
	return p
}

// Policy is cfg's zone set: its firewall: zones:, rules: and redirects:
// with interface names resolved by id, or LegacyPolicy. An interface the
// stack does not have is left out.
func Policy(cfg *config.Config, id map[string]natengine.Iface, ifaces []natengine.IfaceConfig) firewall.Policy {
	p := zonePolicy(cfg, id, ifaces)
	// The router's own WireGuard listen ports are open to new flows from
	// every zone (the WAN's above all: that is where peers call from),
	// as the stack's wan input policy admits them (AdmitUDP): the zones
	// decide the input chain, so they must say the same.
	for _, port := range cfg.WireGuardListenPorts() {
		p.Rules = append(p.Rules, firewall.Rule{Name: fmt.Sprintf("wireguard-%d", port), Src: firewall.Any,
			Protos: []uint8{natengine.ProtoUDP}, DestPorts: []firewall.PortRange{{First: port, Last: port}}})
	}
	if len(cfg.Firewall.Zones) > 0 {
		p.Rules = append(p.Rules, portMapRules(cfg)...)
	}
	return p
}

// portMapRules admit port mapping requests (config port_mapping:) from
// each inside zone whose input policy is not accept, to the servers on
// that zone's own addresses: NAT-PMP and PCP (UDP 5351) and UPnP's HTTP
// (TCP 5000), and nothing else of the router's. A zone that may not map
// ports (a guest zone) is admitted too, so that its hosts are answered
// "not authorized" rather than left waiting; without port_mapping: on,
// no rule. SSDP discovery (UDP 1900 to its group, which the zones'
// input chain filters as fw4's does) is admitted only from the zones
// that may map: the others get no SSDP answer anyway. The rules come
// after the config's own, which may still refuse these ports.
func portMapRules(cfg *config.Config) []firewall.Rule {
	pm := cfg.PortMapping
	if !pm.Enabled() {
		return nil
	}
	var out []firewall.Rule
	var zones []string
	dsts := map[string][]netip.Prefix{}
	permitted := map[string]bool{}
	for _, pi := range cfg.PortMapIfaces() {
		if !slices.Contains(zones, pi.Zone) {
			zones = append(zones, pi.Zone)
		}
		permitted[pi.Zone] = pi.Permitted
		for _, a := range pi.Addrs {
			dsts[pi.Zone] = append(dsts[pi.Zone], netip.PrefixFrom(a.Addr(), 32))
		}
	}
	for _, zn := range zones {
		if z := zoneNamed(cfg, zn); z == nil {
			continue
		} else if in, _, _ := z.Policies(); in == firewall.Accept {
			continue
		}
		if pm.NATPMP || pm.PCP {
			out = append(out, firewall.Rule{Name: "port-mapping-" + zn, Src: zn, Family: 4, Protos: []uint8{natengine.ProtoUDP},
				DestPorts: []firewall.PortRange{{First: config.PMPPort, Last: config.PMPPort}}, DestAddrs: dsts[zn]})
		}
		if pm.UPnP {
			out = append(out, firewall.Rule{Name: "port-mapping-upnp-" + zn, Src: zn, Family: 4, Protos: []uint8{natengine.ProtoTCP},
				DestPorts: []firewall.PortRange{{First: config.UPnPPort, Last: config.UPnPPort}}, DestAddrs: dsts[zn]})
		}
		if pm.UPnP && permitted[zn] {
			out = append(out, firewall.Rule{Name: "port-mapping-ssdp-" + zn, Src: zn, Family: 4, Protos: []uint8{natengine.ProtoUDP},
				DestPorts: []firewall.PortRange{{First: ssdpPort, Last: ssdpPort}}, DestAddrs: []netip.Prefix{ssdpGroup}})
		}
	}
	return out
}

// SSDP's group and port (UPnP device architecture 1.1, section 1.1.2).
var ssdpGroup = netip.MustParsePrefix("239.255.255.250/32")

const ssdpPort = 1900

// zoneNamed returns cfg's firewall zone name, or nil.
func zoneNamed(cfg *config.Config, name string) *config.Zone {
	for i := range cfg.Firewall.Zones {
		if cfg.Firewall.Zones[i].Name == name {
			return &cfg.Firewall.Zones[i]
		}
	}
	return nil
}

// zonePolicy is cfg's zones and rules, or LegacyPolicy.
func zonePolicy(cfg *config.Config, id map[string]natengine.Iface, ifaces []natengine.IfaceConfig) firewall.Policy {
	fw := &cfg.Firewall
	if len(fw.Zones) == 0 {
		return LegacyPolicy(cfg, ifaces)
	}
	var p firewall.Policy
	for i := range fw.Zones {
		z := &fw.Zones[i]
		fz := firewall.Zone{Name: z.Name}
		fz.Input, fz.Forward, fz.Output = z.Policies()
		for _, name := range z.Interfaces {
			if nid, ok := id[name]; ok {
				fz.Ifaces = append(fz.Ifaces, int32(nid))
			}
		}
		p.Zones = append(p.Zones, fz)
	}
	for i := range fw.Rules {
		p.Rules = append(p.Rules, fw.Rules[i].Match)
	}
	return p
}

// ruleset compiles cfg's zone set. A policy that does not compile
// (config validation rules that out) fails closed: every interface in
// one zone that refuses everything.
func ruleset(cfg *config.Config, id map[string]natengine.Iface, ifaces []natengine.IfaceConfig) *firewall.Ruleset {
	rs, err := firewall.Compile(Policy(cfg, id, ifaces))
	if err == nil {
		return rs
	}
	closed := firewall.Zone{Name: "closed", Input: firewall.Drop, Forward: firewall.Drop, Output: firewall.Drop}
	for _, ic := range ifaces {
		closed.Ifaces = append(closed.Ifaces, int32(ic.ID))
	}
	rs, _ = firewall.Compile(firewall.Policy{Zones: []firewall.Zone{closed}})
	return rs
}

// zoneIfaceFlags applies the zones' masquerade and mss_clamp to the
// engine's interfaces.
func zoneIfaceFlags(cfg *config.Config, ifaces []natengine.IfaceConfig) {
	for i := range ifaces {
		ic := &ifaces[i]
		for j := range cfg.Firewall.Zones {
			z := &cfg.Firewall.Zones[j]
			if slices.Contains(z.Interfaces, ic.Name) {
				ic.Masquerade = ic.Masquerade || z.Masquerade
				ic.NoMSSClamp = z.NoMSSClamp
			}
		}
	}
}

// redirectForwards turns firewall: redirects: into port forwards on each
// interface of their zone that has an IPv4 address (with src_dip: the
// interface that has that address, if one has it now), from the
// redirect's src_ip sources.
func redirectForwards(cfg *config.Config, id map[string]natengine.Iface) []natengine.Forward {
	var out []natengine.Forward
	for _, rd := range cfg.Firewall.Redirects {
		var z *config.Zone
		for i := range cfg.Firewall.Zones {
			if cfg.Firewall.Zones[i].Name == rd.Src {
				z = &cfg.Firewall.Zones[i]
			}
		}
		if z == nil {
			continue
		}
		protos := []string{rd.Proto}
		if rd.Proto == "" {
			protos = []string{config.ProtoTCP, config.ProtoUDP}
		}
		for _, name := range z.Interfaces {
			nid, ok := id[name]
			ic := cfg.Interface(name)
			if !ok || !has4(ic) {
				continue
			}
			if rd.SrcDIP.IsValid() && !slices.ContainsFunc(ic.Addresses, func(p netip.Prefix) bool { return p.Addr() == rd.SrcDIP }) {
				continue
			}
			for _, pr := range protos {
				out = append(out, natengine.Forward{Proto: protoOf(pr), In: nid, FirstPort: rd.FirstPort, LastPort: rd.LastPort,
					To: netip.AddrPortFrom(rd.To.Addr(), rd.To.Port()), Src: rd.SrcIPs, Dst: rd.SrcDIP})
			}
		}
	}
	return out
}
