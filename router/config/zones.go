package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gvrouter/gvrouter/firewall"
)

// The firewall's zones:, rules: and redirects: (package firewall, after
// OpenWrt's firewall4). Without zones: the firewall is the implicit zone
// set that wan_input and allow6 describe (natrules.LegacyPolicy).

// Zone policies accepted in a zone's input, forward and output.
const (
	PolicyAccept = "accept"
	PolicyDrop   = "drop"
	PolicyReject = "reject"
)

// Zone policy defaults: fw4's defaults section (input REJECT, output
// ACCEPT, forward REJECT).
const (
	DefaultZoneInput   = PolicyReject
	DefaultZoneForward = PolicyReject
	DefaultZoneOutput  = PolicyAccept
)

// Zone is one firewall: zones: entry.
type Zone struct {
	Name       string
	Interfaces []string // interface or MACsec SecY names, e.g. [lan, guest]
	// Input, Forward and Output are accept, drop or reject; "" is the
	// default (DefaultZoneInput, ...).
	Input, Forward, Output string
	Masquerade             bool // SNAT IPv4 flows leaving the zone to its interfaces' addresses
	NoMSSClamp             bool // mss_clamp: off: leave the MSS of SYNs leaving the zone alone
	Pos                    Pos

	src src
}

// Policies returns the zone's input, forward and output targets with
// the defaults filled in.
func (z *Zone) Policies() (input, forward, output firewall.Target) {
	pick := func(v, def string) firewall.Target {
		if v == "" {
			v = def
		}
		t, _ := firewall.ParseTarget(v)
		return t
	}
	return pick(z.Input, DefaultZoneInput), pick(z.Forward, DefaultZoneForward), pick(z.Output, DefaultZoneOutput)
}

// Rule is one firewall: rules: entry. Match holds everything but the
// zones' interfaces, in the firewall package's terms.
type Rule struct {
	Match firewall.Rule
	Pos   Pos

	src src
}

// Redirect is one firewall: redirects: entry: a DNAT port forward from
// every interface of a zone (nat: forwards generalised).
type Redirect struct {
	Name      string
	Src       string // zone whose interfaces' IPv4 addresses it listens on
	Proto     string // tcp, udp, or "" for both
	FirstPort uint16 // src_dport
	LastPort  uint16
	To        netip.AddrPort // dest_ip and dest_port; port 0 keeps the external port
	// SrcIPs (src_ip) are the outside sources that may use it, e.g.
	// [198.51.100.0/24]; empty: any. Hairpinned flows from inside are
	// not filtered.
	SrcIPs []netip.Prefix
	// SrcDIP (src_dip) is the external address it listens on, e.g.
	// 203.0.113.3; invalid: every interface's first IPv4 address.
	SrcDIP netip.Addr
	Pos    Pos

	src src
}

var (
	zoneKeys     = []string{"name", "interfaces", "input", "forward", "output", "masquerade", "mss_clamp"}
	ruleKeys     = []string{"name", "src", "dest", "family", "proto", "src_ip", "dest_ip", "src_suffix", "dest_suffix", "src_port", "dest_port", "icmp_type", "limit", "limit_burst", "target", "log"}
	redirectKeys = []string{"name", "src", "proto", "src_ip", "src_dip", "src_dport", "dest_ip", "dest_port"}
	policyNames  = []string{PolicyAccept, PolicyDrop, PolicyReject}
)

// protoNumbers are the protocol names rules take (IANA numbers); "all"
// and "any" are every protocol, "tcpudp" both TCP and UDP.
var protoNumbers = map[string][]uint8{
	"tcp": {6}, "udp": {17}, "tcpudp": {6, 17}, "icmp": {1}, "icmpv6": {58}, "ipv6-icmp": {58},
	"igmp": {2}, "gre": {47}, "esp": {50}, "ah": {51}, "sctp": {132}, "udplite": {136},
}

