package natengine

// ICMP error translation (RFC 5508 section 4.2, RFC 5382 REQ-9/10,
// RFC 4787 REQ-12).
//
// An ICMP error travels opposite to the packet it embeds. Inverting the
// embedded packet's tuple gives the key of the direction the error travels
// in: an error from outside about a translated outbound packet finds the
// flow's reply key, an error from inside about a translated inbound packet
// finds its original key. The engine then rewrites the outer header as a
// packet of that direction, restores the embedded header (addresses, ports
// or query identifier, their checksums as far as they are present), and
// recomputes the ICMP checksum. Errors never refresh, change or delete the
// flow (RFC 5508 REQ-6, RFC 5382 REQ-10, RFC 4787 REQ-12).

// icmpChecksumOK verifies the ICMP/ICMPv6 checksum of the error in b.
func icmpChecksumOK(b []byte, p *Parsed) bool {
	icmp := b[p.L4Off:]
	if p.V6 {
		return Sum(icmp, pseudoSum(b[8:24], b[24:40], ProtoICMPv6, len(icmp))) == 0xffff
	}
	return Sum(icmp, 0) == 0xffff
}

func (e *Engine) icmpError(b []byte, p *Parsed, in Iface, s *snapshot) (Verdict, CTState) {
	if !icmpChecksumOK(b, p) {
		return e.drop(DropICMPChecksum), CTUntracked // RFC 5508 REQ-3
	}
	t := p.tuple(b)
	local := s.isLocal(&t.Dst, t.V6) || (t.V6 && (t.DstAddr().IsLinkLocalUnicast() || t.DstAddr().IsMulticast()))
	inner := b[p.Inner:]
	var ip Parsed
	if !parse(inner, &ip, false) || ip.V6 != p.V6 || ip.Kind == KindFragment {
		if local {
			return e.untracked(), CTUntracked
		}
		return e.drop(DropICMPBad), CTUntracked
	}
	var c *conn
	var dir int
	if ip.Kind == KindTCP || ip.Kind == KindUDP || ip.Kind == KindICMPQuery || ip.Kind == KindOther {
		k := ip.tuple(inner).Invert()
		if r, ok := e.tab.lookup(&k); ok && r.dir != dirMid && !r.c.dead.Load() {
			c, dir = r.c, int(r.dir)
		}
	}
	switch {
	case c == nil && (local || p.V6):
		// Errors for the router's own sockets go to the local stack;
		// forwarded ICMPv6 errors must not be dropped (RFC 4890 4.3.1).
		return e.untracked(), CTUntracked
	case c == nil:
		return e.drop(DropICMPNoConn), CTUntracked // RFC 5508 REQ-4/5
	case !c.snat && !c.dnat:
		return Accept, CTRelated // related, nothing to translate
	}
	translateError(b, p, inner, &ip, c, dir)
	e.stats.ICMPTranslated.Add(1)
	return Accept, CTRelated
}

// translateError rewrites the ICMP error b (going in direction dir of c)
// and its embedded packet inner.
func translateError(b []byte, p *Parsed, inner []byte, ip *Parsed, c *conn, dir int) {
	td, other := &c.orig, &c.reply
	if dir == dirReply {
		td, other = &c.reply, &c.orig
	}
	// The embedded packet went the other way: restore it to that
	// direction's untranslated tuple.
	rewrite(inner, ip, other, true, true)

	// The outer header travels like a packet of direction dir.
	var to Tuple
	so, do := p.srcOff(), p.dstOff()
	al := addrLen(p.V6)
	copy(to.Src[:al], b[so:so+al])
	copy(to.Dst[:al], b[do:do+al])
	switch {
	case to.Src == td.Src:
		to.Src = other.Dst // the endpoint itself reported the error
	case dir == dirOrig && c.snat:
		to.Src = c.reply.Dst // an inside router: do not leak its address
	}
	if to.Dst == td.Dst {
		to.Dst = other.Src
	}
	rewrite(b, p, &to, true, true)

	icmp := b[p.L4Off:]
	put16(icmp[icmpChecksumAt:], 0)
	put16(icmp[icmpChecksumAt:], ^Sum(icmp, 0))
}

// icmpOther handles ICMP messages that are neither queries nor errors:
// ND, MLD, router discovery, renumbering, node information.
func (e *Engine) icmpOther(b []byte, p *Parsed, in Iface, s *snapshot) Verdict {
	t := p.tuple(b)
	if s.isLocal(&t.Dst, t.V6) || (t.V6 && (t.DstAddr().IsLinkLocalUnicast() || t.DstAddr().IsMulticast())) {
		return e.untracked()
	}
	if ic := s.iface(in); ic != nil && ic.wan {
		if p.V6 {
			return e.drop(DropICMPv6Policy) // RFC 4890 4.3.4/4.3.5: not needed across the router
		}
		return e.drop(DropUnsolicited)
	}
	return e.untracked()
}
