package natengine

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Verdict is what the caller does with a packet after a hook.
type Verdict uint8

// Verdicts.
const (
	// Accept: continue with the packet, which the engine may have rewritten
	// in place.
	Accept Verdict = iota
	// Drop: discard the packet; the engine counted the reason.
	Drop
	// Stolen: the engine kept a copy of the packet (an out-of-order fragment
	// waiting for its first fragment); the caller discards its buffer. The
	// fragment comes back, translated, from DrainHeld.
	Stolen
	// Reject: discard the packet, which a firewall reject rule or policy
	// refused (counted), and answer it: a TCP RST for TCP, an ICMP port
	// unreachable (ICMPv6 for IPv6) for the rest. The engine already
	// applied the reject rate limit; a caller that cannot answer treats
	// it as Drop.
	Reject
)

// String returns the verdict's name.
func (v Verdict) String() string {
	switch v {
	case Accept:
		return "accept"
	case Drop:
		return "drop"
	case Stolen:
		return "stolen"
	case Reject:
		return "reject"
	}
	return "unknown"
}

// udpStreamAfter is how long a replied UDP flow must live before it is
// assured, so that one-shot DNS-style exchanges stay early-droppable
// (Linux commit d535c8a69c19, 2 s).
const udpStreamAfter = int64(2 * time.Second)

// Engine is the conntrack, NAT and fast-path engine. It is safe for
// concurrent use; the data-path methods never allocate on the fast path and
// never return errors (drops are counted in Stats).
//
// Buffer ownership: every method that takes a packet borrows it for the
// duration of the call and may rewrite it in place; it keeps no reference
// after returning (a Stolen fragment is copied first).
type Engine struct {
	timeNow func() time.Time
	epoch   time.Time
	rnd     func() uint32
	to      timeouts

	tab   *table
	nat   *natTable
	frags fragCache
	rules atomic.Pointer[snapshot]
	// logSink receives the packets of rules that log to the capture
	// (SetLogSink, firewall.go); nil: none.
	logSink atomic.Pointer[LogSink]
	gen     atomic.Uint64 // fast-path generation: bumped on route/neighbour changes
	stats   Stats
	// spare is a conn a refused new flow left unused (preNew), taken by
	// the next new flow instead of a new allocation.
	spare atomic.Pointer[conn]
}

type timeouts struct {
	tcpEst, tcpTrans, udpUnrep, udpStream, icmp, other int64
}

// New returns an engine with no rules (no interfaces known: nothing is
// translated until SetRules).
func New(cfg Config) *Engine {
	def := DefaultTimeouts()
	t := cfg.Timeouts
	pick := func(v, d time.Duration) int64 {
		if v <= 0 {
			v = d
		}
		return int64(v)
	}
	e := &Engine{
		timeNow: cfg.TimeNow,
		rnd:     cfg.Rand,
		to: timeouts{
			tcpEst:    pick(t.TCPEstablished, def.TCPEstablished),
			tcpTrans:  pick(t.TCPTransitory, def.TCPTransitory),
			udpUnrep:  pick(t.UDPUnreplied, def.UDPUnreplied),
			udpStream: pick(t.UDPStream, def.UDPStream),
			icmp:      pick(t.ICMPQuery, def.ICMPQuery),
			other:     pick(t.Other, def.Other),
		},
	}
	if e.timeNow == nil {
		e.timeNow = time.Now
	}
	if e.rnd == nil {
		e.rnd = rand.Uint32
	}
	e.epoch = e.timeNow()
	limit := cfg.MaxConns
	if limit <= 0 {
		limit = DefaultMaxConns
	}
	e.tab = newTable(limit, rand.Uint64())
	e.tab.fwdMax = int32(limit - min(max(cfg.RouterReserve, 0), limit/2))
	if cfg.MaxConnsPerHost > 0 {
		e.tab.hosts.max = int32(min(cfg.MaxConnsPerHost, limit))
		e.tab.hosts.n = make(map[hostKey]int32)
	}
	e.nat = newNATTable(limit)
	if cfg.MaxPortsPerHost > 0 {
		e.nat.maxHostPorts = int32(min(cfg.MaxPortsPerHost, 1<<30))
		e.nat.hostPorts = make(map[[16]byte]int32)
	}
	e.frags.init()
	e.rules.Store(&snapshot{})
	return e
}