// icmpNames are the ICMP (v4) and ICMPv6 type names rules take, as
// nftables and fw4 spell them.
var icmpNames = map[string][2]int{ // name → [ICMP type, ICMPv6 type], -1 for none
	"echo-reply":              {0, 129},
	"destination-unreachable": {3, 1},
	"redirect":                {5, 137},
	"echo-request":            {8, 128},
	"router-advertisement":    {9, 134},
	"router-solicitation":     {10, 133},
	"time-exceeded":           {11, 3},
	"parameter-problem":       {12, 4},
	"timestamp-request":       {13, -1},
	"timestamp-reply":         {14, -1},
	"packet-too-big":          {-1, 2},
	"neighbour-solicitation":  {-1, 135},
	"neighbor-solicitation":   {-1, 135},
	"neighbour-advertisement": {-1, 136},
	"neighbor-advertisement":  {-1, 136},
	"mld-listener-query":      {-1, 130},
	"mld-listener-report":     {-1, 131},
	"mld-listener-done":       {-1, 132},
	"mld2-listener-report":    {-1, 143},
}

// scalars decodes a scalar or a list of scalars.
func (d *decoder) scalars(e entry, what string) []*yaml.Node {
	if e.val.Kind == yaml.ScalarNode && !isNull(e.val) {
		return []*yaml.Node{e.val}
	}
	items, _ := d.list(e, what)
	var out []*yaml.Node
	for _, it := range items {
		if it.Kind != yaml.ScalarNode || isNull(it) {
			d.errorf(it, "%s: %s: want a value, got %s", what, e.key.Value, kindName(it))
			continue
		}
		out = append(out, it)
	}
	return out
}

func (d *decoder) policyKey(m map[string]entry, key, what string, s *src, dst *string) {
	if d.strKey(m, key, what, s, dst) && !contains(policyNames, *dst) {
		d.errorf(m[key].val, "%s: %s: unknown policy %q: want accept, drop or reject", what, key, *dst)
		s.markBad(key)
		*dst = ""
	}
}

func (d *decoder) zone(n *yaml.Node) Zone {
	z := Zone{Pos: posOf(n)}
	const what = "firewall: zone"
	m := d.mapping(n, what, zoneKeys, nil)
	d.strKey(m, "name", what, &z.src, &z.Name)
	if e, ok := m["interfaces"]; ok {
		z.src.set("interfaces", posOf(e.val))
		for _, it := range d.scalars(e, what) {
			z.src.set("interfaces."+strconv.Itoa(len(z.Interfaces)), posOf(it))
			z.Interfaces = append(z.Interfaces, it.Value)
		}
	}
	d.policyKey(m, "input", what, &z.src, &z.Input)
	d.policyKey(m, "forward", what, &z.src, &z.Forward)
	d.policyKey(m, "output", what, &z.src, &z.Output)
	if e, ok := m["masquerade"]; ok {
		if v, ok := d.onOffWord(e, what); ok {
			z.Masquerade = v == "on"
		}
	}
	if e, ok := m["mss_clamp"]; ok {
		if v, ok := d.onOffWord(e, what); ok {
			z.NoMSSClamp = v == "off"
		}
	}
	return z
}

