package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gvrouter/gvrouter/firewall"
)

// PortMapping is the port_mapping: section: which protocols LAN
// applications may map ports with, and the policy (package portmap), e.g.
//
//	port_mapping:
//	  natpmp: on
//	  pcp: on
//	  upnp: on
//	  allow: ["1024-65535 192.168.1.0/24 1024-65535"]
//	  zones: [lan]
//
// Each protocol is off unless written on; the servers listen on the
// inside zones' interfaces' addresses only, never on a wan one
// (PortMapIfaces), and answer only the zones that zones: permits.
type PortMapping struct {
	NATPMP bool // NAT-PMP (RFC 6886) on UDP 5351
	PCP    bool // PCP (RFC 6887) on UDP 5351
	UPnP   bool // UPnP IGD v1: SSDP on UDP 1900, HTTP on UPnPPort
	// Secure: a host maps only to itself (miniupnpd's secure_mode);
	// default on.
	Secure bool
	// Rules are the permission rules in miniupnpd's order, the first
	// match decides; nil = portmap.DefaultRules (1024-65535 to
	// 1024-65535 for everyone).
	Rules []PortMapRule
	// MaxPerHost and MaxTotal bound the mappings, e.g. 64 and 1024;
	// 0 = portmap's defaults.
	MaxPerHost, MaxTotal int
	// MinLifetime and MaxLifetime narrow the 120 s - 86,400 s clamp;
	// 0 = those bounds.
	MinLifetime, MaxLifetime time.Duration
	// Zones are the firewall zones whose hosts may map ports, e.g.
	// [lan]; nil = every inside zone whose input policy is accept (the
	// implicit zone lan without firewall: zones:). A host of another
	// inside zone (a guest zone) is answered "not authorized". A zone
	// that masquerades or holds a wan interface can never be listed.
	Zones []string
	Pos   Pos // where port_mapping: is written

	src src
}

// PortMapRule is one permission rule, "[allow|deny] EXTPORTS PREFIX
// INTPORTS" as miniupnpd's, e.g. "allow 1024-65535 192.168.1.0/24
// 1024-65535".
type PortMapRule struct {
	Allow    bool
	External [2]uint16 // first, last
	Inside   netip.Prefix
	Internal [2]uint16
}

// UPnPPort is the TCP port of the UPnP description and control server on
// the lan addresses (miniupnpd's default http_port is random; a fixed one
// is easier to find in a capture and to firewall).
const UPnPPort = 5000

// PMPPort is the UDP port NAT-PMP and PCP share (RFC 6886 section 3,
// RFC 6887 section 19.1).
const PMPPort = 5351

// Lifetime bounds of port_mapping: (portmap.DefaultMinLifetime and
// DefaultMaxLifetime, issue 41): the section may only narrow them.
const (
	MinPortMapLifetime = 120 * time.Second
	MaxPortMapLifetime = 86400 * time.Second
)

var portMappingKeys = []string{"natpmp", "pcp", "upnp", "secure", "allow", "max_per_host", "max_total", "min_lifetime", "max_lifetime", "zones"}

// Enabled reports whether any protocol is on.
func (p *PortMapping) Enabled() bool { return p != nil && (p.NATPMP || p.PCP || p.UPnP) }

// Equal reports whether p and q configure the same port mapping;
// positions are ignored.
func (p *PortMapping) Equal(q *PortMapping) bool {
	if p == nil || q == nil {
		return p == q
	}
	return p.NATPMP == q.NATPMP && p.PCP == q.PCP && p.UPnP == q.UPnP && p.Secure == q.Secure &&
		p.MaxPerHost == q.MaxPerHost && p.MaxTotal == q.MaxTotal && p.MinLifetime == q.MinLifetime &&
		p.MaxLifetime == q.MaxLifetime && fmt.Sprint(p.Rules) == fmt.Sprint(q.Rules) &&
		fmt.Sprint(p.Zones) == fmt.Sprint(q.Zones) && (p.Zones == nil) == (q.Zones == nil)
}