// SetRules compiles r and swaps it in atomically. Flows keep running; SNAT
// flows whose external address is no longer configured (a masquerade
// interface's address changed) are removed, like Linux MASQUERADE does.
func (e *Engine) SetRules(r Rules) error {
	s, err := compile(&r)
	if err != nil {
		return err
	}
	if old := e.rules.Load(); old != nil && s.fw != nil {
		s.fw.Inherit(old.fw) // a re-apply keeps the unchanged rules' counters
	}
	e.rules.Store(s)
	e.gen.Add(1)
	if s.fw != nil {
		e.recheck(s)
	}
	e.tab.each(func(c *conn) {
		if !c.confirmed.Load() || !c.snat {
			return
		}
		if !s.isLocal(&c.reply.Dst, false) && !s.isSNATAddr(&c.reply.Dst) && e.kill(c) {
			e.stats.FlushedAddressGone.Add(1)
		}
	})
	return nil
}

// Stats returns the engine's counters.
func (e *Engine) Stats() *Stats { return &e.stats }

// Len returns the number of tracked flows.
func (e *Engine) Len() int { return int(e.tab.count.Load()) }

func (e *Engine) now() int64 { return int64(e.timeNow().Sub(e.epoch)) }

func (e *Engine) drop(r DropReason) Verdict {
	e.stats.Drops[r].Add(1)
	return Drop
}

func (e *Engine) untracked() Verdict {
	e.stats.Untracked.Add(1)
	return Accept
}

// kill removes c from the table and releases its mappings.
func (e *Engine) kill(c *conn) bool {
	if !e.tab.remove(c, false) {
		return false
	}
	e.unlink(c)
	return true
}

func (e *Engine) unlink(c *conn) {
	if c.inMap != nil {
		e.nat.release(c.inMap, c, false)
	}
	// snatMap is only written under the owner shard lock while c is in the
	// table, so after removal it is stable (c.snat may still be written by
	// a confirm that lost the race and will fail).
	if c.snatMap != nil {
		e.nat.release(c.snatMap, c, true)
	}
}

// timeoutLocked returns c's idle timeout in its current state. c.mu is held.
func (e *Engine) timeoutLocked(c *conn) int64 {
	switch c.proto() {
	case ProtoTCP:
		if c.tcp.state == TCPEstablished {
			return e.to.tcpEst
		}
		return e.to.tcpTrans
	case ProtoUDP:
		if c.replied {
			return e.to.udpStream
		}
		return e.to.udpUnrep
	case ProtoICMP, ProtoICMPv6:
		return e.to.icmp
	}
	return e.to.other
}

// Prerouting runs on every packet arriving on interface in, before routing:
// it finds or creates the packet's flow, applies DNAT (port forwards,
// inbound mapping hits) and reverses NAT on replies and related ICMP errors.
// pkt starts at the IP header; it is rewritten in place and not retained.
func (e *Engine) Prerouting(pkt []byte, in Iface) Verdict {
	v, _ := e.prerouting(pkt, in, false)
	return v
}

// PreroutingOverloaded is Prerouting for a packet that arrived while its
// port's receive ring was falling behind: a packet that would open a new
// flow is dropped (DropOverload) instead of tracked, so that under a
// flood of new flows (SYNs from random ports) the router spends its CPU
// on the flows it already carries, which Prerouting still handles as
// usual. Opening a flow (early drop, NAT port, table insert, and
// forwarding the packet) costs many times what dropping it does; the
// ring falls behind when that work, with everything else, exceeds the
// CPU, and then it drops frames of every flow alike.
func (e *Engine) PreroutingOverloaded(pkt []byte, in Iface) Verdict {
	v, _ := e.prerouting(pkt, in, true)
	return v
}

