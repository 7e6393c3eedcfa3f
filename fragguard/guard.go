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
	return g.check(ip, v6, now, nil)
}

// CheckClock is Check that reads clock (nanoseconds, as now) only for a
// fragment whose datagram must be looked up, so packets that turn out to
// carry no Fragment header (IPv6 tunnels, hop-by-hop options) cost no
// clock read.
func (g *Guard) CheckClock(ip []byte, v6 bool, clock func() int64) Reason {
	return g.check(ip, v6, 0, clock)
}

func (g *Guard) check(ip []byte, v6 bool, now int64, clock func() int64) Reason {
	var f frag
	var r Reason
	if v6 {
		r = parse6(ip, &f)
	} else {
		r = parse4(ip, &f)
	}
	if r == Pass && f.timeout != 0 {
		if clock != nil {
			now = clock()
		}
		r = g.track(&f, now)
	}
	if c := g.Stats.Counter(r); c != nil {
		c.Add(1)
	}
	return r
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
