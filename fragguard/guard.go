// Package fragguard refuses IP fragments that could make a firewall or NAT
// see a different packet than the host behind it reassembles.
//
// A router that does not reassemble judges a datagram by its first
// fragment: only it carries the transport header. Fragments can undo that
// judgement in three ways, and Guard refuses each:
//
//   - RFC 1858 section 3 (IPv4, and its IPv6 equivalent): a first fragment
//     too short to hold the whole transport header (TCP with its data
//     offset, at least 20 bytes; UDP's 8; ICMP's 8) hides the ports or the
//     flags in a later fragment ("tiny_first_fragment"); a TCP fragment at
//     fragment offset 1 (8 bytes) rewrites the flags of the first one
//     ("tcp_offset_8").
//   - RFC 5722 (IPv6; applied to IPv4 as well, as Linux has done since
//     2018): a fragment that overlaps another fragment of its datagram
//     ("overlap") condemns the whole datagram; its later fragments are
//     refused too ("after_overlap").
//   - RFC 7112 (IPv6): the first fragment must carry the whole header chain,
//     up to and including the upper-layer header ("incomplete_chain").
//
// Fragments that RFC 791 and RFC 8200 section 4.5 call malformed (a
// non-last fragment whose length is not a multiple of 8, a datagram
// longer than 65,535 bytes, a second Fragment header) are refused as
// "malformed_fragment".
//
// Guard works on IP packets as byte slices and knows nothing of netstack.
// Non-fragments cost a few compares and no state.
//
// # State
//
// To see overlaps, Guard remembers per datagram (source, destination, ID,
// and protocol for IPv4) the byte ranges its fragments covered, for as
// long as a destination may hold the datagram for reassembly (the
// timeouts below), and forgets a datagram once its ranges cover it from 0
// to its last fragment's end. The table is bounded; when it is full, an
// expired entry, else an entry not found overlapping, else any entry is
// evicted (counted in Stats.Evicted): under a flood of fresh datagrams
// the router keeps forwarding fragments rather than refusing them all, at
// the price of forgetting the ranges (or the verdict) of the evicted
// datagram. The stateless rules hold regardless.
package fragguard

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
)

// Reason is Check's verdict: Pass, or why the fragment must be dropped.
type Reason uint8

// Reasons. Pass is zero.
const (
	Pass              Reason = iota // not a fragment, or a fragment that breaks no rule
	TinyFirstFragment               // RFC 1858 section 3.1: IPv4 first fragment without the whole TCP/UDP/ICMP header
	TCPOffset8                      // RFC 1858 section 3.2: TCP fragment at fragment offset 1 (8 bytes)
	Overlap                         // RFC 5722: overlaps an earlier fragment of its datagram, or ends past its last fragment's end
	AfterOverlap                    // RFC 5722: a later fragment of a datagram already found overlapping
	IncompleteChain                 // RFC 7112 section 5: IPv6 first fragment without the whole header chain
	Malformed                       // RFC 791 / RFC 8200 section 4.5: bad fragment length, past 65,535 bytes, nested Fragment header
	TooManyHoles                    // the datagram's fragments left more than maxSpans disjoint pieces to remember
	NumReasons
)

var reasonNames = [NumReasons]string{
	Pass:              "pass",
	TinyFirstFragment: "tiny_first_fragment",
	TCPOffset8:        "tcp_offset_8",
	Overlap:           "overlap",
	AfterOverlap:      "after_overlap",
	IncompleteChain:   "incomplete_chain",
	Malformed:         "malformed_fragment",
	TooManyHoles:      "too_many_holes",
}

// String returns the reason's counter and metric name, e.g. "tcp_offset_8".
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Tunables.
const (
	// timeout4 is how long an IPv4 datagram's ranges are remembered:
	// Linux's ipfrag_time, so a Linux host never still holds fragments of
	// a datagram we forgot.
	timeout4 = int64(30 * time.Second)
	// timeout6 is RFC 8200 section 4.5's reassembly timeout (60 s), also
	// Linux's ip6frag_time.
	timeout6 = int64(60 * time.Second)
	// numShards spreads the table over locks, so that receive goroutines
	// of different ports rarely meet.
	numShards = 16
	// maxEntries bounds the datagrams remembered at once (about 200 bytes
	// each: 800 KiB at most), as Linux bounds reassembly memory
	// (ipfrag_high_thresh, 4 MiB).
	maxEntries = 4096
	// sweepInterval spaces the scans of a full shard for expired
	// entries: a flood of new datagrams then costs one eviction each,
	// not a scan of the shard each.
	sweepInterval = int64(time.Second)
	// maxSpans is how many disjoint pieces of one datagram are
	// remembered; in-order or reverse-order fragments merge into one. A
	// datagram scattered into more is refused (TooManyHoles).
	maxSpans = 8
	// minTCP, minUDP and minICMP are the transport headers a first
	// fragment must hold whole (RFC 9293 section 3.1, RFC 768, RFC 792 /
	// RFC 4443 section 2.1 with the 4 bytes every message has after the
	// checksum).
	minTCP  = 20
	minUDP  = 8
	minICMP = 8
)

