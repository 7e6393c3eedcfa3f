package fragguard

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// frag4 builds an IPv4 packet 192.0.2.1 → 198.51.100.2 with ID id,
// protocol proto, fragment offset fo (8-byte units), MF more and payload.
func frag4(id uint16, proto uint8, fo uint16, more bool, payload []byte) []byte {
	ip := make([]byte, 20+len(payload))
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	binary.BigEndian.PutUint16(ip[4:], id)
	ff := fo
	if more {
		ff |= 0x2000
	}
	binary.BigEndian.PutUint16(ip[6:], ff)
	ip[8], ip[9] = 64, proto
	copy(ip[12:], []byte{192, 0, 2, 1})
	copy(ip[16:], []byte{198, 51, 100, 2})
	copy(ip[20:], payload)
	return ip
}

// frag6 builds an IPv6 packet 2001:db8::1 → 2001:db8::2 whose chain is
// pre (already encoded extension headers; nh is the first one's number,
// or 44 for the Fragment header directly), then a Fragment header with
// next header first, offset fo, M more and ID id, then payload. With
// noFrag the Fragment header is left out and first follows pre.
func frag6(nh uint8, pre []byte, first uint8, fo uint16, more bool, id uint32, payload []byte) []byte {
	ip := make([]byte, 40, 40+len(pre)+8+len(payload))
	ip[0] = 0x60
	ip[6], ip[7] = nh, 64
	ip[8], ip[9], ip[23] = 0x20, 0x01, 1
	ip[24], ip[25], ip[39] = 0x20, 0x01, 2
	ip = append(ip, pre...)
	fh := make([]byte, 8)
	fh[0] = first
	ff := fo << 3
	if more {
		ff |= 1
	}
	binary.BigEndian.PutUint16(fh[2:], ff)
	binary.BigEndian.PutUint32(fh[4:], id)
	ip = append(ip, fh...)
	ip = append(ip, payload...)
	binary.BigEndian.PutUint16(ip[4:], uint16(len(ip)-40))
	return ip
}

// tcpHdr returns a TCP header with the given flags and data offset doff
// words, padded to n bytes.
func tcpHdr(flags byte, doff byte, n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint16(b[0:], 40000)
	binary.BigEndian.PutUint16(b[2:], 8080)
	if n > 13 {
		b[12], b[13] = doff<<4, flags
	}
	return b
}

// destOpts returns a Destination Options (or Hop-by-Hop) header of
// 8*(l+1) bytes with next header nh.
func destOpts(nh uint8, l int) []byte {
	b := make([]byte, 8*(l+1))
	b[0], b[1] = nh, byte(l)
	b[2], b[3] = 1, byte(len(b)-4) // one PadN option filling it
	return b
}

// noFrag6 builds an IPv6 packet with next header nh and payload pl.
func noFrag6(nh uint8, pl []byte) []byte {
	ip := frag6(nh, nil, 0, 0, false, 0, nil)[:40]
	binary.BigEndian.PutUint16(ip[4:], uint16(len(pl)))
	return append(ip, pl...)
}

const (
	flagSYN = 0x02
	flagACK = 0x10
)

var t0 = int64(time.Hour)