// PreroutingCT is Prerouting (PreroutingOverloaded if overloaded) that
// also reports the conntrack state of an accepted packet, for the
// router's input policy (nftables "ct state"); the state is meaningless
// unless the verdict is Accept. input says that a Drop or Reject came
// from the zones' input chain (Rules.Zones: a new flow to the router
// refused), so the caller counts it as its input firewall's drop, not
// as one of the engine's other refusals (which Stats tells apart).
func (e *Engine) PreroutingCT(pkt []byte, in Iface, overloaded bool) (v Verdict, st CTState, input bool) {
	v, st = e.prerouting(pkt, in, overloaded)
	if st == ctRefusedInput {
		return v, CTUntracked, true
	}
	return v, st, false
}

// CTState is the conntrack state of a packet Prerouting accepted.
type CTState uint8

// Conntrack states.
const (
	// CTUntracked: no flow and none opened: ICMP and IGMP messages the
	// router handles itself (echo, errors it cannot relate, neighbour
	// discovery, MLD), TCP segments that cannot open a connection (the
	// router answers them with a reset), a DHCP server's answers from a
	// wan interface to the router's client ports (dhcpClient), fragments
	// without a tracked first fragment.
	CTUntracked CTState = iota
	// CTNew: the packet opens a flow. Packets addressed to the router
	// itself are not tracked inbound, so CTNew there means "would open
	// one": a TCP SYN, a UDP datagram, any packet of a protocol other
	// than TCP, UDP, ICMP and IGMP.
	CTNew
	// CTEstablished: the packet belongs to a tracked flow, in either
	// direction (the router's own outbound flows included), or is a
	// later fragment of such a packet.
	CTEstablished
	// CTRelated: an ICMP error about a tracked flow.
	CTRelated

	// ctRefusedInput is prerouting's state for a packet the zones' input
	// chain refused (toRouter); PreroutingCT reports it as input.
	ctRefusedInput CTState = 0xff
)

func (e *Engine) prerouting(pkt []byte, in Iface, overloaded bool) (Verdict, CTState) {
	var p Parsed
	if !parse(pkt, &p, true) {
		return e.drop(DropMalformed), CTUntracked
	}
	b := pkt[:p.Len]
	s := e.rules.Load()
	if s.spoofed(b, p.V6, in) {
		return e.drop(DropSpoofed), CTUntracked
	}
	now := e.now()
	switch p.Kind {
	case KindFragment:
		return e.preFragment(b, &p, in, now)
	case KindICMPError:
		return e.icmpError(b, &p, in, s)
	case KindTCP, KindUDP, KindICMPQuery:
	case KindICMPOther:
		return e.icmpOther(b, &p, in, s), CTUntracked
	default:
		if t := p.tuple(b); s.untrackedProto(&t) {
			if p.Frag {
				e.fragFirst(b, &p, nil, 0, now)
			}
			return e.untracked(), CTUntracked
		}
		// Any other protocol: a generic flow (generic.go).
	}
	t := p.tuple(b)
	var v Verdict
	var c *conn
	var dir int
	st := CTEstablished
	if r, ok := e.tab.lookup(&t); ok && r.dir != dirMid && now < r.c.expires.Load() {
		c, dir = r.c, int(r.dir)
		v = e.preKnown(b, &p, c, dir, in, now)
	} else {
		if ok && r.dir != dirMid {
			if e.kill(r.c) {
				e.stats.Expired.Add(1)
			}
		}
		if overloaded {
			if _, ok := e.insideToRouter(&p, &t, in, s); ok {
				v, _, st := e.toRouter(b, &p, &t, in, s)
				return v, st
			}
			return e.drop(DropOverload), CTUntracked
		}
		v, c, st = e.preNew(b, &p, t, in, s, now)
	}
	if p.Frag && v == Accept {
		e.fragFirst(b, &p, c, dir, now)
	}
	return v, st
}