// IP protocol numbers.
const (
	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58

	ip6HopByHop = 0
	ip6Routing  = 43
	ip6Fragment = 44
	ip6ESP      = 50
	ip6AH       = 51
	ip6NoNext   = 59
	ip6DestOpts = 60
	ip6Mobility = 135
	ip6HIP      = 139
	ip6Shim6    = 140
)

// Stats counts Check's refusals by reason. All fields are safe for
// concurrent use.
type Stats struct {
	TinyFirstFragment atomic.Uint64 // IPv4 first fragments without the whole transport header (RFC 1858 section 3.1)
	TCPOffset8        atomic.Uint64 // TCP fragments at fragment offset 1 (RFC 1858 section 3.2)
	Overlap           atomic.Uint64 // fragments overlapping their datagram's earlier ones (RFC 5722)
	AfterOverlap      atomic.Uint64 // later fragments of datagrams found overlapping (RFC 5722)
	IncompleteChain   atomic.Uint64 // IPv6 first fragments without the whole header chain (RFC 7112)
	Malformed         atomic.Uint64 // malformed fragments (RFC 791, RFC 8200 section 4.5)
	TooManyHoles      atomic.Uint64 // fragments of datagrams scattered into too many pieces
	Evicted           atomic.Uint64 // datagrams forgotten early because the table was full (not a drop)
}

// Counter returns the counter of refusal reason r, nil for Pass or an
// unknown reason.
func (s *Stats) Counter(r Reason) *atomic.Uint64 {
	switch r {
	case TinyFirstFragment:
		return &s.TinyFirstFragment
	case TCPOffset8:
		return &s.TCPOffset8
	case Overlap:
		return &s.Overlap
	case AfterOverlap:
		return &s.AfterOverlap
	case IncompleteChain:
		return &s.IncompleteChain
	case Malformed:
		return &s.Malformed
	case TooManyHoles:
		return &s.TooManyHoles
	}
	return nil
}

// Guard checks fragments against the rules of the package doc. The zero
// value is ready to use. Guard is safe for concurrent use.
type Guard struct {
	shards [numShards]shard
	// Stats counts Check's refusals.
	Stats Stats
}

// shard is one lock's part of the table. mu protects m and nextSweep.
type shard struct {
	mu sync.Mutex
	m  map[key]*entry
	// nextSweep is when a full shard may next be scanned for expired
	// entries; until then a full shard evicts one entry at once.
	nextSweep int64
}

// key names one datagram (RFC 791: source, destination, protocol, ID;
// RFC 8200 section 4.5: source, destination, ID).
type key struct {
	src, dst [16]byte
	id       uint32
	proto    uint8 // IPv4 only
	v6       bool
}

// span is one remembered piece of a datagram, in bytes of its payload
// (IPv4) or fragmentable part (IPv6): [lo, hi).
type span struct{ lo, hi uint32 }

type entry struct {
	spans   [maxSpans]span // sorted, disjoint, not adjacent
	n       uint8          // spans in use
	bad     bool           // an overlap was found: drop every later fragment
	hasEnd  bool           // the last fragment (MF/M clear) was seen
	end     uint32         // its end, valid iff hasEnd
	expires int64
}

// frag is what Check parsed out of one fragment.
type frag struct {
	k        key
	off, end uint32 // the fragment's range
	more     bool
	timeout  int64
}

// Check reports whether ip, an IPv4 (v6 false) or IPv6 packet starting at
// its IP header, may pass, and if not, why; every refusal is counted in
// g.Stats. now is a monotonic clock in nanoseconds. Check only reads ip.
// Packets that are not fragments (IPv4 with MF clear and offset 0, IPv6
// without a Fragment header, and RFC 6946 atomic fragments) pass without
// touching state. A packet whose IP header cannot be parsed is
// Malformed. Check does not allocate, except for the first fragment
// seen of a datagram.
func (g *Guard) Check(ip []byte, v6 bool, now int64) Reason {
	var f frag
	var r Reason
	if v6 {
		r = parse6(ip, &f)
	} else {
		r = parse4(ip, &f)
	}
	if r == Pass && f.timeout != 0 {
		r = g.track(&f, now)
	}
	if c := g.Stats.Counter(r); c != nil {
		c.Add(1)
	}
	return r
}