func (d *decoder) rule(n *yaml.Node) Rule {
	r := Rule{Pos: posOf(n)}
	mr := &r.Match
	const what = "firewall: rule"
	m := d.mapping(n, what, ruleKeys, nil)
	d.strKey(m, "name", what, &r.src, &mr.Name)
	d.strKey(m, "src", what, &r.src, &mr.Src)
	d.strKey(m, "dest", what, &r.src, &mr.Dest)
	var family string
	if d.strKey(m, "family", what, &r.src, &family) {
		switch family {
		case "ipv4", "4":
			mr.Family = 4
		case "ipv6", "6":
			mr.Family = 6
		case "any":
		default:
			d.errorf(m["family"].val, "%s: family: unknown family %q: want ipv4, ipv6 or any", what, family)
		}
	}
	protoWritten := false
	if e, ok := m["proto"]; ok {
		protoWritten = true
		for _, it := range d.scalars(e, what) {
			v := strings.ToLower(it.Value)
			if v == "all" || v == "any" {
				mr.Protos = slices.Clone(allProtos)
				break
			}
			if ps, ok := protoNumbers[v]; ok {
				mr.Protos = append(mr.Protos, ps...)
				continue
			}
			if n, err := strconv.ParseUint(v, 10, 8); err == nil {
				mr.Protos = append(mr.Protos, uint8(n))
				continue
			}
			d.errorf(it, "%s: proto: unknown protocol %q: want tcp, udp, tcpudp, icmp, icmpv6, gre, esp, ah, sctp, igmp, udplite, all or a number", what, it.Value)
			r.src.markBad("proto")
		}
	}
	mr.SrcAddrs = d.prefixes(m, "src_ip", what, &r.src)
	mr.DestAddrs = d.prefixes(m, "dest_ip", what, &r.src)
	mr.SrcSuffix = d.suffixes(m, "src_suffix", what, &r.src)
	mr.DestSuffix = d.suffixes(m, "dest_suffix", what, &r.src)
	mr.SrcPorts = d.portList(m, "src_port", what, &r.src)
	mr.DestPorts = d.portList(m, "dest_port", what, &r.src)
	if e, ok := m["icmp_type"]; ok {
		r.src.set("icmp_type", posOf(e.val))
		for _, it := range d.scalars(e, what) {
			ts, err := parseICMPType(it.Value)
			if err != nil {
				d.errorf(it, "%s: icmp_type: %v", what, err)
				r.src.markBad("icmp_type")
				continue
			}
			mr.ICMPTypes = append(mr.ICMPTypes, ts...)
		}
	}
	switch {
	case !protoWritten && len(mr.ICMPTypes) == 0:
		mr.Protos = []uint8{6, 17} // fw4's default proto, tcpudp
	case len(mr.Protos) == len(allProtos):
		mr.Protos = nil // every protocol
	}
	if e, ok := m["limit"]; ok {
		r.src.set("limit", posOf(e.val))
		if v, ok := d.str(e, what); ok {
			if rate, err := parseFlowRate(v); err != nil {
				d.errorf(e.val, "%s: limit: %v", what, err)
				r.src.markBad("limit")
			} else {
				mr.Limit = rate
			}
		}
	}
	if d.intKey(m, "limit_burst", what, &r.src, &mr.Burst) {
		if mr.Burst < 1 || mr.Burst > 1<<20 {
			d.errorf(m["limit_burst"].val, "%s: limit_burst: %d out of range 1..%d", what, mr.Burst, 1<<20)
			mr.Burst = 0
		} else if _, ok := m["limit"]; !ok {
			d.errorf(m["limit_burst"].val, "%s: limit_burst without limit", what)
		}
	}
	var target string
	if d.strKey(m, "target", what, &r.src, &target) {
		if t, ok := firewall.ParseTarget(target); ok {
			mr.Target = t
		} else {
			d.errorf(m["target"].val, "%s: target: unknown target %q: want accept, drop or reject", what, target)
			r.src.markBad("target")
		}
	} else if _, ok := m["target"]; !ok {
		d.errorf(n, "%s: target: required (accept, drop or reject)", what)
		r.src.markBad("target")
	}
	if e, ok := m["log"]; ok {
		v := ""
		if e.val.Kind == yaml.ScalarNode {
			v = strings.ToLower(e.val.Value)
		}
		switch v {
		case "on", "true", "yes":
			mr.Log = true
		case "off", "false", "no":
		case "capture":
			mr.Log, mr.LogCapture = true, true // counted and handed to the firewall:log capture
		default:
			d.errorf(e.val, "%s: log: want on, off or capture, got %s", what, kindName(e.val))
		}
	}
	return r
}

