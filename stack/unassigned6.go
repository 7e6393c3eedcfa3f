package stack

import (
	"net/netip"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// The unassigned-prefix guard drops forwarded IPv6 packets to the parts
// of a delegated prefix that no interface uses (RFC 7084 WPD-5): the rest
// of a /56 the ISP routes to the router while only some /64s are on LAN
// interfaces. Without it such a packet follows the default route back to
// the ISP, which routes it to the router again, until its hop limit ends
// (a loop per packet). Netstack's routes have no unreachable type, so the
// guard runs in the forward hook, before the route is used, counts the
// drop on the ingress interface (unassigned_delegated) and answers with
// ICMPv6 Destination Unreachable, code 0 "no route to destination" (WPD-5
// (a), RFC 4443 section 3.1).

// unassigned6 is an immutable set: the delegated prefixes and, within
// them, the prefixes in use.
type unassigned6 struct {
	delegated []netip.Prefix
	assigned  []netip.Prefix
}

// SetUnassigned6 makes the router drop forwarded packets to delegated
// prefixes outside assigned (typically the /64s of lan interfaces carved
// from a DHCPv6-PD delegation). nil delegated turns the guard off. Safe
// to call at any time; packets in flight see the old or the new set.
func (r *Netstack) SetUnassigned6(delegated, assigned []netip.Prefix) {
	if len(delegated) == 0 {
		r.pins.unassigned.Store(nil)
		return
	}
	u := &unassigned6{}
	for _, p := range delegated {
		if p.Addr().Is6() {
			u.delegated = append(u.delegated, p.Masked())
		}
	}
	for _, p := range assigned {
		if p.Addr().Is6() {
			u.assigned = append(u.assigned, p.Masked())
		}
	}
	r.pins.unassigned.Store(u)
}

// refuses reports whether dst is in a delegated prefix but in no
// assigned one.
func (u *unassigned6) refuses(dst netip.Addr) bool {
	in := false
	for _, p := range u.delegated {
		if p.Contains(dst) {
			in = true
			break
		}
	}
	if !in {
		return false
	}
	for _, p := range u.assigned {
		if p.Contains(dst) {
			return false
		}
	}
	return true
}

// unassignedGuard is the part of forwardPins the guard keeps.
type unassignedGuard struct {
	unassigned atomic.Pointer[unassigned6]
}

// refuseUnassigned reports whether pkt, an IPv6 packet to be forwarded,
// goes to an unassigned part of a delegation; if so it counts the drop
// and sends Destination Unreachable.
func (p *forwardPins) refuseUnassigned(pkt *stack.PacketBuffer) bool {
	u := p.unassigned.Load()
	if u == nil {
		return false
	}
	nh := pkt.NetworkHeader().Slice()
	if len(nh) < header.IPv6MinimumSize {
		return false
	}
	h := header.IPv6(nh)
	dst := netip.AddrFrom16(h.DestinationAddress().As16())
	if !u.refuses(dst) {
		return false
	}
	in := p.endpoint(pkt.NICID)
	if in == nil {
		return true
	}
	in.stats.drop(dropUnassignedDelegated)
	src := h.SourceAddress()
	if src.Unspecified() || header.IsV6MulticastAddress(src) || header.IsV6LoopbackAddress(src) {
		return true
	}
	if proto, _, ok := ipv6Transport(nh); ok && proto == uint8(header.ICMPv6ProtocolNumber) {
		if t, ok := pkt.Data().PullUp(1); ok && isICMPv6Error(header.ICMPv6Type(t[0])) {
			return true // RFC 4443 section 2.4 (e.1): no error about an error
		}
	}
	quote := stack.PayloadSince(pkt.NetworkHeader())
	defer quote.Release()
	in.sendICMPv6Error(src, header.ICMPv6DstUnreachable, header.ICMPv6NetworkUnreachable, 0, quote.AsSlice())
	return true
}