// portMapping decodes port_mapping:.
func (d *decoder) portMapping(c *Config, e entry) {
	const what = "port_mapping"
	p := &PortMapping{Pos: posOf(e.key), Secure: true}
	p.src.set("", posOf(e.key))
	c.PortMapping = p
	if isNull(e.val) {
		return
	}
	if !d.object(e.val, what) {
		p.src.markBad("")
		return
	}
	m := d.mapping(e.val, what, portMappingKeys, nil)
	for key, dst := range map[string]*bool{"natpmp": &p.NATPMP, "pcp": &p.PCP, "upnp": &p.UPnP, "secure": &p.Secure} {
		if e, ok := m[key]; ok {
			p.src.set(key, posOf(e.val))
			if w, ok := d.onOffWord(e, what); ok {
				*dst = w == "on"
			} else {
				p.src.markBad(key)
			}
		}
	}
	d.intKey(m, "max_per_host", what, &p.src, &p.MaxPerHost)
	d.intKey(m, "max_total", what, &p.src, &p.MaxTotal)
	for key, dst := range map[string]*time.Duration{"min_lifetime": &p.MinLifetime, "max_lifetime": &p.MaxLifetime} {
		if te, ok := m[key]; ok {
			p.src.set(key, posOf(te.val))
			if v, ok := d.duration(te, what); ok {
				*dst = v
			} else {
				p.src.markBad(key)
			}
		}
	}
	if ze, ok := m["zones"]; ok {
		p.src.set("zones", posOf(ze.val))
		items, ok := d.list(ze, what)
		if !ok {
			p.src.markBad("zones")
		}
		p.Zones = []string{}
		for _, it := range items {
			if it.Kind != yaml.ScalarNode || isNull(it) {
				d.errorf(it, "%s: zones: want a zone name, got %s", what, kindName(it))
				p.src.markBad("zones")
				continue
			}
			p.src.set("zones."+strconv.Itoa(len(p.Zones)), posOf(it))
			p.Zones = append(p.Zones, it.Value)
		}
	}
	if ae, ok := m["allow"]; ok {
		p.src.set("allow", posOf(ae.val))
		items, ok := d.list(ae, what)
		if !ok {
			p.src.markBad("allow")
		}
		p.Rules = []PortMapRule{}
		for _, it := range items {
			r, err := parsePortMapRule(it)
			if err != nil {
				d.errorf(it, "%s: allow: %v", what, err)
				p.src.markBad("allow")
				continue
			}
			p.Rules = append(p.Rules, r)
		}
	}
}

// parsePortMapRule parses "[allow|deny] 1024-65535 192.168.1.0/24
// 1024-65535"; a single port stands for a range of one.
func parsePortMapRule(n *yaml.Node) (PortMapRule, error) {
	const want = `want a rule like "1024-65535 192.168.1.0/24 1024-65535" (optionally after allow or deny)`
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return PortMapRule{}, fmt.Errorf("%s, got %s", want, kindName(n))
	}
	f := strings.Fields(n.Value)
	r := PortMapRule{Allow: true}
	if len(f) == 4 {
		switch f[0] {
		case "allow":
		case "deny":
			r.Allow = false
		default:
			return r, fmt.Errorf("%s: %s is neither allow nor deny", want, quote(f[0]))
		}
		f = f[1:]
	}
	if len(f) != 3 {
		return r, fmt.Errorf("%s, got %s", want, echo(n.Value))
	}
	var err error
	if r.External[0], r.External[1], err = parsePortRange(f[0]); err != nil {
		return r, fmt.Errorf("external ports: %v", err)
	}
	pfx, err := netip.ParsePrefix(f[1])
	if err != nil || !pfx.Addr().Is4() {
		a, aerr := netip.ParseAddr(f[1])
		if aerr != nil || !a.Is4() {
			return r, fmt.Errorf("inside %s: want an IPv4 prefix like 192.168.1.0/24 or an address", quote(f[1]))
		}
		pfx = netip.PrefixFrom(a, 32)
	}
	if pfx != pfx.Masked() {
		return r, fmt.Errorf("inside %s has host bits set; write %s", quote(f[1]), pfx.Masked())
	}
	r.Inside = pfx
	if r.Internal[0], r.Internal[1], err = parsePortRange(f[2]); err != nil {
		return r, fmt.Errorf("internal ports: %v", err)
	}
	return r, nil
}