// allProtos is every protocol number, what "all" expands to while the
// list is decoded.
var allProtos = func() []uint8 {
	out := make([]uint8, 256)
	for i := range out {
		out[i] = uint8(i)
	}
	return out
}()

// scalarList decodes the scalar or list of scalars under key in m, if
// there is one, with parse, and records where it was written in s. parse
// reports its own errors; an item it rejects marks key bad.
func scalarList[T any](d *decoder, m map[string]entry, key, what string, s *src, parse func(it *yaml.Node) (T, bool)) []T {
	e, ok := m[key]
	if !ok {
		return nil
	}
	s.set(key, posOf(e.val))
	var out []T
	for _, it := range d.scalars(e, what) {
		v, ok := parse(it)
		if !ok {
			s.markBad(key)
			continue
		}
		out = append(out, v)
	}
	return out
}

func (d *decoder) prefixes(m map[string]entry, key, what string, s *src) []netip.Prefix {
	return scalarList(d, m, key, what, s, func(it *yaml.Node) (netip.Prefix, bool) {
		p, err := netip.ParsePrefix(it.Value)
		if err != nil {
			if a, aerr := netip.ParseAddr(it.Value); aerr == nil {
				p, err = netip.PrefixFrom(a, a.BitLen()), nil
			}
		}
		switch {
		case err != nil || p.Addr().Zone() != "" || p.Addr().Is4In6():
			d.errorf(it, "%s: %s: bad address %q: want an address or prefix like 192.168.1.50 or 2001:db8:1::/64", what, key, it.Value)
		case p.Masked() != p:
			d.errorf(it, "%s: %s: %q has host bits set; did you mean %s?", what, key, it.Value, p.Masked())
		default:
			return p, true
		}
		return p, false
	})
}

func (d *decoder) suffixes(m map[string]entry, key, what string, s *src) []firewall.Suffix {
	return scalarList(d, m, key, what, s, func(it *yaml.Node) (firewall.Suffix, bool) {
		a, err := netip.ParseAddr(it.Value)
		switch {
		case err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "":
			d.errorf(it, "%s: %s: bad interface ID %q: want an IPv6 address with the first 64 bits zero, like ::1234", what, key, it.Value)
		case a.As16() != [16]byte(append(make([]byte, 8), a.AsSlice()[8:]...)):
			d.errorf(it, "%s: %s: %s has prefix bits set: an interface ID is the last 64 bits only, like ::%s", what, key, it.Value, hostPart(a))
		default:
			return firewall.Suffix(a), true
		}
		return firewall.Suffix{}, false
	})
}

func (d *decoder) portList(m map[string]entry, key, what string, s *src) []firewall.PortRange {
	return scalarList(d, m, key, what, s, func(it *yaml.Node) (firewall.PortRange, bool) {
		a, b, err := parsePortRange(it.Value)
		if err != nil {
			d.errorf(it, "%s: %s: %v", what, key, err)
			return firewall.PortRange{}, false
		}
		return firewall.PortRange{First: a, Last: b}, true
	})
}

