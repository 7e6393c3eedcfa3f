package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// The nat: and firewall: sections, in the words of nftables and OpenWrt's
// fw4: masquerade, snat, port forwards (DNAT "redirects"), hairpin
// ("reflection"), the conntrack table, IPv6 allow rules and the WAN input
// policy.

// NAT filtering behaviours accepted in "filtering:" (RFC 4787 section 5).
const (
	FilteringEndpointIndependent     = "endpoint-independent"       // "full cone"
	FilteringAddressDependent        = "address-dependent"          // restricted cone
	FilteringAddressAndPortDependent = "address-and-port-dependent" // Linux MASQUERADE; the default
)

// Input policies accepted in "wan_input:".
const (
	InputDrop   = "drop"   // new connections from WAN to the router are dropped; the default (fw4 wan zone input)
	InputAccept = "accept" // the router's own sockets are reachable from WAN
)

// Protocols accepted in forwards and allow6; allow6 also takes ProtoAny
// and protocol numbers.
const (
	ProtoTCP = "tcp"
	ProtoUDP = "udp"
	ProtoAny = "any" // allow6: every protocol
)

// Conntrack limits. The timeout minimums are the RFC requirements the
// natengine.Timeouts defaults meet; a config may raise a timeout, never
// lower it below these.
const (
	// DefaultConntrackMax is the table limit when "max" is not written
	// (natengine.DefaultMaxConns).
	DefaultConntrackMax = 65536
	// MinConntrackMax and MaxConntrackMax bound "max".
	MinConntrackMax = 64
	MaxConntrackMax = 1 << 24
	// DefaultPerHostShare: with "per_host" not written, one inside host
	// may hold max/4 flows (16,384 of the default 65,536): far more than
	// a household device opens (a busy desktop with a torrent client
	// holds a few thousand), while three quarters stay for the others.
	DefaultPerHostShare = 4
	// DefaultPortsPerHost is "ports_per_host" when not written: an
	// inside host's NAT mappings, a quarter of one address's 64,512
	// high ports, so one host cannot take the ports the router's own
	// sockets (its DNS forwarder's random upstream ports) need.
	DefaultPortsPerHost = 16384
	// DefaultRouterReserveShare: with "router_reserve" not written,
	// max/16 slots (4,096 of 65,536) are kept for the router's own flows
	// (its DNS forwarder's upstream queries, DHCP, NTP): each upstream
	// query is a flow for up to udp_stream (5 min), so a forwarder
	// answering 10 uncached names a second holds ~3,000.
	DefaultRouterReserveShare = 16

	MinTCPEstablished = 2*time.Hour + 4*time.Minute // RFC 5382 REQ-5
	MinTCPTransitory  = 4 * time.Minute             // RFC 5382 REQ-5
	MinUDPUnreplied   = 2 * time.Minute             // RFC 4787 REQ-5
	MinUDPStream      = 2 * time.Minute             // RFC 4787 REQ-5 (5 min recommended)
	MinICMP           = 60 * time.Second            // RFC 5508 REQ-2
	MinOther          = time.Second                 // no RFC; anything shorter expires between packets
	// MinMTUConntrack is the smallest interface MTU connection tracking
	// takes: every host must accept 576-octet datagrams (RFC 791).
	MinMTUConntrack = 576
	// MaxTimeout bounds every timeout; idle flows older than this are
	// not worth a table entry.
	MaxTimeout = 30 * 24 * time.Hour
)

// NAT is the nat: section. The zero NAT translates nothing and uses the
// defaults: hairpin on, address-and-port-dependent filtering, a 65,536-flow
// table with the RFC minimum timeouts.
type NAT struct {
	// Masquerade lists interfaces whose forwarded IPv4 traffic leaves with
	// the interface's first IPv4 address as its source, e.g. ["eth0.2"]
	// (nftables "oifname eth0.2 masquerade").
	Masquerade []string
	// SNAT translates to fixed addresses instead (nftables "snat to").
	SNAT []SNAT
	// Forwards are port forwards (DNAT), e.g. tcp 8080 on eth0.2 to
	// 192.168.1.10:80.
	Forwards []Forward
	// Hairpin is "on" or "off": whether LAN hosts reach forwards and
	// mappings through the router's external address (RFC 4787 REQ-9; fw4
	// "reflection"); "" = "on".
	Hairpin string
	// Filtering is the inbound filtering of mappings, one of the
	// Filtering* names; "" = address-and-port-dependent.
	Filtering string
	// Conntrack sizes the connection table.
	Conntrack Conntrack
	Pos       Pos // where the key "nat" is written

	src src
}

// SNAT translates traffic leaving an interface to a pool of addresses.
type SNAT struct {
	On  string       // interface, e.g. "eth0.2"
	To  []netip.Addr // IPv4 pool, e.g. [198.51.100.7]; the upstream must route it to the router
	Pos Pos

	src src
}

// Forward is one port forward (DNAT): new TCP or UDP connections to the
// router's IPv4 address on On, ports FirstPort..LastPort, go to To.
type Forward struct {
	Proto     string // "tcp" | "udp"
	FirstPort uint16 // e.g. 8000
	LastPort  uint16 // e.g. 8010; == FirstPort for one port
	// To is the internal target, e.g. 192.168.1.10:80. Port 0 keeps the
	// external port; otherwise a range maps 1:1 onto To.Port() onwards.
	To netip.AddrPort
	// On is the interface whose address the forward listens on, e.g.
	// "eth0.2"; "" = every wan interface.
	On  string
	Pos Pos

	src src
}