// validatePortMapping checks port_mapping: against the interfaces.
func (c *Config) validatePortMapping(l *errorList) {
	p := c.PortMapping
	if p == nil || p.src.bad[""] {
		return
	}
	const what = "port_mapping"
	if !p.src.bad["max_per_host"] && p.MaxPerHost < 0 {
		l.add(p.src.at("max_per_host", p.Pos), "%s: max_per_host %d is negative (0 = the default, 64)", what, p.MaxPerHost)
	}
	if !p.src.bad["max_total"] && p.MaxTotal < 0 {
		l.add(p.src.at("max_total", p.Pos), "%s: max_total %d is negative (0 = the default, 1024)", what, p.MaxTotal)
	}
	if p.MaxPerHost > 0 && p.MaxTotal > 0 && p.MaxPerHost > p.MaxTotal {
		l.add(p.src.at("max_per_host", p.Pos), "%s: max_per_host %d is above max_total %d", what, p.MaxPerHost, p.MaxTotal)
	}
	for _, key := range []string{"min_lifetime", "max_lifetime"} {
		v := p.MinLifetime
		if key == "max_lifetime" {
			v = p.MaxLifetime
		}
		if v != 0 && (v < MinPortMapLifetime || v > MaxPortMapLifetime) {
			l.add(p.src.at(key, p.Pos), "%s: %s %s out of range 2m..24h (RFC 6887's minimum, miniupnpd's maximum)", what, key, fmtDuration(v))
		}
	}
	if p.MinLifetime != 0 && p.MaxLifetime != 0 && p.MinLifetime > p.MaxLifetime {
		l.add(p.src.at("min_lifetime", p.Pos), "%s: min_lifetime %s is above max_lifetime %s", what, fmtDuration(p.MinLifetime), fmtDuration(p.MaxLifetime))
	}
	if p.Rules != nil && len(p.Rules) == 0 && !p.src.bad["allow"] {
		l.add(p.src.at("allow", p.Pos), "%s: allow: an empty list refuses every mapping; leave it out for the default (1024-65535 for every host)", what)
	}
	zonesOK := c.validatePortMapZones(l)
	if !p.Enabled() {
		return
	}
	var wan, lan bool
	for _, ic := range c.Interfaces {
		if ic.Role == RoleWAN {
			wan = true
		}
	}
	for _, pi := range c.PortMapIfaces() {
		lan = lan || pi.Permitted
	}
	if !wan {
		l.add(p.Pos, "%s: mappings are made on the wan interface, and there is none (role: wan)", what)
	}
	if !lan && zonesOK {
		l.add(p.Pos, "%s: the servers listen on lan interfaces' IPv4 addresses, and no interface of a zone permitted to map ports has a static one", what)
	}
}

// validatePortMapZones checks that port_mapping: zones: names zones
// that exist, each once, none of them WAN-side; it reports whether the
// list is sound.
func (c *Config) validatePortMapZones(l *errorList) bool {
	p := c.PortMapping
	if p.src.bad["zones"] {
		return false
	}
	if p.Zones == nil {
		return true
	}
	const what = "port_mapping: zones"
	if len(p.Zones) == 0 {
		l.add(p.src.at("zones", p.Pos), "%s: an empty list permits no zone; turn the protocols off instead, or leave it out for the default (the inside zones whose input is accept)", what)
		return false
	}
	names := c.portMapZoneNames()
	ok := true
	for i, z := range p.Zones {
		at := p.src.at("zones."+strconv.Itoa(i), p.Pos)
		switch {
		case !slices.Contains(names, z):
			l.add(at, "%s: unknown zone %q%s", what, z, hint(z, names))
		case slices.Contains(p.Zones[:i], z):
			l.add(at, "%s: zone %q listed twice", what, z)
		case c.wanSideZone(z):
			l.add(at, "%s: zone %q is WAN-side (it masquerades or holds a wan interface): port mapping never answers there", what, z)
		default:
			continue
		}
		ok = false
	}
	return ok
}