// parseICMPType parses a type name (echo-request), a number (8) or
// number/code (3/4), optionally for one family (icmp:8, icmpv6:1/4). A
// name of both families gives both; a number without a family, too (the
// rule's family narrows it).
func parseICMPType(v string) ([]firewall.ICMPType, error) {
	if ts, ok := icmpNames[strings.ToLower(v)]; ok {
		var out []firewall.ICMPType
		if ts[0] >= 0 {
			out = append(out, firewall.ICMPType{Type: uint8(ts[0]), AnyCode: true})
		}
		if ts[1] >= 0 {
			out = append(out, firewall.ICMPType{Type: uint8(ts[1]), AnyCode: true, V6: true})
		}
		return out, nil
	}
	fam, num, famOK := strings.Cut(v, ":")
	if !famOK {
		fam, num = "", v
	}
	if fam != "" && fam != "icmp" && fam != "icmpv6" {
		return nil, fmt.Errorf("unknown ICMP type %q: the family prefix is icmp: or icmpv6:", v)
	}
	typ, code, hasCode := strings.Cut(num, "/")
	t, err := strconv.ParseUint(typ, 10, 8)
	if err != nil {
		return nil, fmt.Errorf("unknown ICMP type %q: want a name like echo-request or a number like 8, 3/4 or icmpv6:128", v)
	}
	it := firewall.ICMPType{Type: uint8(t), AnyCode: true}
	if hasCode {
		c, err := strconv.ParseUint(code, 10, 8)
		if err != nil {
			return nil, fmt.Errorf("bad ICMP code in %q", v)
		}
		it.Code, it.AnyCode = uint8(c), false
	}
	it6 := it
	it6.V6 = true
	switch fam {
	case "icmp":
		return []firewall.ICMPType{it}, nil
	case "icmpv6":
		return []firewall.ICMPType{it6}, nil
	}
	return []firewall.ICMPType{it, it6}, nil
}

// parseFlowRate parses "10/second" (also /sec, /s, /minute, /min, /m, /hour,
// /h, /day, /d) or a bare number of flows a second.
func parseFlowRate(v string) (float64, error) {
	num, unit, _ := strings.Cut(v, "/")
	n, err := strconv.ParseUint(strings.TrimSpace(num), 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("bad rate %q: want a count and a unit like 10/second or 100/minute", v)
	}
	per := map[string]float64{"": 1, "second": 1, "sec": 1, "s": 1, "minute": 60, "min": 60, "m": 60, "hour": 3600, "h": 3600, "day": 86400, "d": 86400}
	d, ok := per[strings.TrimSpace(unit)]
	if !ok {
		return 0, fmt.Errorf("bad rate %q: unknown unit %q (second, minute, hour, day)", v, unit)
	}
	return float64(n) / d, nil
}

func (d *decoder) redirect(n *yaml.Node) Redirect {
	r := Redirect{Pos: posOf(n)}
	const what = "firewall: redirect"
	m := d.mapping(n, what, redirectKeys, nil)
	d.strKey(m, "name", what, &r.src, &r.Name)
	if !d.strKey(m, "src", what, &r.src, &r.Src) {
		if _, ok := m["src"]; !ok {
			d.errorf(n, "%s: src: required (the zone it listens on, e.g. wan)", what)
		}
	}
	if d.strKey(m, "proto", what, &r.src, &r.Proto) {
		switch r.Proto = strings.ToLower(r.Proto); r.Proto {
		case ProtoTCP, ProtoUDP:
		case "tcpudp":
			r.Proto = ""
		default:
			d.errorf(m["proto"].val, "%s: proto: unknown proto %q: want tcp, udp or tcpudp", what, r.Proto)
			r.src.markBad("proto")
		}
	}
	if e, ok := m["src_dport"]; ok {
		r.src.set("src_dport", posOf(e.val))
		if a, b, ok := d.ports(e, what); ok {
			r.FirstPort, r.LastPort = a, b
		}
	} else {
		d.errorf(n, "%s: src_dport: required (the external port or range)", what)
	}
	var ip string
	if d.strKey(m, "dest_ip", what, &r.src, &ip) {
		if a, err := netip.ParseAddr(ip); err != nil || !a.Is4() {
			d.errorf(m["dest_ip"].val, "%s: dest_ip: %q is not an IPv4 address (IPv6 is routed, not translated: use a rule)", what, ip)
		} else {
			r.To = netip.AddrPortFrom(a, 0)
		}
	} else if _, ok := m["dest_ip"]; !ok {
		d.errorf(n, "%s: dest_ip: required (the inside host)", what)
	}
	if e, ok := m["dest_port"]; ok {
		r.src.set("dest_port", posOf(e.val))
		if a, b, ok := d.ports(e, what); ok {
			if a != b {
				d.errorf(e.val, "%s: dest_port: one port, the first of the range the external ports map to", what)
			}
			r.To = netip.AddrPortFrom(r.To.Addr(), a)
		}
	}
	r.SrcIPs = scalarList(d, m, "src_ip", what, &r.src, func(it *yaml.Node) (netip.Prefix, bool) {
		p, err := netip.ParsePrefix(it.Value)
		if err != nil {
			if a, aerr := netip.ParseAddr(it.Value); aerr == nil {
				p, err = netip.PrefixFrom(a, a.BitLen()), nil
			}
		}
		switch {
		case err != nil || !p.Addr().Is4():
			d.errorf(it, "%s: src_ip: bad source %q: want an IPv4 address or prefix like 198.51.100.7 or 198.51.100.0/24 (a redirect translates IPv4 only)", what, it.Value)
		case p.Masked() != p:
			d.errorf(it, "%s: src_ip: %q has host bits set; did you mean %s?", what, it.Value, p.Masked())
		default:
			return p, true
		}
		return p, false
	})
	var dip string
	if d.strKey(m, "src_dip", what, &r.src, &dip) {
		if a, err := netip.ParseAddr(dip); err != nil || !a.Is4() {
			d.errorf(m["src_dip"].val, "%s: src_dip: %q is not an IPv4 address (the router's external address the redirect listens on)", what, dip)
		} else {
			r.SrcDIP = a
		}
	}
	return r
}

