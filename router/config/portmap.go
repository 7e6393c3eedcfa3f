package config

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// PortMapping is the port_mapping: section: which protocols LAN
// applications may map ports with, and the policy (package portmap), e.g.
//
//	port_mapping:
//	  natpmp: on
//	  pcp: on
//	  upnp: on
//	  allow: ["1024-65535 192.168.1.0/24 1024-65535"]
//
// Each protocol is off unless written on; the servers listen on the lan
// interfaces' addresses only, never on a wan one.
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
	Pos                      Pos // where port_mapping: is written

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

// Lifetime bounds of port_mapping: (portmap.DefaultMinLifetime and
// DefaultMaxLifetime, issue 41): the section may only narrow them.
const (
	MinPortMapLifetime = 120 * time.Second
	MaxPortMapLifetime = 86400 * time.Second
)

var portMappingKeys = []string{"natpmp", "pcp", "upnp", "secure", "allow", "max_per_host", "max_total", "min_lifetime", "max_lifetime"}

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
		p.MaxLifetime == q.MaxLifetime && fmt.Sprint(p.Rules) == fmt.Sprint(q.Rules)
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
	if !p.Enabled() {
		return
	}
	var wan, lan bool
	for _, ic := range c.Interfaces {
		switch {
		case ic.Role == RoleWAN:
			wan = true
		case len(PortMapLANAddrs(&ic)) > 0:
			lan = true
		}
	}
	if !wan {
		l.add(p.Pos, "%s: mappings are made on the wan interface, and there is none (role: wan)", what)
	}
	if !lan {
		l.add(p.Pos, "%s: the servers listen on lan interfaces' IPv4 addresses, and no lan interface has a static one", what)
	}
}

// PortMapLANAddrs returns the addresses of ic the port mapping servers
// listen on: its static IPv4 addresses if it is LAN-side, else none.
// This is the one place that decides which interfaces are LAN-side for
// port mapping: today role lan; firewall zones will decide it later.
func PortMapLANAddrs(ic *Interface) []netip.Prefix {
	if ic.Role != RoleLAN {
		return nil
	}
	var out []netip.Prefix
	for _, p := range ic.Addresses {
		if p.Addr().Is4() {
			out = append(out, p)
		}
	}
	return out
}