// portMapZoneNames returns the firewall zones' names, or the implicit
// lan and wan without firewall: zones:.
func (c *Config) portMapZoneNames() []string {
	if len(c.Firewall.Zones) == 0 {
		return []string{"lan", "wan"}
	}
	var out []string
	for _, z := range c.Firewall.Zones {
		out = append(out, z.Name)
	}
	return out
}

// wanSideZone reports whether zone name is WAN-side: it masquerades,
// holds a role wan interface or one that nat: masquerade: lists (the
// implicit zone wan without firewall: zones:).
func (c *Config) wanSideZone(name string) bool {
	if len(c.Firewall.Zones) == 0 {
		return name != "lan"
	}
	for _, z := range c.Firewall.Zones {
		if z.Name != name {
			continue
		}
		if z.Masquerade {
			return true
		}
		for _, ifn := range z.Interfaces {
			if ic := c.Interface(ifn); ic != nil && ic.Role == RoleWAN || slices.Contains(c.NAT.Masquerade, ifn) {
				return true
			}
		}
	}
	return false
}

// PortMapIface is an interface the port mapping servers listen on.
type PortMapIface struct {
	Name string
	Zone string // its firewall zone; "lan" without firewall: zones:
	// Permitted: port_mapping: zones: lets the zone's hosts map ports
	// (by default, an inside zone whose input policy is accept). The
	// servers answer the others' requests "not authorized" and send
	// them no SSDP answers.
	Permitted bool
	Addrs     []netip.Prefix // its static IPv4 addresses
}

// PortMapIfaces returns the interfaces the port mapping servers listen
// on, in config order: those with a static IPv4 address in an inside
// zone (one that is not WAN-side); without firewall: zones:, the role
// lan ones. This is the one place that decides which interfaces are
// LAN-side for port mapping.
func (c *Config) PortMapIfaces() []PortMapIface {
	var out []PortMapIface
	for i := range c.Interfaces {
		ic := &c.Interfaces[i]
		zone := ""
		if len(c.Firewall.Zones) == 0 {
			if ic.Role == RoleLAN {
				zone = "lan"
			}
		} else {
			for _, z := range c.Firewall.Zones {
				if slices.Contains(z.Interfaces, ic.Name) {
					zone = z.Name
				}
			}
		}
		if zone == "" || ic.Role == RoleWAN || c.wanSideZone(zone) {
			continue
		}
		var addrs []netip.Prefix
		for _, p := range ic.Addresses {
			if p.Addr().Is4() {
				addrs = append(addrs, p)
			}
		}
		if len(addrs) > 0 {
			out = append(out, PortMapIface{Name: ic.Name, Zone: zone, Permitted: c.portMapPermits(zone), Addrs: addrs})
		}
	}
	return out
}

// portMapPermits reports whether hosts of the inside zone name may map
// ports.
func (c *Config) portMapPermits(name string) bool {
	if p := c.PortMapping; p != nil && p.Zones != nil {
		return slices.Contains(p.Zones, name)
	}
	if len(c.Firewall.Zones) == 0 {
		return name == "lan"
	}
	for i := range c.Firewall.Zones {
		if z := &c.Firewall.Zones[i]; z.Name == name {
			in, _, _ := z.Policies()
			return in == firewall.Accept
		}
	}
	return false
}
