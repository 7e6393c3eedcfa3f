package natengine

import "github.com/gvrouter/gvrouter/firewall"

// Zones and rules (Rules.Zones, package firewall).
//
// With zones the engine decides every new flow once, where it knows both
// ends: a forwarded flow when it is confirmed (Postrouting knows the
// interface it leaves by), the router's own flow when it opens one, and a
// packet to the router's own address that would open a flow (the router
// does not track those inbound) when it arrives. Packets of existing
// flows, replies and related ICMP errors never reach the rules, so the
// fast path stays one table lookup. Rules see the flow after DNAT: a port
// forward's flow has the inside host as its destination. A new flow
// from a wan interface that the zones refuse whatever interface it
// would leave by is refused before it is inserted (decideEverywhere), so
// a flood of refused flows takes no table slot.
//
// What stays fixed whatever the zones say: IPv4 from a wan interface to
// an address that is not the router's is dropped (DropUnsolicited:
// inside hosts are reached over IPv4 only through redirects and NAT
// mappings), the RFC 3704 spoofing check, the DHCP client's answers and
// the ICMP and ICMPv6 messages that are not queries (errors, neighbour
// discovery; RFC 4890). Broadcast and multicast to the router (IPv4's
// limited and directed broadcasts and multicast, IPv6's groups) pass the
// input chain of their interface's zone and open no flow; a refused one
// gets no answer (RFC 1122 section 3.2.2). The router's DHCP servers and
// clients and its RA/ND services take theirs from raw-frame taps, before
// the engine.
//
// A flow a redirect (port forward) opened from the redirect's own
// interface, or a NAT mapping from a wan interface, is accepted when no
// rule matches it (fw4 "Accept port redirections"); a hairpinned one is
// a forward from its own zone.
//
// A reload re-checks every confirmed flow against the new rules and
// removes those they no longer allow (SetRules, FlushedFirewall): a rule
// that blocks a host takes effect on its open connections too, as
// fw4's "conntrack flush" on reload would, while flows the rules still
// allow keep running.

// Firewall returns the zone ruleset in force (Rules.Zones), or nil, for
// its counters.
func (e *Engine) Firewall() *firewall.Ruleset { return e.rules.Load().fw }

// decide evaluates the new flow t (after DNAT) from in to out (NoIface:
// the router), whose packet is b, and returns Accept, or Drop or Reject
// counted.
func (e *Engine) decide(b []byte, p *Parsed, t *Tuple, in, out Iface, redirected bool, s *snapshot) Verdict {
	f := flowOf(t, p.ICMPType, p.ICMPCode, in, out, redirected)
	now := e.now()
	d := s.fw.Eval(&f, now)
	if d.Capture {
		e.logPacket(b, in, out)
	}
	if d.Target == firewall.Reject && toGroup(t, s.iface(in)) {
		// No answer to a packet sent to a group or a broadcast (RFC
		// 1122 section 3.2.2, RFC 4443 section 2.4 (e)): dropped.
		d.Target = firewall.Drop
	}
	return e.verdict(d.Target, s, now)
}

// toGroup reports whether t is addressed to a broadcast or multicast
// address of interface ic's link.
func toGroup(t *Tuple, ic *ifaceSnap) bool {
	if t.V6 {
		return t.Dst[0] == 0xff
	}
	return linkWide(&t.Dst, ic)
}

// LogSink receives the packets whose decision a rule that logs to the
// capture made (firewall.Rule.LogCapture), within the rule's log rate:
// pkt starts at the IP header, in is the interface it arrived on, out
// the one it would leave by (NoIface: the router itself). It runs on the
// data path: it must not block, keep pkt or modify it (copy what it
// keeps), nor call back into the engine.
type LogSink func(pkt []byte, in, out Iface)

// SetLogSink makes f the engine's LogSink; nil removes it. Without one,
// logged packets are counted only.
func (e *Engine) SetLogSink(f LogSink) {
	if f == nil {
		e.logSink.Store(nil)
		return
	}
	e.logSink.Store(&f)
}

func (e *Engine) logPacket(b []byte, in, out Iface) {
	if f := e.logSink.Load(); f != nil {
		(*f)(b, in, out)
	}
}