// PortString returns the external port(s) as in YAML: "8080" or "8000-8010".
func (f Forward) PortString() string { return portRange(f.FirstPort, f.LastPort) }

// Conntrack is nat.conntrack.
type Conntrack struct {
	Max int // table limit, MinConntrackMax..MaxConntrackMax; 0 = DefaultConntrackMax
	// PerHost bounds the flows of one inside source address, 1..Max,
	// e.g. 4096; 0 = Max/DefaultPerHostShare.
	PerHost int
	// PortsPerHost bounds the NAT mappings (external ports) of one
	// inside address, 1..MaxConntrackMax, e.g. 4096; 0 = DefaultPortsPerHost.
	PortsPerHost int
	// RouterReserve is how many slots only the router's own flows take,
	// 1..Max/2, e.g. 256; 0 = Max/DefaultRouterReserveShare.
	RouterReserve int
	Timeouts      Timeouts // zero fields = the defaults (the RFC minimums; 5 min for udp_stream)
}

// Timeouts are idle timeouts (nat.conntrack.timeouts); zero = default.
type Timeouts struct {
	TCPEstablished time.Duration // tcp_established, ≥ 2h4m
	TCPTransitory  time.Duration // tcp_transitory (SYN, FIN, RST states), ≥ 4m
	UDPUnreplied   time.Duration // udp_unreplied, ≥ 2m
	UDPStream      time.Duration // udp_stream (replied), ≥ 2m
	ICMP           time.Duration // icmp query sessions, ≥ 60s
	Other          time.Duration // every protocol but TCP, UDP and ICMP (generic flows), ≥ 1s; 10m by default (Linux's generic timeout)
}

// Firewall is the firewall: section: the stateful defaults of wan
// interfaces and the exceptions to them.
type Firewall struct {
	// WANInput is the policy for new flows from a wan interface to the
	// router itself: "drop" (the default when "") or "accept". ICMP
	// (echo, errors, neighbour discovery), IGMP, UDP to the DHCP client
	// ports 68 and 546 and the replies to the router's own flows always
	// pass.
	WANInput string
	// Allow6 admits new inbound IPv6 flows from wan interfaces to hosts
	// behind the router (IPv6 is routed, not translated).
	Allow6 []Allow6
	// Zones, Rules and Redirects are the zone firewall (zones.go);
	// without Zones it is the implicit zone set wan_input and allow6
	// describe.
	Zones     []Zone
	Rules     []Rule
	Redirects []Redirect
	Pos       Pos // where the key "firewall" is written

	src src
}

// Allow6 admits new inbound IPv6 flows to To: TCP/UDP on ports
// FirstPort..LastPort, or every flow of another protocol.
type Allow6 struct {
	// Proto is "tcp", "udp", "" for both, "any" for every protocol, or
	// another IANA protocol number in decimal, e.g. "47" (GRE), "50"
	// (ESP); 6 and 17 are stored as "tcp" and "udp".
	Proto string
	To    netip.Prefix // e.g. 2001:db8:1::10/128 or fd00:1::/64
	// Suffix, instead of To, names a host by its interface ID (the low
	// 64 bits, e.g. ::1234 or ::211:22ff:fe33:4455) in every IPv6 /64
	// of the lan interfaces, or of Interface only: with a delegated
	// prefix the rule follows the host when the ISP renumbers.
	Suffix    netip.Addr
	Interface string // with Suffix: one lan interface; "" = every lan interface
	FirstPort uint16 // 1 and 65535 when no port is written; only tcp, udp and "" take one
	LastPort  uint16
	Pos       Pos

	src src
}

// ProtoNumber returns the protocol number of a.Proto (0 for TCP and UDP)
// or reports that it admits every protocol.
func (a *Allow6) ProtoNumber() (proto uint8, any bool) {
	switch a.Proto {
	case "":
		return 0, false
	case ProtoTCP:
		return 6, false
	case ProtoUDP:
		return 17, false
	case ProtoAny:
		return 0, true
	}
	n, _ := strconv.ParseUint(a.Proto, 10, 8)
	return uint8(n), false
}

// hasPorts reports whether a's protocol has ports.
func (a *Allow6) hasPorts() bool {
	return a.Proto == "" || a.Proto == ProtoTCP || a.Proto == ProtoUDP
}

// HairpinOn reports whether hairpin translation is on.
func (n *NAT) HairpinOn() bool { return n.Hairpin != "off" }

// FilteringMode returns Filtering with the default filled in.
func (n *NAT) FilteringMode() string {
	if n.Filtering == "" {
		return FilteringAddressAndPortDependent
	}
	return n.Filtering
}

// MaxConns returns Conntrack.Max with the default filled in.
func (n *NAT) MaxConns() int {
	if n.Conntrack.Max == 0 {
		return DefaultConntrackMax
	}
	return n.Conntrack.Max
}

// ConnsPerHost returns Conntrack.PerHost with the default filled in.
func (n *NAT) ConnsPerHost() int {
	if n.Conntrack.PerHost == 0 {
		return n.MaxConns() / DefaultPerHostShare
	}
	return n.Conntrack.PerHost
}

