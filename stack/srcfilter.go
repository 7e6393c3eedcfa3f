package stack

import (
	"encoding/binary"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// Source address filters.
//
// Ingress (BCP 38, RFC 2827; RFC 3704 section 2.1, an ingress access
// list, built from the interface's feasible paths as in section 2.3): an
// interface with InterfaceConfig.IngressFilter (the lan ones) accepts an
// IP packet only from a source its link can have: inside one of its
// subnets or of a route through it (Netstack.Routes with Dev the interface:
// the connected routes of its addresses, the delegated /64 among them, and
// static routes into a site behind it). A packet from anywhere else is
// spoofed: the router neither forwards it nor lets its own services answer
// it (the answer would be reflected to the forged source, out of the WAN),
// and counts it as "spoofed_source". The check runs in classify, after the
// IP header checks and before the fragment guard and NAT, so conntrack,
// netstack and the services behind it never see such a packet; raw-frame
// taps on IP get only packets it passes (tapSet.offer). It does not run on
// a fast-path hit: the engine takes a frame only for a flow direction
// offloaded on this interface, whose source (part of the flow's key) an
// earlier packet brought through classify; reloads that change the sets
// invalidate the fast path (Netstack.Apply), so every flow is checked
// again. A packet validated under the old sets just before a reload may
// still offload its flow: that flow keeps its fast path until it ends.
//
// Sources that are link-scoped pass only towards the router itself (its
// addresses, broadcast, multicast): 0.0.0.0 (a DHCP client, RFC 2131
// section 4.1), 169.254/16 (RFC 3927), :: (DAD and MLD, RFC 4862 section
// 5.4, RFC 3810 section 5.2.13) and fe80::/10 (neighbour discovery,
// DHCPv6). Netstack would not forward them anyway. The router's own
// addresses, broadcast and multicast never are a source (RFC 1812
// section 5.3.7; Linux drops a local source as a martian too).
//
// Egress: an interface with InterfaceConfig.EgressFilter (the wan ones)
// drops the packets the router itself originates (not forwarded ones)
// whose source lies inside an IngressFilter interface's prefixes and is
// none of its own addresses, counting "inside_source_out": an answer
// sourced from a LAN address must not leave un-NATed towards the
// Internet, whatever asked for it. Link-local prefixes and default
// routes are left out of the inside set.

// prefix4 is an IPv4 prefix as integers: a packet's source s is inside
// iff s&mask == addr.
type prefix4 struct{ addr, mask uint32 }

// prefix6 is an IPv6 prefix as two 64-bit halves, with their masks.
type prefix6 struct{ hi, lo, mhi, mlo uint64 }

// prefixSet is an immutable set of prefixes, compared by a linear scan:
// an interface has a handful.
type prefixSet struct {
	v4 []prefix4
	v6 []prefix6
}

func newPrefixSet(ps []netip.Prefix) prefixSet {
	var s prefixSet
	for _, p := range ps {
		if !p.IsValid() {
			continue
		}
		p = p.Masked()
		if p.Addr().Is4() {
			mask := ^(^uint32(0) >> p.Bits()) // Go: a shift by 32 gives 0
			s.v4 = append(s.v4, prefix4{binary.BigEndian.Uint32(p.Addr().AsSlice()), mask})
			continue
		}
		a := p.Addr().As16()
		mhi, mlo := mask64(p.Bits()), mask64(p.Bits()-64)
		s.v6 = append(s.v6, prefix6{binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:]), mhi, mlo})
	}
	return s
}

// mask64 is the mask of the first bits bits of a 64-bit word.
func mask64(bits int) uint64 {
	switch {
	case bits <= 0:
		return 0
	case bits >= 64:
		return ^uint64(0)
	}
	return ^(^uint64(0) >> bits)
}

func (s *prefixSet) has4(b []byte) bool {
	a := binary.BigEndian.Uint32(b)
	for _, p := range s.v4 {
		if a&p.mask == p.addr {
			return true
		}
	}
	return false
}

func (s *prefixSet) has6(b []byte) bool {
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:16])
	for _, p := range s.v6 {
		if hi&p.mhi == p.hi && lo&p.mlo == p.lo {
			return true
		}
	}
	return false
}

// sourceFilter is an IngressFilter interface's snapshot of the sources it
// accepts; swapped whole through Endpoint.ingress on Apply.
type sourceFilter struct {
	allowed prefixSet
	// own4 and own6 are the router's addresses (IPv4: and directed
	// broadcasts) inside allowed: the only ones allowed would pass. A
	// short list beats the local set's map on the per-packet path.
	own4 []uint32
	own6 [][2]uint64
}

// newSourceFilter returns the filter accepting sources in allowed,
// except the router's addresses local and the broadcast addresses of
// their prefixes.
func newSourceFilter(allowed []netip.Prefix, local []netip.Prefix) *sourceFilter {
	f := &sourceFilter{allowed: newPrefixSet(allowed)}
	for _, p := range local {
		addrs := []netip.Addr{p.Addr()}
		if b, ok := directedBroadcast(p); ok {
			addrs = append(addrs, b)
		}
		for _, a := range addrs {
			b := a.AsSlice()
			switch {
			case a.Is4() && f.allowed.has4(b):
				f.own4 = append(f.own4, binary.BigEndian.Uint32(b))
			case a.Is6() && f.allowed.has6(b):
				f.own6 = append(f.own6, [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])})
			}
		}
	}
	return f
}