func (e *Engine) verdict(t firewall.Target, s *snapshot, now int64) Verdict {
	switch t {
	case firewall.Accept:
		return Accept
	case firewall.Reject:
		e.stats.Drops[DropFirewall].Add(1)
		if s.fw.RejectAllowed(now) {
			e.stats.FirewallRejects.Add(1)
			return Reject
		}
		return Drop
	}
	return e.drop(DropFirewall)
}

func flowOf(t *Tuple, icmpType, icmpCode uint8, in, out Iface, redirected bool) firewall.Flow {
	f := firewall.Flow{Src: t.Src, Dst: t.Dst, SrcPort: t.SrcPort, DstPort: t.DstPort, Proto: t.Proto, V6: t.V6,
		In: int32(in), Out: int32(out), DNAT: redirected}
	if t.Proto == ProtoICMP || t.Proto == ProtoICMPv6 {
		f.SrcPort, f.DstPort = 0, 0 // the query identifier is no port
		f.ICMPType, f.ICMPCode = icmpType, icmpCode
	}
	return f
}

// toRouter handles a packet to the router's own address that no flow
// covers: with zones, one that would open a flow (CTNew, or an echo
// request) passes the input chain of its interface's zone first.
func (e *Engine) toRouter(b []byte, p *Parsed, t *Tuple, in Iface, s *snapshot) (Verdict, *conn, CTState) {
	st := localState(p)
	if s.fw != nil && (st == CTNew || p.Kind == KindICMPQuery) {
		if v := e.decide(b, p, t, in, NoIface, false, s); v != Accept {
			return v, nil, ctRefusedInput
		}
	}
	return e.untracked(), nil, st
}

// decideEverywhere decides the new flow c from the wan interface in
// before it takes a table slot, when the zones refuse it whatever
// interface it would leave by; otherwise it returns Accept and the flow
// is decided at confirmation as usual. Deciding only at confirmation
// would let a flood of refused flows that never reach Postrouting (an
// IPv6 SYN to an address in a LAN prefix where no host answers
// neighbour discovery dies unresolved in netstack) hold their slots
// until they time out, early-dropping the LAN's own pending flows. Each
// interface is tried with Recheck, which counts nothing; a refusal is
// then decided and counted once with Eval as if it left by the first
// interface (the zone policies and wan-side rules that refuse such
// floods do not depend on it). Only flows from wan interfaces are
// tried, so a LAN's new flows pay nothing more.
func (e *Engine) decideEverywhere(b []byte, c *conn, in Iface, s *snapshot) Verdict {
	f := flowOf(&c.mid, c.icmpType, c.icmpCode, in, NoIface, c.redirected)
	first := NoIface
	for id := range s.ifaces {
		if !s.ifaces[id].ok {
			continue
		}
		f.Out = int32(id)
		if s.fw.Recheck(&f).Target == firewall.Accept {
			return Accept
		}
		if first == NoIface {
			first = Iface(id)
		}
	}
	if first == NoIface {
		return Accept
	}
	f.Out = int32(first)
	now := e.now()
	// Eval may still accept where Recheck refused: a refusing rule over
	// its rate limit lets the flow on to the next; it is then decided
	// (and counted) again at confirmation.
	d := s.fw.Eval(&f, now)
	if d.Capture {
		e.logPacket(b, in, Iface(first))
	}
	return e.verdict(d.Target, s, now)
}

// decideFlow evaluates the unconfirmed flow c, leaving by out, whose
// packet is b.
func (e *Engine) decideFlow(b []byte, c *conn, out Iface, s *snapshot) Verdict {
	in := Iface(c.in[dirOrig].Load())
	f := flowOf(&c.mid, c.icmpType, c.icmpCode, in, out, c.redirected)
	now := e.now()
	d := s.fw.Eval(&f, now)
	if d.Capture {
		e.logPacket(b, in, out)
	}
	return e.verdict(d.Target, s, now)
}

// recheck removes the confirmed flows that s's zones no longer allow.
func (e *Engine) recheck(s *snapshot) {
	e.tab.each(func(c *conn) {
		if !c.confirmed.Load() {
			return // decided when it is confirmed, under s
		}
		f := flowOf(&c.mid, c.icmpType, c.icmpCode, Iface(c.in[dirOrig].Load()), c.out, c.redirected)
		if s.fw.Recheck(&f).Target != firewall.Accept && e.kill(c) {
			e.stats.FlushedFirewall.Add(1)
		}
	})
}