func TestRFC1858TinyFragment(t *testing.T) {
	// RFC 1858 section 3.1: a first fragment must hold the whole
	// transport header, so that the filter sees ports and flags.
	tests := []struct {
		name  string
		proto uint8
		pl    []byte
		want  Reason
	}{
		{"tcp 8 bytes (ports only)", protoTCP, tcpHdr(0, 0, 8), TinyFirstFragment},
		{"tcp 16 bytes (no flags)", protoTCP, tcpHdr(0, 0, 16), TinyFirstFragment},
		{"tcp 20 bytes data offset 5", protoTCP, tcpHdr(flagSYN, 5, 24), Pass},
		{"tcp 24 bytes data offset 8 (options cut)", protoTCP, tcpHdr(flagSYN, 8, 24), TinyFirstFragment},
		{"tcp data offset 4", protoTCP, tcpHdr(flagSYN, 4, 24), TinyFirstFragment},
		{"tcp 32 bytes data offset 8", protoTCP, tcpHdr(flagSYN, 8, 32), Pass},
		{"udp 8 bytes", protoUDP, make([]byte, 8), Pass},
		{"icmp 8 bytes", protoICMP, make([]byte, 8), Pass},
		{"gre 8 bytes", 47, make([]byte, 8), Pass},
		{"empty tcp", protoTCP, nil, TinyFirstFragment},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g Guard
			if got := g.Check(frag4(1, tt.proto, 0, true, tt.pl), false, t0); got != tt.want {
				t.Errorf("Check(first fragment) = %v, want %v", got, tt.want)
			}
			if got := g.Stats.TinyFirstFragment.Load(); (got == 1) != (tt.want == TinyFirstFragment) {
				t.Errorf("Stats.TinyFirstFragment = %d", got)
			}
		})
	}
	// UDP and ICMP need 8 bytes; a non-last fragment's length is a
	// multiple of 8, so only a last (whole) packet could be shorter, and
	// a last fragment at offset 0 is no fragment.
	var g Guard
	if got := g.Check(frag4(2, protoUDP, 0, false, make([]byte, 4)), false, t0); got != Pass {
		t.Errorf("Check(unfragmented 4-byte UDP) = %v, want pass (not a fragment)", got)
	}
}

func TestRFC1858TCPOffset8(t *testing.T) {
	// RFC 1858 section 3.2: "if FO=1 and PROTOCOL=TCP then drop packet",
	// whatever came before.
	var g Guard
	if got := g.Check(frag4(7, protoTCP, 0, true, tcpHdr(flagACK, 5, 24)), false, t0); got != Pass {
		t.Fatalf("Check(first fragment, ACK) = %v, want pass", got)
	}
	if got := g.Check(frag4(7, protoTCP, 1, false, tcpHdr(flagSYN, 5, 24)[8:]), false, t0); got != TCPOffset8 {
		t.Errorf("Check(offset 1 rewriting the flags to SYN) = %v, want %v", got, TCPOffset8)
	}
	if got := g.Check(frag4(8, protoTCP, 1, true, make([]byte, 8)), false, t0); got != TCPOffset8 {
		t.Errorf("Check(offset 1 alone) = %v, want %v", got, TCPOffset8)
	}
	if got := g.Check(frag4(9, protoUDP, 1, false, make([]byte, 8)), false, t0); got != Pass {
		t.Errorf("Check(UDP at offset 1) = %v, want pass", got)
	}
	// IPv6: the fragmentable part starts with the TCP header.
	if got := g.Check(frag6(ip6Fragment, nil, protoTCP, 1, false, 9, make([]byte, 16)), true, t0); got != TCPOffset8 {
		t.Errorf("Check(IPv6 TCP at offset 1) = %v, want %v", got, TCPOffset8)
	}
	if got := g.Stats.TCPOffset8.Load(); got != 3 {
		t.Errorf("Stats.TCPOffset8 = %d, want 3", got)
	}
}

func TestRFC5722Overlap(t *testing.T) {
	// RFC 5722 section 4: an overlapping fragment condemns the whole
	// datagram; every later fragment of it is dropped too.
	for _, v6 := range []bool{false, true} {
		mk := func(fo uint16, more bool, n int) []byte {
			if v6 {
				return frag6(ip6Fragment, nil, protoUDP, fo, more, 77, make([]byte, n))
			}
			return frag4(77, protoUDP, fo, more, make([]byte, n))
		}
		t.Run(map[bool]string{false: "ipv4", true: "ipv6"}[v6], func(t *testing.T) {
			var g Guard
			steps := []struct {
				pkt  []byte
				want Reason
			}{
				{mk(0, true, 32), Pass},          // [0, 32)
				{mk(8, true, 32), Pass},          // [64, 96)
				{mk(2, true, 16), Overlap},       // [16, 32) overlaps [0, 32)
				{mk(4, true, 32), AfterOverlap},  // [32, 64) would fit, but the datagram is condemned
				{mk(12, false, 8), AfterOverlap}, // the last fragment too
			}
			for i, s := range steps {
				if got := g.Check(s.pkt, v6, t0+int64(i)); got != s.want {
					t.Errorf("step %d: Check = %v, want %v", i, got, s.want)
				}
			}
			if g.Stats.Overlap.Load() != 1 || g.Stats.AfterOverlap.Load() != 2 {
				t.Errorf("Stats overlap %d after %d, want 1 and 2", g.Stats.Overlap.Load(), g.Stats.AfterOverlap.Load())
			}
			// A datagram with another ID is not affected.
			other := frag4(78, protoUDP, 0, true, make([]byte, 32))
			if v6 {
				other = frag6(ip6Fragment, nil, protoUDP, 0, true, 78, make([]byte, 32))
			}
			if got := g.Check(other, v6, t0); got != Pass {
				t.Errorf("Check(other datagram) = %v, want pass", got)
			}
		})
	}
}