// zoneSections decodes firewall: zones, rules and redirects.
func (d *decoder) zoneSections(fw *Firewall, m map[string]entry) {
	if e, ok := m["zones"]; ok {
		fw.src.set("zones", posOf(e.key))
	}
	fw.Zones = objects(d, m, "zones", "firewall", "firewall: zone", d.zone)
	fw.Rules = objects(d, m, "rules", "firewall", "firewall: rule", d.rule)
	fw.Redirects = objects(d, m, "redirects", "firewall", "firewall: redirect", d.redirect)
}

// zoneMayHave reports whether the IPv4 address a is, or may become (a
// DHCP or PPPoE address), an address of an interface of zone name.
func (c *Config) zoneMayHave(name string, a netip.Addr) bool {
	for _, z := range c.Firewall.Zones {
		if z.Name != name {
			continue
		}
		for _, ifn := range z.Interfaces {
			ic := c.Interface(ifn)
			if ic == nil {
				continue
			}
			if ic.DHCP != nil || ic.PPPoE != nil || slices.ContainsFunc(ic.Addresses, func(p netip.Prefix) bool { return p.Addr() == a }) {
				return true
			}
		}
	}
	return false
}

// validateZones checks zone names and interfaces (known, in one zone
// each, every interface in one), rule zone references and rules that
// can never match, and redirect zones.
// zoneHasWAN reports whether zone z holds a role wan interface: the
// engine decides the router's own new flows (the output chain) only as
// they leave one.
func (c *Config) zoneHasWAN(z *Zone) bool {
	for _, ifn := range z.Interfaces {
		if ic := c.Interface(ifn); ic != nil && ic.Role == RoleWAN {
			return true
		}
	}
	return false
}