// PortsPerHost returns Conntrack.PortsPerHost with the default filled in.
func (n *NAT) PortsPerHost() int {
	if n.Conntrack.PortsPerHost == 0 {
		return DefaultPortsPerHost
	}
	return n.Conntrack.PortsPerHost
}

// RouterReserve returns Conntrack.RouterReserve with the default filled in.
func (n *NAT) RouterReserve() int {
	if n.Conntrack.RouterReserve == 0 {
		return n.MaxConns() / DefaultRouterReserveShare
	}
	return n.Conntrack.RouterReserve
}

// WANInputDrop reports whether new connections from wan interfaces to the
// router itself are dropped.
func (f *Firewall) WANInputDrop() bool { return f.WANInput != InputAccept }

var (
	natKeys         = []string{"masquerade", "snat", "forwards", "hairpin", "filtering", "conntrack"}
	snatKeys        = []string{"on", "to"}
	forwardKeys     = []string{"proto", "port", "to", "on"}
	conntrackKeys   = []string{"max", "per_host", "ports_per_host", "router_reserve", "timeouts"}
	timeoutKeys     = []string{"tcp_established", "tcp_transitory", "udp_unreplied", "udp_stream", "icmp", "other"}
	firewallKeys    = []string{"wan_input", "allow6", "zones", "rules", "redirects"}
	allow6Keys      = []string{"proto", "to", "suffix", "interface", "port"}
	filteringNames  = []string{FilteringEndpointIndependent, FilteringAddressDependent, FilteringAddressAndPortDependent}
	inputNames      = []string{InputDrop, InputAccept}
	protoNames      = []string{ProtoTCP, ProtoUDP}
	onOffNames      = []string{"on", "off"}
	timeoutMinimums = map[string]struct {
		min time.Duration
		why string
	}{
		"tcp_established": {MinTCPEstablished, "RFC 5382 REQ-5"},
		"tcp_transitory":  {MinTCPTransitory, "RFC 5382 REQ-5"},
		"udp_unreplied":   {MinUDPUnreplied, "RFC 4787 REQ-5"},
		"udp_stream":      {MinUDPStream, "RFC 4787 REQ-5"},
		"icmp":            {MinICMP, "RFC 5508 REQ-2"},
		"other":           {MinOther, "gvrouter's floor"},
	}
)

func portRange(a, b uint16) string {
	if a == b {
		return strconv.Itoa(int(a))
	}
	return fmt.Sprintf("%d-%d", a, b)
}

// nat decodes the nat: mapping.
func (d *decoder) nat(c *Config, n *yaml.Node) {
	nt := &c.NAT
	m := d.mapping(n, "nat", natKeys, nil)
	if e, ok := m["masquerade"]; ok {
		nt.src.set("masquerade", posOf(e.val))
		items, _ := d.list(e, "nat")
		for _, it := range items {
			if it.Kind != yaml.ScalarNode || isNull(it) {
				d.errorf(it, "nat: masquerade: want an interface name, got %s", kindName(it))
				continue
			}
			nt.src.set("masquerade."+strconv.Itoa(len(nt.Masquerade)), posOf(it))
			nt.Masquerade = append(nt.Masquerade, it.Value)
		}
	}
	nt.SNAT = objects(d, m, "snat", "nat", "nat: snat", d.snat)
	nt.Forwards = objects(d, m, "forwards", "nat", "nat: forward", d.forward)
	if e, ok := m["hairpin"]; ok {
		nt.src.set("hairpin", posOf(e.val))
		if v, ok := d.onOffWord(e, "nat"); ok {
			nt.Hairpin = v
		}
	}
	if d.strKey(m, "filtering", "nat", &nt.src, &nt.Filtering) && !contains(filteringNames, nt.Filtering) {
		d.errorf(m["filtering"].val, "nat: unknown filtering %q%s", nt.Filtering, hint(nt.Filtering, filteringNames))
		nt.src.markBad("filtering")
	}
	if e, ok := m["conntrack"]; ok && !isNull(e.val) && d.object(e.val, "nat: conntrack") {
		d.conntrack(nt, e.val)
	}
}

func (d *decoder) snat(n *yaml.Node) SNAT {
	s := SNAT{Pos: posOf(n)}
	m := d.mapping(n, "nat: snat", snatKeys, nil)
	d.strKey(m, "on", "nat: snat", &s.src, &s.On)
	if e, ok := m["to"]; ok {
		s.src.set("to", posOf(e.val))
		var items []*yaml.Node
		if e.val.Kind == yaml.ScalarNode && !isNull(e.val) {
			items = []*yaml.Node{e.val} // one address needs no list
		} else {
			items, _ = d.list(e, "nat: snat")
		}
		for _, it := range items {
			a, err := netip.ParseAddr(it.Value)
			switch {
			case it.Kind != yaml.ScalarNode || isNull(it):
				d.errorf(it, "nat: snat: to: want an IPv4 address like 198.51.100.7, got %s", kindName(it))
			case err != nil:
				d.errorf(it, "nat: snat: to: bad address %q", it.Value)
			case !a.Is4():
				d.errorf(it, "nat: snat: to: %s is not IPv4 (IPv6 is routed, not translated)", a)
			case !a.IsGlobalUnicast() && !a.IsPrivate():
				d.errorf(it, "nat: snat: to: %s is not a unicast address", a)
			default:
				s.src.set("to."+strconv.Itoa(len(s.To)), posOf(it))
				s.To = append(s.To, a)
				continue
			}
			s.src.markBad("to")
		}
	}
	return s
}