// preKnown handles a packet of an existing flow.
func (e *Engine) preKnown(b []byte, p *Parsed, c *conn, dir int, in Iface, now int64) Verdict {
	if p.Kind == KindICMPQuery && icmpIsRequest(p.ICMPType, p.V6) != (dir == dirOrig) {
		return e.drop(DropICMPBad)
	}
	c.mu.Lock()
	est := false
	if p.Kind == KindTCP {
		est = c.tcp.update(dir, p.TCPFlags)
		if p.TCPFlags&(tcpFIN|tcpRST) != 0 {
			c.fp[0].Store(nil) // teardown leaves the fast path (nf_flowtable)
			c.fp[1].Store(nil)
		}
	}
	if dir == dirReply {
		c.replied = true
	}
	assure := false
	switch p.Kind {
	case KindTCP:
		assure = est || (c.replied && c.tcp.state == TCPEstablished)
	case KindUDP:
		assure = c.replied && now-c.created >= udpStreamAfter
	case KindOther:
		assure = c.replied // a generic flow that saw both directions (GRE, ESP, a tunnel)
	}
	to := e.timeoutLocked(c)
	c.mu.Unlock()
	if assure {
		e.tab.setAssured(c)
	}
	// Outbound packets refresh the mapping (RFC 4787 REQ-6); inbound ones
	// too (allowed by REQ-6, Linux does).
	c.expires.Store(now + to)
	c.in[dir].Store(int32(in))
	c.pkts[dir].Add(1)
	c.bytes[dir].Add(uint64(p.Len))
	preTranslate(b, p, c, dir)
	return Accept
}

// preTranslate applies the prerouting part of c's NAT to a packet going in
// direction dir: DNAT on original packets, full reversal on replies.
func preTranslate(b []byte, p *Parsed, c *conn, dir int) {
	switch {
	case dir == dirOrig && c.dnat:
		rewrite(b, p, &c.mid, false, true)
	case dir == dirReply && (c.snat || c.dnat):
		inv := c.orig.Invert()
		rewrite(b, p, &inv, true, true)
	}
}

// preNew decides whether a packet may open a flow and creates it. st is
// the packet's conntrack state when it is accepted.
func (e *Engine) preNew(b []byte, p *Parsed, t Tuple, in Iface, s *snapshot, now int64) (Verdict, *conn, CTState) {
	c := e.spare.Swap(nil)
	if c == nil {
		c = new(conn)
	}
	*c = conn{orig: t, mid: t, created: now, icmpType: p.ICMPType, icmpCode: p.ICMPCode}
	v, kept, st := e.decideNew(b, p, t, in, s, now, c)
	if kept == nil {
		// Never published (not in the table, no mapping holds it): the
		// next new flow reuses it, so a flood of refusals allocates
		// nothing.
		e.spare.Store(c)
	}
	return v, kept, st
}