func (c *Config) validateZones(l *errorList) {
	fw := &c.Firewall
	if len(fw.Zones) == 0 {
		if len(fw.Rules) > 0 {
			l.add(fw.Rules[0].Pos, "firewall: rules: need zones: (rules name their zones)")
		}
		if len(fw.Redirects) > 0 {
			l.add(fw.Redirects[0].Pos, "firewall: redirects: need zones: (a redirect listens on a zone)")
		}
		return
	}
	zonesAt := fw.src.at("zones", fw.Pos)
	if fw.src.written("wan_input") {
		l.add(fw.src.at("wan_input", fw.Pos), "firewall: wan_input: not with zones: (write the wan zone's input policy)")
	}
	if len(fw.Allow6) > 0 {
		l.add(fw.Allow6[0].Pos, "firewall: allow6: not with zones: (write it as a rule with src: wan and dest_ip or dest_suffix)")
	}
	known := c.interfaceNames()
	for _, ms := range c.MACsec {
		known = append(known, ms.Name)
	}
	zoneOf := map[string]*Zone{}
	var names []string
	for i := range fw.Zones {
		z := &fw.Zones[i]
		at := z.src.at("name", z.Pos)
		switch {
		case z.Name == "" && !z.src.bad["name"]:
			l.add(z.Pos, "firewall: zone: name: required")
		case z.Name == firewall.Any:
			l.add(at, "firewall: zone: name %q is reserved (any zone)", z.Name)
		case slices.Contains(names, z.Name):
			l.add(at, "firewall: zone %q: defined twice", z.Name)
		}
		if checkName(z.Name) != nil && z.Name != "" {
			l.add(at, "firewall: zone %q: %v", z.Name, checkName(z.Name))
		}
		names = append(names, z.Name)
		for j, ifn := range z.Interfaces {
			iat := z.src.at("interfaces."+strconv.Itoa(j), z.Pos)
			if !slices.Contains(known, ifn) {
				l.add(iat, "firewall: zone %q: unknown interface %q%s", z.Name, ifn, hint(ifn, known))
				continue
			}
			if o := zoneOf[ifn]; o != nil {
				l.add(iat, "firewall: zone %q: interface %q is in zone %q too%s (zones must not overlap)", z.Name, ifn, o.Name, atLine(o.Pos))
				continue
			}
			zoneOf[ifn] = z
		}
	}
	for i := range fw.Zones {
		z := &fw.Zones[i]
		if z.Output == "" || z.Output == PolicyAccept || c.zoneHasWAN(z) {
			continue
		}
		l.add(z.src.at("output", z.Pos), "firewall: zone %q: output: %s is enforced only in a zone with a wan interface: the router does not track its own packets into inside zones (its DNS and DHCP answers among them), so write accept or leave it out", z.Name, z.Output)
	}
	for _, ifn := range known {
		if zoneOf[ifn] == nil {
			l.add(zonesAt, "firewall: zones: interface %q is in no zone (its traffic would all be dropped); add it to one", ifn)
		}
	}
	zoneRef := func(name string, at Pos, what string) {
		if name != "" && name != firewall.Any && !slices.Contains(names, name) {
			l.add(at, "%s: unknown zone %q%s", what, name, hint(name, names))
		}
	}
	for i := range fw.Rules {
		r := &fw.Rules[i]
		what := "firewall: rule"
		if r.Match.Name != "" {
			what += " " + strconv.Quote(r.Match.Name)
		}
		zoneRef(r.Match.Src, r.src.at("src", r.Pos), what+": src")
		zoneRef(r.Match.Dest, r.src.at("dest", r.Pos), what+": dest")
		if why := r.Match.NeverMatches(); why != "" && len(r.src.bad) == 0 {
			l.add(r.Pos, "%s: can never match: %s", what, why)
		}
	}
	for i := range fw.Redirects {
		r := &fw.Redirects[i]
		if r.Src == firewall.Any {
			l.add(r.src.at("src", r.Pos), "firewall: redirect: src: one zone, not %q", r.Src)
			continue
		}
		zoneRef(r.Src, r.src.at("src", r.Pos), "firewall: redirect: src")
		if r.SrcDIP.IsValid() && !c.zoneMayHave(r.Src, r.SrcDIP) {
			l.add(r.src.at("src_dip", r.Pos), "firewall: redirect: src_dip: %s is no address of zone %q's interfaces (and none gets one from DHCP or PPPoE)", r.SrcDIP, r.Src)
		}
		if r.To.Port() != 0 && int(r.To.Port())+int(r.LastPort-r.FirstPort) > 65535 {
			l.add(r.src.at("dest_port", r.Pos), "firewall: redirect: dest_port: the range %d-%d from %d overflows 65535", r.FirstPort, r.LastPort, r.To.Port())
		}
	}
}