func TestRFC5722OverlapOrders(t *testing.T) {
	// The overlapping fragment may come first: the later one, which
	// would be harmless alone, is the one refused.
	type fr struct {
		fo   uint16
		more bool
		n    int
	}
	tests := []struct {
		name  string
		frags []fr
		want  []Reason
	}{
		{"in order", []fr{{0, true, 16}, {2, true, 16}, {4, false, 8}}, []Reason{Pass, Pass, Pass}},
		{"reverse order", []fr{{4, false, 8}, {2, true, 16}, {0, true, 16}}, []Reason{Pass, Pass, Pass}},
		{"shuffled", []fr{{2, true, 16}, {4, false, 8}, {0, true, 16}}, []Reason{Pass, Pass, Pass}},
		{"later first fragment overlaps", []fr{{1, true, 16}, {0, true, 16}}, []Reason{Pass, Overlap}},
		{"exact duplicate", []fr{{0, true, 16}, {0, true, 16}}, []Reason{Pass, Overlap}},
		{"fragment past the last one's end", []fr{{2, false, 8}, {3, true, 8}}, []Reason{Pass, Overlap}},
		{"two different last fragments", []fr{{2, false, 8}, {3, false, 8}}, []Reason{Pass, Overlap}},
		{"last fragment before a seen range", []fr{{4, true, 8}, {2, false, 8}}, []Reason{Pass, Overlap}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g Guard
			for i, f := range tt.frags {
				if got := g.Check(frag4(5, 47, f.fo, f.more, make([]byte, f.n)), false, t0); got != tt.want[i] {
					t.Errorf("fragment %d (offset %d): Check = %v, want %v", i, f.fo, got, tt.want[i])
				}
			}
		})
	}
}

func TestCompleteDatagramForgotten(t *testing.T) {
	// A datagram whose ranges cover it from 0 to its end is forgotten, so
	// IDs that wrap around quickly (RFC 4963) are not taken for overlaps.
	var g Guard
	for round := range 3 {
		for _, f := range []struct {
			fo   uint16
			more bool
		}{{0, true}, {1, true}, {2, false}} {
			if got := g.Check(frag4(9, protoUDP, f.fo, f.more, make([]byte, 8)), false, t0); got != Pass {
				t.Fatalf("round %d offset %d: Check = %v, want pass", round, f.fo, got)
			}
		}
		if n := g.Len(); n != 0 {
			t.Fatalf("round %d: Len() = %d after a complete datagram, want 0", round, n)
		}
	}
}

func TestTimeout(t *testing.T) {
	var g Guard
	g.Check(frag4(3, protoUDP, 0, true, make([]byte, 16)), false, t0)
	g.Check(frag4(3, protoUDP, 1, true, make([]byte, 16)), false, t0) // overlap: condemned
	if got := g.Check(frag4(3, protoUDP, 5, true, make([]byte, 8)), false, t0+timeout4-1); got != AfterOverlap {
		t.Errorf("Check before the timeout = %v, want %v", got, AfterOverlap)
	}
	if got := g.Check(frag4(3, protoUDP, 0, true, make([]byte, 16)), false, t0+timeout4); got != Pass {
		t.Errorf("Check after the timeout (a new datagram with the old ID) = %v, want pass", got)
	}
}

