package natengine

import "encoding/binary"

// Fast path (the nf_flowtable equivalent).
//
// Once a flow is assured and a packet of one of its directions has left
// through Postrouting, the egress side calls Offload with that packet and
// the L2 addresses it used. The engine then precomputes the direction's
// rewrite: the new addresses and ports, the RFC 1624 checksum deltas (which
// are constant per flow), the egress interface, MTU and MAC addresses.
// FastPath applies it to later packets of that direction with no
// allocation and no lock but one table shard's. Packets go back to the slow
// path on TCP FIN/RST (which also ends the offload), TTL <= 1, IP options or
// extension headers, fragments, packets larger than the egress MTU, an
// ingress interface other than the one the flow uses, and after
// InvalidateFastPath (route or neighbour change) until re-offloaded.

// Ethernet framing (IEEE 802.3).
const (
	ethHdrLen     = 14
	ethTypeIPv4   = 0x0800
	ethTypeIPv6   = 0x86dd
	fastMinIPv4   = ipv4MinLen + 8
	fastMinIPv6   = ipv6Len + 8
	ttlWordOffset = ipv4TTLAt // TTL and protocol share this 16-bit word
)

// offload is one flow direction's precomputed fast-path rewrite. It is
// immutable once published.
type offload struct {
	c        *conn
	dir      uint8
	v6       bool
	proto    uint8
	in, out  Iface
	gen      uint64
	mtu      int
	timeout  int64
	eth      [12]byte // destination MAC, source MAC
	src, dst [16]byte // addresses after the rewrite
	sport    uint16   // ports after the rewrite
	dport    uint16
	ipDelta  delta // IPv4 header: address change (TTL handled per packet)
	l4Delta  delta // TCP/UDP: pseudo-header addresses and ports
}

// Offload hands the direction of pkt's flow to the fast path. pkt is a
// packet that just left through Postrouting on out (starting at the IP
// header, already translated); dst and src are the MAC addresses of the
// frame it was sent in (the resolved neighbour and out's own). It reports
// whether the direction was offloaded: only assured TCP (ESTABLISHED) and
// UDP flows are. pkt is not modified or retained.
func (e *Engine) Offload(pkt []byte, out Iface, dst, src [6]byte) bool {
	return e.OffloadAt(pkt, out, dst, src, e.gen.Load())
}

// OffloadAt is Offload for a forwarding decision (out, dst, src) taken at
// fast-path generation gen (FastPathGeneration): if the fast path was
// invalidated since, the offload is stale from the start and the flow's
// next packet takes the slow path again.
func (e *Engine) OffloadAt(pkt []byte, out Iface, dst, src [6]byte, gen uint64) bool {
	var p Parsed
	if !parse(pkt, &p, true) || p.Options || p.Frag || (p.Kind != KindTCP && p.Kind != KindUDP) {
		return false
	}
	if p.Kind == KindTCP && (p.Len < p.L4Off+20 || pkt[p.L4Off+13]&(tcpSYN|tcpFIN|tcpRST) != 0) {
		return false // a handshake or closing segment: never ESTABLISHED-and-staying, no lookup
	}
	b := pkt[:p.Len]
	k := p.tuple(b).Invert()
	r, ok := e.tab.lookup(&k)
	if !ok || r.dir == dirMid {
		return false
	}
	c := r.c
	dir := dirOrig // the translated original packet inverts to the reply key
	if r.dir == dirOrig {
		dir = dirReply
	}
	if !c.assured.Load() || !c.confirmed.Load() || c.dead.Load() {
		return false
	}
	c.mu.Lock()
	st := c.tcp.state
	to := e.timeoutLocked(c)
	c.mu.Unlock()
	if p.Kind == KindTCP && st != TCPEstablished {
		return false
	}
	in := Iface(c.in[dir].Load())
	s := e.rules.Load()
	ic := s.iface(out)
	if in == NoIface || ic == nil {
		return false
	}
	if o := c.fp[dir].Load(); o != nil && o.gen == gen && o.in == in && o.out == out &&
		[6]byte(o.eth[:6]) == dst && [6]byte(o.eth[6:]) == src && o.timeout == to {
		return true // already offloaded as asked: no allocation per slow-path packet
	}
	from, egress := &c.orig, c.reply.Invert()
	if dir == dirReply {
		from, egress = &c.reply, c.orig.Invert()
	}
	o := &offload{
		c: c, dir: uint8(dir), v6: p.V6, proto: p.Proto, in: in, out: out,
		gen: gen, mtu: ic.mtu, timeout: to,
		src: egress.Src, dst: egress.Dst, sport: egress.SrcPort, dport: egress.DstPort,
	}
	copy(o.eth[:6], dst[:])
	copy(o.eth[6:], src[:])
	al := addrLen(p.V6)
	o.ipDelta = deltaBytes(0, from.Src[:al], egress.Src[:al])
	o.ipDelta = deltaBytes(o.ipDelta, from.Dst[:al], egress.Dst[:al])
	o.l4Delta = deltaWord(o.ipDelta, from.SrcPort, egress.SrcPort)
	o.l4Delta = deltaWord(o.l4Delta, from.DstPort, egress.DstPort)
	c.fp[dir].Store(o)
	e.stats.Offloaded.Add(1)
	return true
}