func (d *decoder) forward(n *yaml.Node) Forward {
	f := Forward{Pos: posOf(n)}
	const what = "nat: forward"
	m := d.mapping(n, what, forwardKeys, nil)
	if d.strKey(m, "proto", what, &f.src, &f.Proto) && !contains(protoNames, f.Proto) {
		d.errorf(m["proto"].val, "%s: unknown proto %q: want tcp or udp", what, f.Proto)
		f.src.markBad("proto")
	}
	if e, ok := m["port"]; ok {
		f.src.set("port", posOf(e.val))
		if a, b, ok := d.ports(e, what); ok {
			f.FirstPort, f.LastPort = a, b
		} else {
			f.src.markBad("port")
		}
	}
	if e, ok := m["to"]; ok {
		f.src.set("to", posOf(e.val))
		if s, ok := d.str(e, what); ok {
			to, err := parseForwardTo(s)
			if err != nil {
				d.errorf(e.val, "%s: to: %v", what, err)
				f.src.markBad("to")
			} else {
				f.To = to
			}
		} else {
			f.src.markBad("to")
		}
	}
	d.strKey(m, "on", what, &f.src, &f.On)
	return f
}

// parseForwardTo parses "192.168.1.10:80" or "192.168.1.10" (keep the port).
func parseForwardTo(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return netip.AddrPort{}, fmt.Errorf("%q: port must be 1..65535 (leave it out to keep the external port)", s)
		}
		if !ap.Addr().Is4() {
			return netip.AddrPort{}, fmt.Errorf("%q is not IPv4: IPv6 is routed, not translated; use firewall: allow6", s)
		}
		return ap, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if !a.Is4() {
			return netip.AddrPort{}, fmt.Errorf("%q is not IPv4: IPv6 is routed, not translated; use firewall: allow6", s)
		}
		return netip.AddrPortFrom(a, 0), nil
	}
	return netip.AddrPort{}, fmt.Errorf("bad target %q: want address:port like 192.168.1.10:80, or an address to keep the port", s)
}

// ports decodes a port (8080 or "8080") or a range ("8000-8010").
func (d *decoder) ports(e entry, what string) (first, last uint16, ok bool) {
	v := e.val
	if v.Kind != yaml.ScalarNode || isNull(v) {
		d.errorf(v, `%s: %s: want a port like 8080 or a range like "8000-8010", got %s`, what, e.key.Value, kindName(v))
		return 0, 0, false
	}
	a, b, err := parsePortRange(v.Value)
	if err != nil {
		d.errorf(v, "%s: %s: %v", what, e.key.Value, err)
		return 0, 0, false
	}
	return a, b, true
}

func parsePortRange(s string) (uint16, uint16, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	p := func(s string) (uint16, bool) {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
		return uint16(n), err == nil && n > 0
	}
	a, okA := p(lo)
	b := a
	okB := true
	if isRange {
		b, okB = p(hi)
	}
	switch {
	case !okA || !okB:
		return 0, 0, fmt.Errorf(`bad port %q: want 1..65535 or a range like "8000-8010"`, s)
	case b < a:
		return 0, 0, fmt.Errorf("bad port range %q: the first port is above the last", s)
	}
	return a, b, nil
}

// onOffWord decodes on/off (or YAML true/false) into the word "on" or "off".
func (d *decoder) onOffWord(e entry, what string) (string, bool) {
	v := e.val
	if v.Kind == yaml.ScalarNode {
		switch strings.ToLower(v.Value) {
		case "on", "true", "yes":
			return "on", true
		case "off", "false", "no":
			return "off", true
		}
	}
	d.errorf(v, "%s: %s: want on or off, got %s", what, e.key.Value, kindName(v))
	return "", false
}

func (d *decoder) conntrack(nt *NAT, n *yaml.Node) {
	const what = "nat: conntrack"
	m := d.mapping(n, what, conntrackKeys, nil)
	d.intKey(m, "max", what, &nt.src, &nt.Conntrack.Max)
	d.intKey(m, "per_host", what, &nt.src, &nt.Conntrack.PerHost)
	d.intKey(m, "ports_per_host", what, &nt.src, &nt.Conntrack.PortsPerHost)
	d.intKey(m, "router_reserve", what, &nt.src, &nt.Conntrack.RouterReserve)
	e, ok := m["timeouts"]
	if !ok || isNull(e.val) || !d.object(e.val, what+": timeouts") {
		return
	}
	tm := d.mapping(e.val, what+": timeouts", timeoutKeys, nil)
	t := &nt.Conntrack.Timeouts
	for key, dst := range map[string]*time.Duration{
		"tcp_established": &t.TCPEstablished, "tcp_transitory": &t.TCPTransitory,
		"udp_unreplied": &t.UDPUnreplied, "udp_stream": &t.UDPStream,
		"icmp": &t.ICMP, "other": &t.Other,
	} {
		te, ok := tm[key]
		if !ok {
			continue
		}
		nt.src.set("timeouts."+key, posOf(te.val))
		if v, ok := d.duration(te, what+": timeouts"); ok {
			*dst = v
		}
	}
}