func TestBoundedState(t *testing.T) {
	var g Guard
	for i := range 3 * maxEntries {
		g.Check(frag4(uint16(i), protoUDP, 0, true, make([]byte, 8)), false, t0)
	}
	if n := g.Len(); n > maxEntries {
		t.Errorf("Len() = %d, want at most %d", n, maxEntries)
	}
	if g.Stats.Evicted.Load() == 0 {
		t.Error("Stats.Evicted = 0 after overfilling the table")
	}
	// Expired entries make room without evictions.
	ev := g.Stats.Evicted.Load()
	for i := range maxEntries / 4 {
		g.Check(frag4(uint16(i), protoICMP, 0, true, make([]byte, 8)), false, t0+timeout4)
	}
	if got := g.Stats.Evicted.Load(); got != ev {
		t.Errorf("Stats.Evicted rose from %d to %d with every old entry expired", ev, got)
	}
}

func TestTooManyHoles(t *testing.T) {
	var g Guard
	for i := range maxSpans {
		if got := g.Check(frag4(4, protoUDP, uint16(2*i+1), true, make([]byte, 8)), false, t0); got != Pass {
			t.Fatalf("fragment %d: Check = %v, want pass", i, got)
		}
	}
	if got := g.Check(frag4(4, protoUDP, 2*maxSpans+1, true, make([]byte, 8)), false, t0); got != TooManyHoles {
		t.Errorf("Check(piece %d) = %v, want %v", maxSpans+1, got, TooManyHoles)
	}
	if got := g.Check(frag4(4, protoUDP, 0, true, make([]byte, 8)), false, t0); got != AfterOverlap {
		t.Errorf("Check(after too many holes) = %v, want %v", got, AfterOverlap)
	}
}

func TestRFC7112HeaderChain(t *testing.T) {
	// RFC 7112 section 5: the first fragment carries the IPv6 header, all
	// extension headers and the upper-layer header.
	tests := []struct {
		name  string
		nh    uint8
		pre   []byte
		first uint8
		pl    []byte
		want  Reason
	}{
		{"tcp whole", ip6Fragment, nil, protoTCP, tcpHdr(flagSYN, 5, 24), Pass},
		{"tcp cut at 16 bytes", ip6Fragment, nil, protoTCP, tcpHdr(flagSYN, 5, 16), IncompleteChain},
		{"tcp options cut", ip6Fragment, nil, protoTCP, tcpHdr(flagSYN, 10, 32), IncompleteChain},
		{"udp whole", ip6Fragment, nil, protoUDP, make([]byte, 8), Pass},
		{"icmpv6 whole", ip6Fragment, nil, protoICMPv6, make([]byte, 8), Pass},
		{"destination options then tcp", ip6Fragment, nil, ip6DestOpts, append(destOpts(protoTCP, 0), tcpHdr(flagSYN, 5, 24)...), Pass},
		{"destination options, tcp in the next fragment", ip6Fragment, nil, ip6DestOpts, destOpts(protoTCP, 2), IncompleteChain},
		{"destination options cut", ip6Fragment, nil, ip6DestOpts, destOpts(protoTCP, 2)[:16], IncompleteChain},
		{"two destination options, udp missing", ip6Fragment, nil, ip6DestOpts, append(destOpts(ip6DestOpts, 0), destOpts(protoUDP, 0)...), IncompleteChain},
		{"hop-by-hop before the fragment header", ip6HopByHop, destOpts(ip6Fragment, 0), protoUDP, make([]byte, 8), Pass},
		{"hop-by-hop before, tcp cut", ip6HopByHop, destOpts(ip6Fragment, 0), protoTCP, make([]byte, 8), IncompleteChain},
		{"no next header", ip6Fragment, nil, ip6NoNext, make([]byte, 8), Pass},
		{"esp", ip6Fragment, nil, ip6ESP, make([]byte, 8), Pass},
		{"unknown protocol", ip6Fragment, nil, 253, make([]byte, 8), Pass},
		{"second fragment header", ip6Fragment, nil, ip6Fragment, make([]byte, 16), Malformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := tt.pl
			for len(pl)%8 != 0 { // a non-last fragment is a multiple of 8 long
				pl = append(pl, 0)
			}
			var g Guard
			if got := g.Check(frag6(tt.nh, tt.pre, tt.first, 0, true, 1, pl), true, t0); got != tt.want {
				t.Errorf("Check = %v, want %v", got, tt.want)
			}
			if got := g.Stats.IncompleteChain.Load(); (got == 1) != (tt.want == IncompleteChain) {
				t.Errorf("Stats.IncompleteChain = %d", got)
			}
		})
	}
}