// InvalidateFastPath sends every flow back to the slow path until it is
// offloaded again; call it on a route, neighbour or interface change.
func (e *Engine) InvalidateFastPath() { e.gen.Add(1) }

// FastPathGeneration is the fast path's generation, which
// InvalidateFastPath advances: a forwarding decision cached outside the
// engine (the stack's next-hop cache) is valid while it stays the same.
func (e *Engine) FastPathGeneration() uint64 { return e.gen.Load() }

// FastPath forwards frame, received on in, if its flow direction is
// offloaded. frame is an untagged Ethernet frame (VLAN tags already removed
// into metadata) holding an IPv4 or IPv6 packet. On success it rewrites the
// frame in place (MAC addresses, IP addresses, ports, TTL/hop limit,
// checksums), counts it, and returns the egress interface; the caller
// transmits the frame on out, padding or trimming it to the IP length, and
// keeps ownership of it throughout. On false the frame is unchanged and goes
// to the slow path. It does not allocate.
func (e *Engine) FastPath(frame []byte, in Iface) (out Iface, ok bool) {
	return e.fastPath(frame, in, e.now())
}

// FastPathBatch runs FastPath on each frame of a receive batch from in,
// reading the clock once per batch (the clock read is a large share of a
// packet's cost). outs[i] receives frame i's egress interface, or NoIface if
// it goes to the slow path; len(outs) must be >= len(frames). It returns the
// number of frames forwarded. It does not allocate.
func (e *Engine) FastPathBatch(frames [][]byte, in Iface, outs []Iface) int {
	now := e.now()
	n := 0
	for i, f := range frames {
		o, ok := e.fastPath(f, in, now)
		outs[i] = o
		if ok {
			n++
		}
	}
	return n
}

// Now reads the engine's clock, for FastPathAt: a receive run reads it
// once.
func (e *Engine) Now() int64 { return e.now() }

// FastPathAt is FastPath at engine time now (from Now) that leaves the
// hit counter alone: the caller adds a receive run's hits at once with
// AddFastPathHits. With two receive queues, a per-packet increment of that
// one shared counter and a clock read per packet are a measurable share of
// a fast-path packet's cost. It does not allocate.
func (e *Engine) FastPathAt(frame []byte, in Iface, now int64) (out Iface, ok bool) {
	return e.fastPathCounted(frame, in, now, false)
}

