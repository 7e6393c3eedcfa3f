package natengine

// Postrouting runs on every packet leaving on interface out, after
// routing: it confirms new flows, choosing their SNAT (masquerade, SNAT pool,
// hairpin), applies SNAT and clamps the MSS of TCP SYNs to out's MTU.
// pkt starts at the IP header; it is rewritten in place and not retained.
func (e *Engine) Postrouting(pkt []byte, out Iface) Verdict {
	return e.postrouting(pkt, out, false)
}

// PostroutingLocal is Postrouting for a packet the router itself
// originated (netstack's own sockets). It also tracks the router's own
// outbound flows, as Linux's OUTPUT conntrack does, so that their replies
// find a flow (CTEstablished) and pass the WAN input policy.
func (e *Engine) PostroutingLocal(pkt []byte, out Iface) Verdict {
	return e.postrouting(pkt, out, true)
}

func (e *Engine) postrouting(pkt []byte, out Iface, local bool) Verdict {
	var p Parsed
	if !parse(pkt, &p, true) {
		return e.drop(DropMalformed)
	}
	b := pkt[:p.Len]
	s := e.rules.Load()
	switch p.Kind {
	case KindFragment:
		if !e.postFragment(b, &p) && s.leaks(b, &p, out) {
			return e.drop(DropUntranslatable)
		}
		return Accept
	case KindTCP, KindUDP, KindICMPQuery:
	case KindOther:
		if t := p.tuple(b); !s.untrackedProto(&t) {
			break // a generic flow
		}
		fallthrough
	default:
		if s.leaks(b, &p, out) {
			return e.drop(DropUntranslatable)
		}
		return Accept
	}
	t := p.tuple(b)
	r, ok := e.tab.lookup(&t)
	if local {
		var v Verdict
		ic := s.iface(out)
		if r, ok, v = e.output(b, &p, t, r, ok, ic != nil && ic.wan); v != Accept {
			return v
		}
	}
	if !ok || !(r.dir == dirMid || (r.dir == dirOrig && !r.c.dnat)) || r.c.dead.Load() {
		if s.leaks(b, &p, out) {
			return e.drop(DropUntranslatable)
		}
	} else {
		c := r.c
		if !c.confirmed.Load() {
			if s.fw != nil {
				if v := e.decideFlow(b, c, out, s); v != Accept {
					e.kill(c)
					return v
				}
			}
			if reason, ok := e.confirm(c, out, s, p.Kind == KindOther); !ok {
				e.kill(c)
				return e.drop(reason)
			}
		}
		if c.snat {
			to := c.reply.Invert()
			rewrite(b, &p, &to, true, false)
			if p.Frag {
				e.fragPost(&t, &p, c)
			}
		}
	}
	if ic := s.iface(out); ic != nil && !ic.noClamp {
		hdr := 40
		if p.V6 {
			hdr = 60
		}
		if clampMSS(b, &p, ic.mtu-hdr) {
			e.stats.MSSClamped.Add(1)
		}
	}
	return Accept
}

// leaks reports whether b, which no flow translates, would leave a NAT
// interface with an IPv4 source that is not the router's: such packets are
// dropped rather than sent with a private source address.
func (s *snapshot) leaks(b []byte, p *Parsed, out Iface) bool {
	if p.V6 {
		return false
	}
	oc := s.iface(out)
	if oc == nil || len(oc.snat) == 0 {
		return false
	}
	t := p.tuple(b)
	return !s.isLocal(&t.Src, false)
}

// confirm picks c's SNAT and inserts its reply key.
// generic says c is a generic flow (generic.go), which gets address-only
// NAT.
func (e *Engine) confirm(c *conn, out Iface, s *snapshot, generic bool) (DropReason, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.confirmed.Load() {
		return 0, true
	}
	reply := c.mid.Invert()
	var pool [][16]byte
	mapOut := out
	if !c.orig.V6 && !s.isLocal(&c.orig.Src, false) {
		oc := s.iface(out)
		switch {
		case oc != nil && len(oc.snat) > 0:
			pool = oc.snat
		case c.dnat && s.hairpin && (oc == nil || !oc.wan) && !s.isWAN(Iface(c.in[dirOrig].Load())) &&
			s.isLocal(&c.orig.Dst, false):
			// Hairpin: the internal source appears as its mapped external
			// endpoint (RFC 4787 REQ-9a, RFC 5382 REQ-8).
			pool = [][16]byte{c.orig.Dst}
			mapOut = s.ifaceOf(&c.orig.Dst)
			c.hairpin = true
		}
	}
	if generic && pool != nil {
		return e.confirmGeneric(c, pool)
	}
	var m *mapping
	if pool != nil {
		var ok bool
		var why DropReason
		m, why, ok = e.nat.acquire(s, c, c.orig.Proto, c.orig.Src, c.orig.SrcPort, mapOut, pool, e.rnd(), e.now())
		if !ok {
			return why, false
		}
		reply.Dst, reply.DstPort = m.ek.addr, m.ek.port
		if c.orig.Proto == ProtoICMP {
			reply.SrcPort = m.ek.port
		}
	}
	c.reply = reply
	c.snat = m != nil
	c.out = out
	if !e.tab.insertReply(c, m) {
		if m != nil {
			e.nat.release(m, c, true)
		}
		return DropClash, false
	}
	return 0, true
}
