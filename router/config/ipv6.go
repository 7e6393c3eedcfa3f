package config

import (
	"net/netip"
)

// Home-network IPv6: on a wan interface, router advertisements learned from
// the ISP and a DHCPv6 client asking for a delegated prefix; on a lan
// interface, a /64 of that delegation (or a static /64), announced by
// router advertisements, and a stateless DHCPv6 server.

// IPv6 bounds.
const (
	// MinPDLength and MaxPDLength bound the prefix length hinted in
	// IA_PD: ISPs delegate /48 to /64 (RFC 6177 recommends /56 for
	// homes); shorter would be an ISP's own allocation.
	MinPDLength = 48
	MaxPDLength = 64
	// LANPrefixLength is the length of a lan interface's prefix carved
	// from the delegation: SLAAC needs exactly /64 (RFC 4862 §5.5.3,
	// RFC 7421).
	LANPrefixLength = 64
	// SubnetAuto is IPv6.Subnet when subnet: is not written: the router
	// picks the lowest free subnet id and keeps it in its state
	// directory.
	SubnetAuto = -1
)

// IPv6 is an interface's ipv6: mapping. On a wan interface it has PD,
// Address and AcceptRA; on a lan interface Subnet, RA, Managed, Other and
// DHCPv6.
type IPv6 struct {
	// PD is the prefix length asked for by DHCPv6 prefix delegation
	// (IA_PD hint), 48..64, e.g. 56; 0 = no DHCPv6 client (wan only).
	PD int
	// Address asks for the wan interface's own address by DHCPv6 IA_NA
	// too (address: on; default off: most ISPs number the WAN link by RA
	// or not at all).
	Address bool
	// Release sends a DHCPv6 Release for the delegation when the router
	// stops cleanly (release: on; default off: a restart then keeps the
	// prefix, and the LAN its addresses).
	Release bool
	// AcceptRA learns the default route and on-link prefixes from the
	// ISP's router advertisements, as Linux's accept_ra=2 does on a
	// forwarding interface (ra: on|off; default on on a wan interface).
	AcceptRA bool
	// Subnet is the lan interface's /64 within the delegation: the
	// delegated prefix with Subnet in the bits after it, e.g. 1 gives
	// 2001:db8:0:1::/64 of 2001:db8::/56; SubnetAuto = picked once and
	// kept across restarts.
	Subnet int
	// RA sends router advertisements on a lan interface (ra: on|off;
	// default on): the delegated /64 and any static /64 with the A flag,
	// the router as DNS server (RDNSS) and the domain (DNSSL).
	RA bool
	// Managed and Other are the RAs' M and O flags (RFC 4861 §4.2):
	// addresses and other configuration by DHCPv6. Managed defaults off
	// (the router serves no DHCPv6 addresses); Other defaults to DHCPv6.
	Managed, Other bool
	// DHCPv6 answers stateless DHCPv6 (Information-request: DNS servers
	// and domain) on a lan interface (dhcpv6: on|off; default on).
	DHCPv6 bool
	Pos    Pos

	src src
}

var (
	ipv6WANKeys = []string{"pd", "address", "release", "ra"}
	ipv6LANKeys = []string{"subnet", "ra", "managed", "other", "dhcpv6"}
	ipv6Keys    = []string{"pd", "address", "release", "ra", "subnet", "managed", "other", "dhcpv6"}
)

// DefaultIPv6 is the ipv6: mapping in force for an interface of role that
// has none: RAs are learned on a wan and sent on a lan (where the
// interface has an IPv6 /64 to announce), stateless DHCPv6 answered.
func DefaultIPv6(role string) *IPv6 {
	return &IPv6{AcceptRA: role == RoleWAN, RA: role == RoleLAN, DHCPv6: role == RoleLAN,
		Other: role == RoleLAN, Subnet: SubnetAuto}
}

// IPv6OrDefault returns the interface's ipv6: settings, or DefaultIPv6.
func (i *Interface) IPv6OrDefault() *IPv6 {
	if i.IPv6 != nil {
		return i.IPv6
	}
	return DefaultIPv6(i.Role)
}