// FrameMeta is what FastPathMetaAt needs to know about a frame that is
// not a plain wire frame with a complete checksum: a superframe from a
// local sender with TSO/GSO (a virtio-net header's gso_size), and a
// partial checksum (CHECKSUM_PARTIAL, VIRTIO_NET_HDR_F_NEEDS_CSUM). The
// zero value is a plain frame.
type FrameMeta struct {
	// SegmentSize, if not 0, says the frame is a superframe that leaves
	// as segments of SegmentSize L4 payload bytes each (the TCP MSS, or
	// a UDP datagram's payload), e.g. 1448: the egress MTU applies to
	// one segment, not to the whole frame.
	SegmentSize int
	// PartialCsum says the TCP or UDP checksum field holds only the
	// pseudo-header sum, to be completed over the segment later (by the
	// egress NIC, the receiving kernel, or the software segmenter). The
	// rewrite then adds the address change to it and leaves the ports out:
	// they are in the part still to be summed.
	PartialCsum bool
}

// FastPathMetaAt is FastPathAt for a superframe or a frame with a partial
// checksum, as m describes it. The rewrite is the same but for the
// checksum (m.PartialCsum) and the MTU check (m.SegmentSize); the IPv4
// header keeps its total length and ID, which the segments inherit. The
// flow's packet counter advances by the number of segments. It does not
// allocate.
func (e *Engine) FastPathMetaAt(frame []byte, in Iface, now int64, m FrameMeta) (out Iface, ok bool) {
	return e.fastPathMeta(frame, in, now, false, m)
}

// AddFastPathHits adds n packets forwarded by FastPathAt to the hit
// counter.
func (e *Engine) AddFastPathHits(n uint64) { e.stats.FastPathHits.Add(n) }

func (e *Engine) fastPath(frame []byte, in Iface, now int64) (out Iface, ok bool) {
	return e.fastPathCounted(frame, in, now, true)
}

func (e *Engine) fastPathCounted(frame []byte, in Iface, now int64, count bool) (out Iface, ok bool) {
	return e.fastPathMeta(frame, in, now, count, FrameMeta{})
}