// duration decodes "2h4m", "60s" or a number of seconds.
func (d *decoder) duration(e entry, what string) (time.Duration, bool) {
	v := e.val
	if v.Kind == yaml.ScalarNode && v.Tag == "!!int" {
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err == nil && n > 0 && n <= 1<<31 {
			return time.Duration(n) * time.Second, true
		}
	}
	if v.Kind == yaml.ScalarNode && v.Tag == "!!str" {
		if t, err := time.ParseDuration(v.Value); err == nil && t > 0 {
			return t, true
		}
	}
	d.errorf(v, "%s: %s: want a positive duration like 2h4m, 4m or 60s (or seconds), got %s", what, e.key.Value, kindName(v))
	return 0, false
}

// fmtDuration writes d as in YAML, without zero units: 2h4m, 4m, 90s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// firewall decodes the firewall: mapping.
func (d *decoder) firewall(c *Config, n *yaml.Node) {
	fw := &c.Firewall
	m := d.mapping(n, "firewall", firewallKeys, nil)
	if d.strKey(m, "wan_input", "firewall", &fw.src, &fw.WANInput) && !contains(inputNames, fw.WANInput) {
		d.errorf(m["wan_input"].val, "firewall: unknown wan_input %q: want drop or accept", fw.WANInput)
		fw.src.markBad("wan_input")
	}
	fw.Allow6 = objects(d, m, "allow6", "firewall", "firewall: allow6", d.allow6)
	d.zoneSections(fw, m)
}

func (d *decoder) allow6(n *yaml.Node) Allow6 {
	a := Allow6{Pos: posOf(n), FirstPort: 1, LastPort: 65535}
	const what = "firewall: allow6"
	m := d.mapping(n, what, allow6Keys, nil)
	if e, ok := m["proto"]; ok {
		a.src.set("proto", posOf(e.val))
		if v, ok := d.str(e, what); !ok {
			a.src.markBad("proto")
		} else if p, err := parseAllow6Proto(v); err != nil {
			d.errorf(e.val, "%s: %v", what, err)
			a.src.markBad("proto")
		} else {
			a.Proto = p
		}
	}
	if e, ok := m["port"]; ok {
		a.src.set("port", posOf(e.val))
		if x, y, ok := d.ports(e, what); ok {
			a.FirstPort, a.LastPort = x, y
		}
		if !a.src.bad["proto"] && !a.hasPorts() {
			d.errorf(e.val, "%s: port: proto %s has no ports; a port needs proto tcp or udp (or no proto for both)", what, a.Proto)
			a.src.markBad("port")
		}
	}
	if e, ok := m["interface"]; ok {
		a.src.set("interface", posOf(e.val))
		if v, ok := d.str(e, what); ok {
			a.Interface = v
		} else {
			a.src.markBad("interface")
		}
	}
	if e, ok := m["suffix"]; ok {
		a.src.set("suffix", posOf(e.val))
		v, ok := d.str(e, what)
		ad, err := netip.ParseAddr(v)
		switch {
		case !ok:
		case err != nil || !ad.Is6() || ad.Is4In6() || ad.Zone() != "":
			d.errorf(e.val, "%s: suffix: bad interface ID %q: want an IPv6 address with the first 64 bits zero, like ::1234", what, v)
		case ad.As16() != [16]byte(append(make([]byte, 8), ad.AsSlice()[8:]...)):
			d.errorf(e.val, "%s: suffix: %s has prefix bits set: an interface ID is the last 64 bits only, like ::%s", what, v, hostPart(ad))
		case ad.IsUnspecified():
			d.errorf(e.val, "%s: suffix: :: is no host (the subnet-router anycast address)", what)
		default:
			a.Suffix = ad
		}
		if !a.Suffix.IsValid() {
			a.src.markBad("suffix")
		}
	}
	if e, ok := m["to"]; ok {
		a.src.set("to", posOf(e.val))
		s, ok := d.str(e, what)
		if !ok {
			a.src.markBad("to")
			return a
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			if ad, aerr := netip.ParseAddr(s); aerr == nil {
				p, err = netip.PrefixFrom(ad, ad.BitLen()), nil
			}
		}
		switch {
		case err != nil:
			d.errorf(e.val, "%s: to: bad prefix %q: want an IPv6 prefix like 2001:db8:1::/64 or an address", what, s)
		case !p.Addr().Is6() || p.Addr().Is4In6():
			d.errorf(e.val, "%s: to: %s is not IPv6 (IPv4 uses nat: forwards)", what, s)
		case p.Addr().Zone() != "":
			d.errorf(e.val, "%s: to: %q: zones are not allowed", what, s)
		case p.Masked() != p:
			d.errorf(e.val, "%s: to: %q has host bits set; did you mean %s?", what, s, p.Masked())
		default:
			a.To = p
			return a
		}
		a.src.markBad("to")
	}
	return a
}