func TestNotFragments(t *testing.T) {
	var g Guard
	pkts := []struct {
		name string
		ip   []byte
		v6   bool
	}{
		{"ipv4 whole", frag4(1, protoTCP, 0, false, tcpHdr(flagSYN, 5, 20)), false},
		{"ipv4 whole, tiny tcp", frag4(1, protoTCP, 0, false, make([]byte, 4)), false},
		{"ipv6 atomic fragment (RFC 6946)", frag6(ip6Fragment, nil, protoTCP, 0, false, 1, make([]byte, 4)), true},
		{"ipv6 with destination options", noFrag6(ip6DestOpts, append(destOpts(protoUDP, 0), make([]byte, 8)...)), true},
		{"ipv6 udp", noFrag6(protoUDP, make([]byte, 8)), true},
	}
	for _, p := range pkts {
		if got := g.Check(p.ip, p.v6, t0); got != Pass {
			t.Errorf("%s: Check = %v, want pass", p.name, got)
		}
	}
	if n := g.Len(); n != 0 {
		t.Errorf("Len() = %d, want 0: non-fragments leave no state", n)
	}
	ip := frag4(1, protoTCP, 0, false, tcpHdr(flagSYN, 5, 20))
	if n := testing.AllocsPerRun(100, func() { g.Check(ip, false, t0) }); n != 0 {
		t.Errorf("Check(non-fragment) allocates %v times", n)
	}
}

func TestMalformed(t *testing.T) {
	tests := []struct {
		name string
		ip   []byte
		v6   bool
	}{
		// RFC 791: every fragment but the last carries a multiple of 8 bytes.
		{"ipv4 non-last fragment of 12 bytes", frag4(1, protoUDP, 1, true, make([]byte, 12)), false},
		{"ipv4 past 65535 bytes", frag4(1, protoUDP, 0x1fff, false, make([]byte, 16)), false},
		{"ipv4 short header", make([]byte, 12), false},
		// RFC 8200 section 4.5: the same two rules, with Parameter Problem.
		{"ipv6 non-last fragment of 12 bytes", frag6(ip6Fragment, nil, protoUDP, 1, true, 1, make([]byte, 12)), true},
		{"ipv6 past 65535 bytes", frag6(ip6Fragment, nil, protoUDP, 0x1fff, false, 1, make([]byte, 16)), true},
		{"ipv6 fragment header cut", frag6(ip6Fragment, nil, protoUDP, 1, true, 1, nil)[:44], true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip := tt.ip
			if tt.v6 && len(ip) >= 40 {
				binary.BigEndian.PutUint16(ip[4:], uint16(len(ip)-40))
			}
			var g Guard
			if got := g.Check(ip, tt.v6, t0); got != Malformed {
				t.Errorf("Check = %v, want %v", got, Malformed)
			}
		})
	}
}

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	var s Stats
	for r := Reason(1); r < NumReasons; r++ {
		name := r.String()
		if name == "" || seen[name] {
			t.Errorf("Reason(%d).String() = %q: empty or repeated", r, name)
		}
		seen[name] = true
		if s.Counter(r) == nil {
			t.Errorf("Stats.Counter(%v) = nil", r)
		}
	}
	if s.Counter(Pass) != nil {
		t.Error("Stats.Counter(Pass) != nil")
	}
}

func BenchmarkCheck(b *testing.B) {
	whole := frag4(1, protoUDP, 0, false, make([]byte, 1400))
	later := frag4(2, protoUDP, 100, true, make([]byte, 1400))
	v6 := noFrag6(ip6DestOpts, append(destOpts(protoUDP, 0), make([]byte, 8)...))
	for _, bc := range []struct {
		name string
		ip   []byte
		v6   bool
		id   bool // a new datagram each time
	}{
		{"ipv4 not a fragment", whole, false, false},
		{"ipv6 destination options, not a fragment", v6, true, false},
		{"ipv4 fragment of a known datagram", later, false, false},
		{"ipv4 first fragments of new datagrams", frag4(0, protoUDP, 0, true, make([]byte, 1400)), false, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var g Guard
			ip := bytes.Clone(bc.ip)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if bc.id {
					binary.BigEndian.PutUint16(ip[4:], uint16(i))
				}
				g.Check(ip, bc.v6, t0+int64(i))
			}
		})
	}
}