// parse4 applies the stateless rules to an IPv4 packet. f.timeout stays 0
// when there is nothing to track.
func parse4(ip []byte, f *frag) Reason {
	if len(ip) < 20 || ip[0]>>4 != 4 {
		return Malformed
	}
	ihl := int(ip[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ihl < 20 || total < ihl || total > len(ip) {
		return Malformed
	}
	ff := binary.BigEndian.Uint16(ip[6:])
	more, fo := ff&0x2000 != 0, uint32(ff&0x1fff)
	if !more && fo == 0 {
		return Pass
	}
	proto := ip[9]
	payload := ip[ihl:total]
	off := fo * 8
	end := off + uint32(len(payload))
	switch {
	case more && len(payload)%8 != 0, uint32(ihl)+end > 0xffff:
		return Malformed
	case fo == 0 && !wholeHeader(proto, payload, protoICMP):
		return TinyFirstFragment
	case fo == 1 && proto == protoTCP:
		return TCPOffset8
	}
	f.k = key{id: uint32(binary.BigEndian.Uint16(ip[4:])), proto: proto}
	copy(f.k.src[:], ip[12:16])
	copy(f.k.dst[:], ip[16:20])
	f.off, f.end, f.more, f.timeout = off, end, more, timeout4
	return Pass
}

// wholeHeader reports whether b starts with the whole header of transport
// protocol proto (icmp is the family's ICMP number). Other protocols need
// nothing.
func wholeHeader(proto uint8, b []byte, icmp uint8) bool {
	switch proto {
	case protoTCP:
		if len(b) < minTCP {
			return false
		}
		n := int(b[12]>>4) * 4
		return n >= minTCP && n <= len(b)
	case protoUDP:
		return len(b) >= minUDP
	case icmp:
		return len(b) >= minICMP
	}
	return true
}

// parse6 applies the stateless rules to an IPv6 packet. f.timeout stays 0
// when there is nothing to track.
func parse6(ip []byte, f *frag) Reason {
	if len(ip) < 40 || ip[0]>>4 != 6 {
		return Malformed
	}
	end := 40 + int(binary.BigEndian.Uint16(ip[4:]))
	if end > len(ip) {
		return Malformed
	}
	ip = ip[:end]
	// The unfragmentable part: Hop-by-Hop, Routing and Destination
	// Options headers before the Fragment header (RFC 8200 section 4.5).
	nh, off := ip[6], 40
	for nh != ip6Fragment {
		n, ok := extLen(nh, ip[off:])
		if !ok {
			// Not a fragment, or a chain too broken to say; netstack
			// drops the latter.
			return Pass
		}
		nh, off = ip[off], off+n
	}
	if off+8 > len(ip) {
		return Malformed
	}
	fh := ip[off : off+8]
	payload := ip[off+8:]
	fo := uint32(binary.BigEndian.Uint16(fh[2:]) >> 3)
	more := fh[3]&1 != 0
	if fo == 0 && !more {
		return Pass // RFC 6946: an atomic fragment is processed as a whole packet
	}
	first := fh[0]
	foff := fo * 8
	fend := foff + uint32(len(payload))
	switch {
	case more && len(payload)%8 != 0, uint32(off-40)+fend > 0xffff:
		return Malformed
	case fo == 1 && first == protoTCP:
		return TCPOffset8
	case fo == 0:
		if r := chain6(first, payload); r != Pass {
			return r
		}
	}
	f.k = key{id: binary.BigEndian.Uint32(fh[4:]), v6: true}
	copy(f.k.src[:], ip[8:24])
	copy(f.k.dst[:], ip[24:40])
	f.off, f.end, f.more, f.timeout = foff, fend, more, timeout6
	return Pass
}

// chain6 checks that the fragmentable part b of a first fragment, whose
// first header is nh, holds the rest of the header chain through the
// upper-layer header (RFC 7112 section 5).
func chain6(nh uint8, b []byte) Reason {
	off := 0
	for {
		switch nh {
		case ip6Fragment:
			return Malformed // a Fragment header inside a fragment
		case ip6NoNext:
			return Pass
		case ip6ESP:
			// Everything after the SPI and sequence number is encrypted:
			// the chain ends there (RFC 4303 section 2).
			if len(b)-off < 8 {
				return IncompleteChain
			}
			return Pass
		}
		n, ok := extLen(nh, b[off:])
		if !ok {
			if isExt(nh) || !wholeHeader(nh, b[off:], protoICMPv6) {
				return IncompleteChain
			}
			return Pass
		}
		nh, off = b[off], off+n
	}
}

// isExt reports whether nh is an IPv6 extension header that extLen walks
// (RFC 7045 section 4, less Fragment and ESP).
func isExt(nh uint8) bool {
	switch nh {
	case ip6HopByHop, ip6Routing, ip6DestOpts, ip6AH, ip6Mobility, ip6HIP, ip6Shim6:
		return true
	}
	return false
}

// extLen returns the length of extension header nh at the start of b; ok
// is false if nh is not one isExt names or b does not hold it whole.
func extLen(nh uint8, b []byte) (n int, ok bool) {
	if !isExt(nh) || len(b) < 8 {
		return 0, false
	}
	if nh == ip6AH {
		n = (int(b[1]) + 2) * 4 // RFC 4302 section 2.2
	} else {
		n = (int(b[1]) + 1) * 8 // RFC 8200 section 4.3
	}
	return n, n <= len(b)
}

// track records f's range in its datagram's entry and reports whether it
// overlaps.
func (g *Guard) track(f *frag, now int64) Reason {
	s := &g.shards[shardOf(&f.k)]
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[f.k]
	if e != nil && now >= e.expires {
		*e = entry{}
	}
	if e == nil {
		if s.m == nil {
			s.m = make(map[key]*entry)
		}
		if len(s.m) >= maxEntries/numShards {
			s.evictLocked(now, &g.Stats)
		}
		e = new(entry)
		s.m[f.k] = e
	}
	if e.n == 0 && !e.bad {
		e.expires = now + f.timeout
	}
	if e.bad {
		return AfterOverlap
	}
	if e.overlaps(f) {
		e.bad = true
		return Overlap
	}
	if !e.insert(span{f.off, f.end}) {
		e.bad = true
		return TooManyHoles
	}
	if !f.more {
		e.hasEnd, e.end = true, f.end
	}
	if e.hasEnd && e.n == 1 && e.spans[0] == (span{0, e.end}) {
		delete(s.m, f.k) // complete: the destination has it all
	}
	return Pass
}

// overlaps reports whether f overlaps a remembered range, or disagrees
// with the datagram's known end.
func (e *entry) overlaps(f *frag) bool {
	if e.hasEnd && (f.end > e.end || !f.more && f.end != e.end) {
		return true
	}
	if !f.more {
		for _, s := range e.spans[:e.n] {
			if s.hi > f.end {
				return true
			}
		}
	}
	for _, s := range e.spans[:e.n] {
		// An empty fragment overlaps a range it lies strictly inside.
		if f.off < s.hi && s.lo < f.end || f.off == f.end && s.lo < f.off && f.off < s.hi {
			return true
		}
	}
	return false
}

// insert adds the non-overlapping range r, merging it with adjacent
// ones, and reports false if that needs more than maxSpans ranges.
func (e *entry) insert(r span) bool {
	if r.lo == r.hi {
		return true
	}
	i := 0
	for i < int(e.n) && e.spans[i].hi < r.lo {
		i++
	}
	// spans[i] is the first that ends at or after r.lo; with no overlap
	// it is adjacent to r (hi == r.lo) or lies after it.
	if i < int(e.n) && e.spans[i].hi == r.lo {
		e.spans[i].hi = r.hi
		if i+1 < int(e.n) && e.spans[i+1].lo == r.hi {
			e.spans[i].hi = e.spans[i+1].hi
			copy(e.spans[i+1:], e.spans[i+2:e.n])
			e.n--
		}
		return true
	}
	if i < int(e.n) && e.spans[i].lo == r.hi {
		e.spans[i].lo = r.lo
		return true
	}
	if int(e.n) == maxSpans {
		return false
	}
	copy(e.spans[i+1:e.n+1], e.spans[i:e.n])
	e.spans[i] = r
	e.n++
	return true
}

// evictLocked makes room in a full shard: it removes the expired entries
// (at most once per sweepInterval), and if that freed nothing, one entry
// not found overlapping, else any one.
func (s *shard) evictLocked(now int64, st *Stats) {
	if now >= s.nextSweep {
		s.nextSweep = now + sweepInterval
		for k, e := range s.m {
			if now >= e.expires {
				delete(s.m, k)
			}
		}
		if len(s.m) < maxEntries/numShards {
			return
		}
	}
	var victim key
	found := false
	for k, e := range s.m { // map order is random: a random victim
		victim, found = k, true
		if !e.bad {
			break
		}
	}
	if found {
		delete(s.m, victim)
		st.Evicted.Add(1)
	}
}

// Len returns the number of datagrams remembered, for tests and status.
func (g *Guard) Len() int {
	n := 0
	for i := range g.shards {
		s := &g.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

func shardOf(k *key) int {
	h := k.id*0x9e3779b1 ^ uint32(k.src[15])<<8 ^ uint32(k.src[3]) ^ uint32(k.dst[15])<<16 ^ uint32(k.dst[3])<<24
	return int(h>>28) % numShards
}
