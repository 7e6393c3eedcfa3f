package natengine

import "net/netip"

// InsideHost returns the inside address of the flow an IP packet (from its
// IP header on) belongs to: the LAN host before SNAT or after DNAT, the
// address whose share a per-host scheduler (sqm's dual-srchost/dsthost)
// charges. egress says which way the packet travels: true for a packet
// leaving the outside interface, already NATed (its source is the WAN
// address), false for one arriving there, not yet translated (its
// destination is the WAN address). ok is false when no confirmed flow
// matches (untracked, a fragment, an ICMP error); the caller then keys by
// the address the packet shows. It does not allocate.
func (e *Engine) InsideHost(pkt []byte, egress bool) (netip.Addr, bool) {
	var p Parsed
	if !parse(pkt, &p, true) || p.Kind == KindFragment || p.Kind == KindICMPError || p.Kind == KindICMPOther {
		return netip.Addr{}, false
	}
	k := p.tuple(pkt)
	if egress {
		// A leaving packet shows its direction's key after NAT, which
		// is the inverse of the other direction's key.
		k = k.Invert()
	}
	r, ok := e.tab.lookup(&k)
	if !ok || !r.c.confirmed.Load() {
		return netip.Addr{}, false
	}
	// The key matched is the outside end's direction (arriving) or its
	// inverse (leaving); the inside host is the source of the other
	// direction: the LAN host of a masqueraded flow (orig), the
	// forwarded-to server of a port forward (reply).
	if r.dir == dirReply {
		return r.c.orig.SrcAddr(), true
	}
	return r.c.reply.SrcAddr(), true
}