// parseAllow6Proto parses allow6's proto: tcp, udp, any or a protocol
// number, returned in Allow6.Proto's form.
func parseAllow6Proto(v string) (string, error) {
	switch strings.ToLower(v) {
	case ProtoTCP, ProtoUDP, ProtoAny:
		return strings.ToLower(v), nil
	}
	n, err := strconv.ParseUint(v, 10, 8)
	if err != nil {
		return "", fmt.Errorf("unknown proto %q: want tcp, udp, any or a protocol number like 47 (GRE), or leave it out for tcp and udp", v)
	}
	switch n {
	case 6:
		return ProtoTCP, nil
	case 17:
		return ProtoUDP, nil
	case 0, 43, 44, 51, 60:
		return "", fmt.Errorf("proto %d is an IPv6 extension header, never a flow's protocol (RFC 8200)", n)
	case 58:
		return "", fmt.Errorf("proto 58 (ICMPv6) is not for allow6: echo requests and errors already pass, and the rest follows RFC 4890")
	}
	return strconv.FormatUint(n, 10), nil
}

// validateNAT checks references and overlaps in nat: and firewall:.
func (c *Config) validateNAT(l *errorList) {
	nt := &c.NAT
	ifNames := c.interfaceNames()
	// iface returns the named interface, reporting an unknown one.
	iface := func(name string, at Pos, what string) *Interface {
		ifc := c.Interface(name)
		if ifc == nil {
			l.add(at, "%s: unknown interface %q%s", what, name, hint(name, ifNames))
		}
		return ifc
	}
	// An interface with "dhcp" has an IPv4 address while it holds a
	// lease; the NAT rules follow the lease (router/learned/lease.go).
	has4 := func(ifc *Interface) bool {
		if ifc.DHCP != nil || ifc.PPPoE != nil { // the lease's, IPCP's
			return true
		}
		for _, p := range ifc.Addresses {
			if p.Addr().Is4() {
				return true
			}
		}
		return false
	}
	own := func(a netip.Addr) *Interface {
		for i := range c.Interfaces {
			for _, p := range c.Interfaces[i].Addresses {
				if p.Addr() == a {
					return &c.Interfaces[i]
				}
			}
		}
		return nil
	}

	// Connection tracking runs on every interface; its MSS clamping and
	// fast path need the RFC 791 datagram minimum.
	smallPorts := make(map[string]bool)
	for i := range c.Interfaces {
		ifc := &c.Interfaces[i]
		if ifc.MTU >= MinMTU && ifc.MTU < MinMTUConntrack {
			l.add(ifc.src.at("mtu", ifc.Pos), "%s: mtu %d is below %d, the smallest the connection tracker supports (RFC 791)", interfaceWhat(ifc.Name), ifc.MTU, MinMTUConntrack)
		}
		if port := c.Port(ifc.Port); ifc.MTU == 0 && port != nil && port.MTU >= MinMTU && port.MTU < MinMTUConntrack && !smallPorts[port.Name] {
			smallPorts[port.Name] = true
			l.add(port.src.at("mtu", port.Pos), "%s: mtu %d is below %d, the smallest the connection tracker supports (RFC 791), and interface %q uses it",
				portWhat(port.Name), port.MTU, MinMTUConntrack, ifc.Name)
		}
	}

	masq := make(map[string]Pos)
	for i, name := range nt.Masquerade {
		at := nt.src.at("masquerade."+strconv.Itoa(i), nt.src.at("masquerade", nt.Pos))
		ifc := iface(name, at, "nat: masquerade")
		if ifc == nil {
			continue
		}
		if prev, ok := masq[name]; ok {
			l.add(at, "nat: masquerade: interface %q is listed twice%s", name, firstAt(prev))
			continue
		}
		masq[name] = at
		if !has4(ifc) {
			l.add(at, "nat: masquerade: interface %q has no IPv4 address to masquerade to", name)
		}
	}

	snatOn := make(map[string]Pos)
	pool := make(map[netip.Addr]Pos)
	for i := range nt.SNAT {
		s := &nt.SNAT[i]
		at := s.src.at("on", s.Pos)
		switch {
		case s.src.bad["on"]:
		case s.On == "":
			l.add(s.Pos, "nat: snat: on is required (the interface traffic leaves by)")
		case iface(s.On, at, "nat: snat: on") == nil:
		default:
			if prev, ok := snatOn[s.On]; ok {
				l.add(at, "nat: snat: interface %q has two snat entries%s; list every address in one", s.On, firstAt(prev))
			} else {
				snatOn[s.On] = s.Pos
			}
			if _, ok := masq[s.On]; ok {
				l.add(at, "nat: snat: interface %q is also in masquerade; choose one", s.On)
			}
		}
		if len(s.To) == 0 && !s.src.bad["to"] {
			l.add(s.src.at("to", s.Pos), "nat: snat: to needs at least one IPv4 address")
		}
		for j, a := range s.To {
			aat := s.src.at("to."+strconv.Itoa(j), s.Pos)
			if prev, ok := pool[a]; ok {
				l.add(aat, "nat: snat: address %s is listed twice%s", a, firstAt(prev))
				continue
			}
			pool[a] = aat
			if ifc := own(a); ifc != nil && ifc.Name != s.On {
				l.add(aat, "nat: snat: %s is interface %q's address, not %q's", a, ifc.Name, s.On)
			}
		}
	}

	c.validateForwards(l, iface, has4, own)

	if !nt.src.bad["filtering"] && nt.Filtering != "" && !contains(filteringNames, nt.Filtering) {
		l.add(nt.src.at("filtering", nt.Pos), "nat: unknown filtering %q%s", nt.Filtering, hint(nt.Filtering, filteringNames))
	}
	if nt.Hairpin != "" && !contains(onOffNames, nt.Hairpin) {
		l.add(nt.src.at("hairpin", nt.Pos), "nat: hairpin: want on or off, got %q", nt.Hairpin)
	}
	if v := nt.Conntrack.Max; v != 0 && (v < MinConntrackMax || v > MaxConntrackMax) {
		l.add(nt.src.at("max", nt.Pos), "nat: conntrack: max %d out of range: want %d..%d, or leave it out for %d", v, MinConntrackMax, MaxConntrackMax, DefaultConntrackMax)
	}
	c.validateHostLimits(l)
	c.checkConntrackMemory(l)
	c.validateTimeouts(l)

	fw := &c.Firewall
	if !fw.src.bad["wan_input"] && fw.WANInput != "" && !contains(inputNames, fw.WANInput) {
		l.add(fw.src.at("wan_input", fw.Pos), "firewall: unknown wan_input %q: want drop or accept", fw.WANInput)
	}
	for i := range fw.Allow6 {
		a := &fw.Allow6[i]
		switch {
		case a.To.IsValid() && a.Suffix.IsValid():
			l.add(a.src.at("suffix", a.Pos), "firewall: allow6: to and suffix both written: use one (to: a prefix or address; suffix: a host's interface ID in the lan /64s)")
		case !a.To.IsValid() && !a.Suffix.IsValid() && !a.src.bad["to"] && !a.src.bad["suffix"]:
			l.add(a.Pos, "firewall: allow6: to or suffix is required (an IPv6 prefix or address, or a host's interface ID such as ::1234)")
		}
		if a.Interface != "" {
			ic := c.Interface(a.Interface)
			switch {
			case !a.Suffix.IsValid():
				l.add(a.src.at("interface", a.Pos), "firewall: allow6: interface goes with suffix (the lan interface whose /64 holds the host)")
			case ic == nil:
				l.add(a.src.at("interface", a.Pos), "firewall: allow6: interface %q is not defined", a.Interface)
			case ic.Role != RoleLAN:
				l.add(a.src.at("interface", a.Pos), "firewall: allow6: interface %q is not a lan interface", a.Interface)
			}
		}
		if a.FirstPort == 0 || a.LastPort < a.FirstPort {
			l.add(a.src.at("port", a.Pos), "firewall: allow6: bad ports %d-%d", a.FirstPort, a.LastPort)
		}
		if _, err := parseAllow6Proto(a.Proto); a.Proto != "" && err != nil && !a.src.bad["proto"] {
			l.add(a.src.at("proto", a.Pos), "firewall: allow6: %v", err)
		}
	}
	c.validateZones(l)
	if fw.WANInputDrop() && len(fw.Zones) == 0 {
		for _, ls := range c.Status.Listen {
			if ifc := c.Interface(ls.Interface); ifc != nil && ifc.Role == RoleWAN {
				l.add(ls.Pos, "status: listen %q is on wan interface %q, where firewall: wan_input: drop (the default) refuses new connections; listen on a lan interface or set wan_input: accept",
					ls.String(), ifc.Name)
			}
		}
	}
}