func (e *Engine) fastPathMeta(frame []byte, in Iface, now int64, count bool, m FrameMeta) (out Iface, ok bool) {
	if len(frame) < ethHdrLen+fastMinIPv4 {
		return e.slow(SlowNotIP)
	}
	b := frame[ethHdrLen:]
	var t Tuple
	var l4 []byte
	var total int
	switch binary.BigEndian.Uint16(frame[12:]) {
	case ethTypeIPv4:
		if b[0] != 0x45 {
			if b[0]>>4 == 4 && b[0]&0xf > 5 {
				return e.slow(SlowOptions)
			}
			return e.slow(SlowNotIP)
		}
		total = int(binary.BigEndian.Uint16(b[2:]))
		if total < fastMinIPv4 || total > len(b) {
			return e.slow(SlowNotIP)
		}
		// A router must check the header checksum (RFC 1812 5.2.2); the
		// rewrite below only patches it, so a damaged header would leave
		// still damaged. The slow path drops it.
		if Sum(b[:ipv4MinLen], 0) != 0xffff {
			return e.slow(SlowNotIP)
		}
		if binary.BigEndian.Uint16(b[6:])&0x3fff != 0 {
			return e.slow(SlowFragment)
		}
		if b[ipv4TTLAt] <= 1 {
			return e.slow(SlowTTL)
		}
		t.Proto = b[9]
		copy(t.Src[:4], b[12:16])
		copy(t.Dst[:4], b[16:20])
		l4 = b[ipv4MinLen:total]
	case ethTypeIPv6:
		if len(b) < fastMinIPv6 || b[0]>>4 != 6 {
			return e.slow(SlowNotIP)
		}
		total = ipv6Len + int(binary.BigEndian.Uint16(b[4:]))
		if total < fastMinIPv6 || total > len(b) {
			return e.slow(SlowNotIP)
		}
		t.Proto = b[6]
		if t.Proto != ProtoTCP && t.Proto != ProtoUDP {
			if t.Proto == 44 {
				return e.slow(SlowFragment)
			}
			return e.slow(SlowOptions)
		}
		if b[ipv6HopAt] <= 1 {
			return e.slow(SlowTTL)
		}
		t.V6 = true
		copy(t.Src[:], b[8:24])
		copy(t.Dst[:], b[24:40])
		l4 = b[ipv6Len:total]
	default:
		return e.slow(SlowNotIP)
	}
	l4Hdr := 8
	switch t.Proto {
	case ProtoTCP:
		if len(l4) < 20 {
			return e.slow(SlowNotIP)
		}
		if l4[13]&(tcpFIN|tcpRST) != 0 {
			return e.slow(SlowFinRst)
		}
		if l4[13]&tcpSYN != 0 {
			return e.slow(SlowSYN)
		}
		l4Hdr = int(l4[12]>>4) * 4
	case ProtoUDP:
		if len(l4) < 8 {
			return e.slow(SlowNotIP)
		}
	default:
		return e.slow(SlowMiss)
	}
	segs, wire := 1, total
	if m.SegmentSize > 0 {
		if (t.Proto == ProtoTCP && l4Hdr < 20) || l4Hdr > len(l4) {
			return e.slow(SlowNotIP)
		}
		// A segment: the headers and at most SegmentSize payload bytes.
		payload := len(l4) - l4Hdr
		wire = total - payload + min(payload, m.SegmentSize)
		segs = max(1, (payload+m.SegmentSize-1)/m.SegmentSize)
	}
	t.SrcPort = binary.BigEndian.Uint16(l4)
	t.DstPort = binary.BigEndian.Uint16(l4[2:])

	r, found := e.tab.lookup(&t)
	if !found || r.dir == dirMid {
		return e.slow(SlowMiss)
	}
	o := r.c.fp[r.dir].Load()
	if o == nil || o.in != in {
		return e.slow(SlowMiss)
	}
	if o.gen != e.gen.Load() || now >= r.c.expires.Load() {
		return e.slow(SlowStale)
	}
	if wire > o.mtu {
		return e.slow(SlowMTU)
	}

	// Rewrite. Addresses and ports are written even where unchanged: a
	// store is cheaper than a compare.
	if t.V6 {
		copy(b[8:24], o.src[:])
		copy(b[24:40], o.dst[:])
		b[ipv6HopAt]--
	} else {
		copy(b[12:16], o.src[:4])
		copy(b[16:20], o.dst[:4])
		old := binary.BigEndian.Uint16(b[ttlWordOffset:])
		b[ipv4TTLAt]--
		d := deltaWord(o.ipDelta, old, binary.BigEndian.Uint16(b[ttlWordOffset:]))
		put16(b[ipv4ChecksumAt:], applyDelta(be16(b[ipv4ChecksumAt:]), d))
	}
	put16(l4, o.sport)
	put16(l4[2:], o.dport)
	switch {
	case m.PartialCsum:
		// The field is the pseudo-header sum, not complemented: add the
		// address change (RFC 1624 eqn. 3 without the complements).
		at := udpChecksumAt
		if t.Proto == ProtoTCP {
			at = tcpChecksumAt
		}
		put16(l4[at:], SumCombine(be16(l4[at:]), uint16(o.ipDelta)))
	case t.Proto == ProtoTCP:
		put16(l4[tcpChecksumAt:], applyDelta(be16(l4[tcpChecksumAt:]), o.l4Delta))
	default:
		setUDPChecksum(l4, t.V6, o.l4Delta)
	}
	copy(frame[:12], o.eth[:])

	c := r.c
	c.expires.Store(now + o.timeout)
	c.pkts[o.dir].Add(uint64(segs))
	c.bytes[o.dir].Add(uint64(total))
	if count {
		e.stats.FastPathHits.Add(1)
	}
	return o.out, true
}

func (e *Engine) slow(r SlowReason) (Iface, bool) {
	e.stats.Slow[r].Add(1)
	return NoIface, false
}