// IPv6Settings returns the ipv6: settings in force on interface ic: its
// own mapping or DefaultIPv6 for its role, but all off on an interface
// that carries a SecY. Netstack would send the RSs, RAs and DHCPv6 of
// such an interface untagged on the wire, outside MACsec, and take its
// peers' in clear; IPv6 belongs on the SecY above it.
func (c *Config) IPv6Settings(ic *Interface) *IPv6 {
	if c.CarriesMACsec(ic.Name) {
		return &IPv6{Subnet: SubnetAuto, Pos: ic.Pos}
	}
	return ic.IPv6OrDefault()
}

// ipv6 decodes an interface's ipv6: mapping. The role is not known yet
// (keys may come in any order), so every key is read here and the ones
// the role does not take are reported by validateIPv6.
func (d *decoder) ipv6(ifc *Interface, e entry, what string) {
	what += ": ipv6"
	ifc.src.set("ipv6", posOf(e.key))
	v := &IPv6{Pos: posOf(e.key), Subnet: SubnetAuto, AcceptRA: true, RA: true, DHCPv6: true}
	v.src.set("", posOf(e.key))
	ifc.IPv6 = v
	if isNull(e.val) || !d.object(e.val, what) {
		return
	}
	m := d.mapping(e.val, what, ipv6Keys, nil)
	d.intKey(m, "pd", what, &v.src, &v.PD)
	d.intKey(m, "subnet", what, &v.src, &v.Subnet)
	onOff := func(key string, dst *bool) {
		if e, ok := m[key]; ok {
			v.src.set(key, posOf(e.val))
			if w, ok := d.onOffWord(e, what); ok {
				*dst = w == "on"
			} else {
				v.src.markBad(key)
			}
		}
	}
	onOff("address", &v.Address)
	onOff("release", &v.Release)
	var ra bool
	if _, ok := m["ra"]; ok {
		onOff("ra", &ra)
		v.AcceptRA, v.RA = ra, ra
	}
	onOff("dhcpv6", &v.DHCPv6)
	v.Other = v.DHCPv6
	onOff("managed", &v.Managed)
	onOff("other", &v.Other)
}

// validateIPv6 checks an interface's ipv6: mapping against its role and
// addresses.
func (c *Config) validateIPv6(l *errorList, ifc *Interface, what string) {
	v := ifc.IPv6
	what += ": ipv6"
	if notYetRunning["ipv6"] {
		l.add(v.Pos, "%s: prefix delegation and router advertisements are %s yet", what, errNotSupportedSuffix)
	}
	allowed, keysOf := ipv6LANKeys, RoleWAN
	if ifc.Role == RoleWAN {
		allowed, keysOf = ipv6WANKeys, RoleLAN
	}
	for _, k := range ipv6Keys {
		if _, ok := v.src.pos[k]; ok && !contains(allowed, k) {
			l.add(v.src.at(k, v.Pos), "%s: %s is for %s interfaces (this one is %s)", what, k, keysOf, quote(ifc.Role))
		}
	}
	if ms := c.macsecOn(ifc.Name); ms != nil && (v.PD > 0 || v.Address || v.AcceptRA && ifc.Role == RoleWAN || v.RA && ifc.Role == RoleLAN || v.DHCPv6 && ifc.Role == RoleLAN) {
		l.add(v.Pos, "%s: interface %q carries macsec %q, so its IPv6 would cross the link in clear, outside MACsec; give the SecY the IPv6 addresses, and set this off (ipv6: {ra: off})", what, ifc.Name, ms.Name)
	}
	if v.src.written("pd") && !v.src.bad["pd"] && (v.PD < MinPDLength || v.PD > MaxPDLength) {
		l.add(v.src.at("pd", v.Pos), "%s: pd %d out of range %d..%d (the length of the delegated prefix asked for, e.g. 56)", what, v.PD, MinPDLength, MaxPDLength)
	}
	if ifc.Role == RoleWAN && v.Release && v.PD == 0 {
		l.add(v.src.at("release", v.Pos), "%s: release: there is no delegation to release without pd (e.g. pd: 56)", what)
	}
	if v.src.written("subnet") && !v.src.bad["subnet"] && v.Subnet < 0 {
		l.add(v.src.at("subnet", v.Pos), "%s: subnet %d: want 0 or more (the /64's number within the delegated prefix)", what, v.Subnet)
	}
	if ifc.Role == RoleLAN && v.src.written("subnet") && c.delegatingWAN() == nil {
		l.add(v.src.at("subnet", v.Pos), "%s: subnet: no wan interface asks for a delegated prefix (ipv6: {pd: 56} on the wan)", what)
	}
}