func (c *Config) validateTimeouts(l *errorList) {
	t := c.NAT.Conntrack.Timeouts
	for _, x := range []struct {
		key string
		v   time.Duration
	}{
		{"tcp_established", t.TCPEstablished}, {"tcp_transitory", t.TCPTransitory},
		{"udp_unreplied", t.UDPUnreplied}, {"udp_stream", t.UDPStream},
		{"icmp", t.ICMP}, {"other", t.Other},
	} {
		lim := timeoutMinimums[x.key]
		at := c.NAT.src.at("timeouts."+x.key, c.NAT.Pos)
		switch {
		case x.v == 0:
		case x.v < lim.min:
			l.add(at, "nat: conntrack: timeouts: %s %s is below %s, the minimum (%s)", x.key, fmtDuration(x.v), fmtDuration(lim.min), lim.why)
		case x.v > MaxTimeout:
			l.add(at, "nat: conntrack: timeouts: %s %s is above %s", x.key, fmtDuration(x.v), fmtDuration(MaxTimeout))
		}
	}
}

// validateForwards checks each forward and that no two overlap.
func (c *Config) validateForwards(l *errorList, iface func(string, Pos, string) *Interface, has4 func(*Interface) bool, own func(netip.Addr) *Interface) {
	type placed struct {
		f  *Forward
		on []string
	}
	var done []placed
	var wans []string
	for _, ifc := range c.Interfaces {
		if ifc.Role == RoleWAN && has4(&ifc) {
			wans = append(wans, ifc.Name)
		}
	}
	for i := range c.NAT.Forwards {
		f := &c.NAT.Forwards[i]
		what := "nat: forward"
		if f.Proto != "" && f.FirstPort != 0 {
			what = fmt.Sprintf("nat: forward %s %s", f.Proto, f.PortString())
		}
		ok := true
		if f.Proto == "" && !f.src.bad["proto"] {
			l.add(f.Pos, "%s: proto is required (tcp or udp)", what)
			ok = false
		} else if f.src.bad["proto"] || !contains(protoNames, f.Proto) {
			if !f.src.bad["proto"] {
				l.add(f.src.at("proto", f.Pos), "%s: unknown proto %q: want tcp or udp", what, f.Proto)
			}
			ok = false
		}
		if f.FirstPort == 0 && !f.src.bad["port"] {
			l.add(f.Pos, "%s: port is required (8080 or a range like \"8000-8010\")", what)
			ok = false
		} else if f.src.bad["port"] || f.LastPort < f.FirstPort {
			if !f.src.bad["port"] {
				l.add(f.src.at("port", f.Pos), "%s: bad port range %d-%d", what, f.FirstPort, f.LastPort)
			}
			ok = false
		}
		toAt := f.src.at("to", f.Pos)
		switch a := f.To.Addr(); {
		case f.src.bad["to"]:
		case !f.To.IsValid():
			l.add(f.Pos, "%s: to is required (an address:port like 192.168.1.10:80)", what)
		case !a.Is4():
			l.add(toAt, "%s: to: %s is not IPv4", what, a)
		case a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			l.add(toAt, "%s: to: %s cannot be a forward target", what, a)
		case own(a) != nil:
			l.add(toAt, "%s: to: %s is the router's own address (interface %q); a forward must point at a host behind the router", what, a, own(a).Name)
		case ok && f.To.Port() != 0 && int(f.To.Port())+int(f.LastPort-f.FirstPort) > 65535:
			l.add(toAt, "%s: to: port range %d-%d does not fit below 65536", what, f.To.Port(), int(f.To.Port())+int(f.LastPort-f.FirstPort))
		}
		var on []string
		switch {
		case f.src.bad["on"]:
			ok = false
		case f.On == "":
			if len(wans) == 0 {
				l.add(f.Pos, "%s: no wan interface with an IPv4 address to listen on; set on", what)
				ok = false
			}
			on = wans
		default:
			ifc := iface(f.On, f.src.at("on", f.Pos), what+": on")
			if ifc == nil {
				ok = false
				break
			}
			if !has4(ifc) {
				l.add(f.src.at("on", f.Pos), "%s: on: interface %q has no IPv4 address to listen on", what, f.On)
				ok = false
			}
			on = []string{f.On}
		}
		if !ok {
			continue
		}
		for _, p := range done {
			if p.f.Proto != f.Proto || p.f.LastPort < f.FirstPort || f.LastPort < p.f.FirstPort {
				continue
			}
			if shared := firstShared(on, p.on); shared != "" {
				l.add(f.src.at("port", f.Pos), "%s: overlaps forward %s %s%s on interface %q", what, p.f.Proto, p.f.PortString(), atLine(p.f.Pos), shared)
				break
			}
		}
		if f.Proto == ProtoTCP {
			for _, ls := range c.Status.Listen {
				if ls.Interface != "" && slicesContains(on, ls.Interface) && ls.Port >= f.FirstPort && ls.Port <= f.LastPort {
					l.add(f.src.at("port", f.Pos), "%s: port %d on interface %q is the status page's (status: listen %q%s)", what, ls.Port, ls.Interface, ls.String(), atLine(ls.Pos))
				}
			}
		}
		done = append(done, placed{f, on})
	}
}