// decideNew is preNew with the flow's conn c, fresh: it returns c when
// the flow took a table slot, nil when it did not.
func (e *Engine) decideNew(b []byte, p *Parsed, t Tuple, in Iface, s *snapshot, now int64, c *conn) (Verdict, *conn, CTState) {
	ic := s.iface(in)
	wan := ic != nil && ic.wan
	local := s.isLocal(&t.Dst, t.V6) || (t.V6 && (t.DstAddr().IsLinkLocalUnicast() || t.DstAddr().IsMulticast()))
	switch {
	case p.Kind == KindICMPQuery && !icmpIsRequest(p.ICMPType, p.V6):
		if local {
			return e.untracked(), nil, CTUntracked // a reply to the router's own query
		}
		return e.drop(DropICMPBad), nil, 0
	case p.Kind == KindTCP && !c.tcp.open(p.TCPFlags):
		if local {
			return e.untracked(), nil, CTUntracked
		}
		return e.drop(DropInvalidTCP), nil, 0
	}
	switch {
	case t.V6 && local:
		if wan && dhcpClient(p, &t) {
			return e.untracked(), nil, CTUntracked
		}
		return e.toRouter(b, p, &t, in, s)
	case !t.V6 && linkWide(&t.Dst, ic):
		// IPv4 broadcast and multicast reach the router as a member of
		// the link, never a forward: its zone's input chain (fw4's
		// input), and no flow. The router's DHCP server and client take
		// theirs from raw-frame taps, before the engine.
		if wan && dhcpClient(p, &t) {
			return e.untracked(), nil, CTUntracked
		}
		return e.toRouter(b, p, &t, in, s)
	case t.V6 && wan:
		// IPv6 is not translated: a stateful firewall. New inbound flows
		// need an allow rule; echo requests pass (RFC 4890 4.3.1). With
		// zones, the rules decide at confirmation.
		if s.fw == nil && !s.allowed6(&t) && !(p.Kind == KindICMPQuery && p.ICMPType == 128) {
			return e.drop(DropUnsolicited), nil, 0
		}
	case !t.V6 && local:
		if p.Kind == KindICMPQuery {
			return e.toRouter(b, p, &t, in, s)
		}
		// A forward applies where it listens (a LAN one, such as the
		// host TAP's SSH forward, too) and, with hairpin, from any
		// inside interface.
		if f := s.redirect(&t, in, wan); f != nil {
			c.dnat, c.redirected = true, f.In == in
			c.mid.Dst, c.mid.DstPort = forwardTarget(f, t.DstPort)
			break
		}
		if to, at, ok := e.nat.portMappedFrom(s, &t); ok && (at == in || !wan && s.hairpin) {
			// A port mapping is a redirect made at run time: from its
			// own interface the zones accept it as they do a forward.
			c.dnat, c.redirected = true, at == in
			c.mid.Dst, _ = fromAddr(to.Addr())
			c.mid.DstPort = to.Port()
			break
		}
		if !wan && !s.hairpin {
			return e.toRouter(b, p, &t, in, s)
		}
		if p.Kind == KindOther {
			// Address-only NAT has no mappings to enter by: only the
			// flow's own replies come in (the lookup found none).
			return e.toRouter(b, p, &t, in, s)
		}
		if wan && dhcpClient(p, &t) {
			return e.untracked(), nil, CTUntracked
		}
		filtering := s.filtering
		if !wan {
			// Hairpin (RFC 4787 section 6): an inside endpoint sends
			// to a mapping's external endpoint, as P2P applications do
			// after STUN. The NAT relays it to any active mapping, from
			// the sender's own mapped endpoint (REQ-9a, in confirm).
			// The packet is the sender's outbound packet to that
			// endpoint, which its mapping then permits (remote), so
			// the filter sees the sender's mapping, not an external
			// endpoint: filtering (section 5) guards mappings against
			// the outside, and the sender could reach the peer across
			// the LAN anyway. A filter applied as if the packet came
			// from outside would drop the first packet of every
			// exchange and fail the RFC 5780 section 4.5 hairpin test.
			filtering = EndpointIndependent
		}
		m, found := e.nat.inbound(t.Proto, t.Dst, t.DstPort, t.Src, t.SrcPort, filtering)
		if m == nil {
			if found {
				return e.drop(DropFiltered), nil, 0
			}
			return e.toRouter(b, p, &t, in, s) // for the router's own sockets
		}
		c.dnat, c.mapIn, c.inMap, c.redirected = true, true, m, wan
		c.mid.Dst, c.mid.DstPort = m.ik.addr, m.ik.port
	case !t.V6 && wan:
		if t.Dst == limitedBroadcast && dhcpClient(p, &t) {
			return e.untracked(), nil, CTUntracked // a DHCP server's broadcast offer or acknowledgement
		}
		return e.drop(DropUnsolicited), nil, 0
	}
	if wan && s.fw != nil {
		if v := e.decideEverywhere(b, c, in, s); v != Accept {
			if c.inMap != nil {
				e.nat.release(c.inMap, c, false)
			}
			return v, nil, 0 // counted
		}
	}
	c.host = ic != nil && !wan // an inside host's flow (limits.go)
	if !e.insertNew(c, in, now) {
		return Drop, nil, 0 // counted
	}
	c.pkts[dirOrig].Add(1)
	c.bytes[dirOrig].Add(uint64(p.Len))
	preTranslate(b, p, c, dirOrig)
	return Accept, c, CTNew
}