// validateDelegation checks what holds across interfaces: one delegating
// wan, lan subnet ids that fit the delegation and differ.
func (c *Config) validateDelegation(l *errorList) {
	var wan *Interface
	for i := range c.Interfaces {
		ifc := &c.Interfaces[i]
		if ifc.Role != RoleWAN || ifc.IPv6 == nil || ifc.IPv6.PD == 0 {
			continue
		}
		if wan != nil {
			l.add(ifc.IPv6.src.at("pd", ifc.IPv6.Pos), "interface %q: ipv6: pd: interface %q already asks for a delegated prefix%s; only one wan may", ifc.Name, wan.Name, atLine(wan.IPv6.Pos))
			continue
		}
		wan = ifc
	}
	if wan == nil || wan.IPv6.PD < MinPDLength || wan.IPv6.PD > MaxPDLength {
		return
	}
	subnets := 1 << (LANPrefixLength - wan.IPv6.PD)
	seen := map[int]string{}
	for i := range c.Interfaces {
		ifc := &c.Interfaces[i]
		if ifc.Role != RoleLAN || ifc.IPv6 == nil || ifc.IPv6.Subnet == SubnetAuto || ifc.IPv6.src.bad["subnet"] {
			continue
		}
		n := ifc.IPv6.Subnet
		if n >= subnets {
			l.add(ifc.IPv6.src.at("subnet", ifc.IPv6.Pos), "interface %q: ipv6: subnet %d does not fit a /%d delegation (0..%d)", ifc.Name, n, wan.IPv6.PD, subnets-1)
			continue
		}
		if o, ok := seen[n]; ok {
			l.add(ifc.IPv6.src.at("subnet", ifc.IPv6.Pos), "interface %q: ipv6: subnet %d is interface %q's too", ifc.Name, n, o)
		}
		seen[n] = ifc.Name
	}
}

// delegatingWAN returns the wan interface that asks for a delegated
// prefix, or nil.
func (c *Config) delegatingWAN() *Interface {
	for i := range c.Interfaces {
		ifc := &c.Interfaces[i]
		if ifc.Role == RoleWAN && ifc.IPv6 != nil && ifc.IPv6.PD != 0 {
			return ifc
		}
	}
	return nil
}

// DelegatingWAN returns the name of the wan interface whose DHCPv6 client
// asks for a delegated prefix, or "".
func (c *Config) DelegatingWAN() string {
	if w := c.delegatingWAN(); w != nil {
		return w.Name
	}
	return ""
}

// SubnetOf returns the /64 with subnet id n within delegated (a prefix of
// at most 64 bits), or false when n does not fit.
func SubnetOf(delegated netip.Prefix, n int) (netip.Prefix, bool) {
	bits := delegated.Bits()
	if !delegated.Addr().Is6() || bits > LANPrefixLength || n < 0 || n >= 1<<(LANPrefixLength-bits) {
		return netip.Prefix{}, false
	}
	a := delegated.Masked().Addr().As16()
	// The subnet id goes in bits [bits, 64): the low end of the first
	// eight bytes.
	hi := uint64(a[0])<<56 | uint64(a[1])<<48 | uint64(a[2])<<40 | uint64(a[3])<<32 |
		uint64(a[4])<<24 | uint64(a[5])<<16 | uint64(a[6])<<8 | uint64(a[7])
	hi |= uint64(n)
	for i := 0; i < 8; i++ {
		a[i] = byte(hi >> (56 - 8*i))
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), LANPrefixLength), true
}

// written reports whether key was written.
func (s *src) written(key string) bool {
	_, ok := s.pos[key]
	return ok
}