func firstShared(a, b []string) string {
	for _, x := range a {
		if slicesContains(b, x) {
			return x
		}
	}
	return ""
}

func slicesContains(l []string, s string) bool { return contains(l, s) }

// hostPart is the low 64 bits of a, as an address (::x:y:z:w).
func hostPart(a netip.Addr) string {
	b := a.As16()
	clear(b[:8])
	return netip.AddrFrom16(b).String()[2:]
}

// validateHostLimits checks nat.conntrack's per_host, ports_per_host and
// router_reserve against max.
func (c *Config) validateHostLimits(l *errorList) {
	nt := &c.NAT
	ct := &nt.Conntrack
	max := nt.MaxConns()
	if ct.Max != 0 && (ct.Max < MinConntrackMax || ct.Max > MaxConntrackMax) {
		return // reported; the limits below are relative to it
	}
	if v := ct.PerHost; !nt.src.bad["per_host"] && v != 0 && (v < 1 || v > max) {
		l.add(nt.src.at("per_host", nt.Pos), "nat: conntrack: per_host %d out of range: want 1..%d (max), or leave it out for %d (max/%d)", v, max, max/DefaultPerHostShare, DefaultPerHostShare)
	}
	if v := ct.PortsPerHost; !nt.src.bad["ports_per_host"] && v != 0 && (v < 1 || v > MaxConntrackMax) {
		l.add(nt.src.at("ports_per_host", nt.Pos), "nat: conntrack: ports_per_host %d out of range: want 1..%d, or leave it out for %d", v, MaxConntrackMax, DefaultPortsPerHost)
	}
	if v := ct.RouterReserve; !nt.src.bad["router_reserve"] && v != 0 && (v < 1 || v > max/2) {
		l.add(nt.src.at("router_reserve", nt.Pos), "nat: conntrack: router_reserve %d out of range: want 1..%d (max/2), or leave it out for %d (max/%d)", v, max/2, max/DefaultRouterReserveShare, DefaultRouterReserveShare)
	}
}