// allows4 reports whether an IPv4 packet from src to dst (4 octets each)
// may arrive on the interface; local is the router's address set.
func (f *sourceFilter) allows4(src, dst []byte, local *localSet) bool {
	a := binary.BigEndian.Uint32(src)
	switch {
	case a == 0 || a>>16 == 0xa9fe: // 0.0.0.0, 169.254/16
		return local.has4(dst)
	case a>>28 >= 0xe: // multicast 224/4, reserved 240/4, 255.255.255.255
		return false
	case !f.allowed.has4(src):
		return false
	}
	for _, o := range f.own4 {
		if a == o {
			return false
		}
	}
	return true
}

// allows6 is allows4 for IPv6 (16 octets each).
func (f *sourceFilter) allows6(src, dst []byte, local *localSet) bool {
	hi, lo := binary.BigEndian.Uint64(src[:8]), binary.BigEndian.Uint64(src[8:16])
	switch {
	case hi == 0 && lo == 0 || hi>>54 == 0xfe80>>6: // ::, fe80::/10
		return local.has6(dst)
	case hi>>56 == 0xff: // multicast
		return false
	case !f.allowed.has6(src):
		return false
	}
	for _, o := range f.own6 {
		if hi == o[0] && lo == o[1] {
			return false
		}
	}
	return true
}

// allowsFrame is allows4/allows6 for an untagged Ethernet frame of any
// EtherType: not IP passes; IP too short to hold its addresses does not.
func (f *sourceFilter) allowsFrame(frame []byte, local *localSet) bool {
	ip := frame[header.EthernetMinimumSize:]
	switch binary.BigEndian.Uint16(frame[12:]) {
	case uint16(header.IPv4ProtocolNumber):
		return len(ip) >= header.IPv4MinimumSize && f.allows4(ip[12:16], ip[16:20], local)
	case uint16(header.IPv6ProtocolNumber):
		return len(ip) >= header.IPv6MinimumSize && f.allows6(ip[8:24], ip[24:40], local)
	}
	return true
}

// egressFilter is an EgressFilter interface's snapshot: the inside
// prefixes, and its own addresses, which may lie inside them (a WAN
// address from a range also routed into the LAN) and still are its.
type egressFilter struct {
	inside, own prefixSet
}

// insideSource reports whether the IP packet starting at frame[ipOff:]
// (EtherType just before it) has an inside source that is not the
// interface's own.
func (f *egressFilter) insideSource(frame []byte, ipOff int) bool {
	if ipOff < 2 || len(frame) < ipOff {
		return false
	}
	ip := frame[ipOff:]
	switch binary.BigEndian.Uint16(frame[ipOff-2:]) {
	case uint16(header.IPv4ProtocolNumber):
		return len(ip) >= header.IPv4MinimumSize && f.inside.has4(ip[12:16]) && !f.own.has4(ip[12:16])
	case uint16(header.IPv6ProtocolNumber):
		return len(ip) >= header.IPv6MinimumSize && f.inside.has6(ip[8:24]) && !f.own.has6(ip[8:24])
	}
	return false
}

// isLinkLocalPrefix reports whether p lies within 169.254/16 or fe80::/10.
func isLinkLocalPrefix(p netip.Prefix) bool {
	return p.Addr().IsLinkLocalUnicast() && p.Bits() >= 10 && (p.Addr().Is6() || p.Bits() >= 16)
}

// refreshSourceFiltersLocked rebuilds every interface's ingress and
// egress filter from r.routes and the interfaces' flags and addresses.
// r.mu must be held; the caller invalidates the fast path afterwards.
func (r *Netstack) refreshSourceFiltersLocked() {
	byDev := make(map[string][]netip.Prefix)
	for _, rc := range r.routes {
		byDev[rc.Dev] = append(byDev[rc.Dev], rc.To)
	}
	var own []netip.Prefix
	for _, ifc := range r.ifaces {
		own = append(own, ifc.addrs...)
	}
	var inside []netip.Prefix
	for _, ifc := range r.ifaces {
		if !ifc.ingressFilter {
			ifc.ep.ingress.Store(nil)
			continue
		}
		ps := byDev[ifc.name]
		ifc.ep.ingress.Store(newSourceFilter(ps, own))
		for _, p := range ps {
			if p.Bits() > 0 && !isLinkLocalPrefix(p) {
				inside = append(inside, p)
			}
		}
	}
	for _, ifc := range r.ifaces {
		if !ifc.egressFilter || len(inside) == 0 {
			ifc.ep.egressFilter.Store(nil)
			continue
		}
		own := make([]netip.Prefix, 0, len(ifc.addrs))
		for _, p := range ifc.addrs {
			own = append(own, netip.PrefixFrom(p.Addr(), p.Addr().BitLen()))
		}
		ifc.ep.egressFilter.Store(&egressFilter{inside: newPrefixSet(inside), own: newPrefixSet(own)})
	}
}