// insideToRouter reports whether a packet without a flow, arriving from
// an inside interface, goes to one of the router's own sockets (its DNS
// forwarder, status page) and would stay untracked: such a packet opens
// no flow, so overload has nothing to shed and dropping it would only
// leave a LAN host's query to time out. A forward or a NAT mapping on
// the address and port would open one; those are shed as usual.
func (e *Engine) insideToRouter(p *Parsed, t *Tuple, in Iface, s *snapshot) (CTState, bool) {
	ic := s.iface(in)
	if ic == nil || ic.wan || !s.isLocal(&t.Dst, t.V6) {
		return 0, false
	}
	switch p.Kind {
	case KindTCP, KindUDP:
	default:
		return 0, false
	}
	if !t.V6 {
		if f, _ := s.forward(t.Proto, &t.Dst, t.DstPort); f != nil {
			return 0, false
		}
		if _, _, ok := e.nat.portMapped(s, t.Proto, &t.Dst, t.DstPort); ok && s.hairpin {
			return 0, false
		}
		if s.hairpin && e.nat.mapped(t.Proto, t.Dst, t.DstPort) {
			return 0, false
		}
	}
	return localState(p), true
}

// localState is the conntrack state of a packet to the router itself,
// which is not tracked inbound (CTState).
func localState(p *Parsed) CTState {
	switch p.Kind {
	case KindTCP:
		if p.TCPFlags&(tcpSYN|tcpACK) == tcpSYN {
			return CTNew
		}
		return CTUntracked
	case KindUDP, KindOther:
		return CTNew
	}
	return CTUntracked
}

// insertNew reserves a slot for the new flow c, which arrived on in, and
// publishes it under its original keys. It reports false, with the drop
// counted and c's inbound mapping released, if its inside host holds its
// limit of flows (c.host), the table (or the forwarded flows' share of it)
// is full or the tuple clashes.
func (e *Engine) insertNew(c *conn, in Iface, now int64) bool {
	if c.host && !e.tab.hosts.take(hostKey{c.orig.Src, c.orig.V6}) {
		if c.inMap != nil {
			e.nat.release(c.inMap, c, false)
		}
		e.drop(DropHostFlows)
		return false
	}
	if !e.tab.reserve(c.class, e.tab.shardOf(&c.orig), &e.stats, e.unlink) {
		if c.host {
			e.tab.hosts.release(hostKey{c.orig.Src, c.orig.V6})
		}
		if c.inMap != nil {
			e.nat.release(c.inMap, c, false)
		}
		e.drop(DropTableFull)
		return false
	}
	c.mu.Lock()
	to := e.timeoutLocked(c)
	c.mu.Unlock()
	c.expires.Store(now + to)
	c.in[dirOrig].Store(int32(in))
	if !e.tab.insertPending(c) {
		e.tab.unreserve(c)
		if c.host {
			e.tab.hosts.release(hostKey{c.orig.Src, c.orig.V6})
		}
		if c.inMap != nil {
			e.nat.release(c.inMap, c, false)
		}
		e.drop(DropClash)
		return false
	}
	e.stats.Created.Add(1)
	return true
}
