package fragguard

import (
	"encoding/binary"
	"testing"
)

// FuzzCheck feeds Check a sequence of packets cut from the input and
// checks its invariants: it never panics, a refusal is counted exactly
// once, and a datagram found overlapping drops every later fragment of it
// until its entry times out (a single datagram: no eviction can intervene).
func FuzzCheck(f *testing.F) {
	seed := func(v6 bool, pkts ...[]byte) {
		var b []byte
		for _, p := range pkts {
			b = binary.BigEndian.AppendUint16(b, uint16(len(p)))
			b = append(b, p...)
		}
		f.Add(v6, b)
	}
	seed(false, frag4(1, protoTCP, 0, true, tcpHdr(flagACK, 5, 24)), frag4(1, protoTCP, 1, false, make([]byte, 16)))
	seed(false, frag4(1, protoTCP, 0, true, make([]byte, 8)), frag4(1, protoTCP, 1, false, make([]byte, 16)))
	seed(false, frag4(2, protoUDP, 0, true, make([]byte, 32)), frag4(2, protoUDP, 2, true, make([]byte, 16)), frag4(2, protoUDP, 4, false, make([]byte, 8)))
	seed(false, frag4(2, protoUDP, 0, true, make([]byte, 16)), frag4(2, protoUDP, 2, false, make([]byte, 8)))
	seed(true, frag6(ip6Fragment, nil, protoUDP, 0, true, 5, make([]byte, 32)), frag6(ip6Fragment, nil, protoUDP, 2, false, 5, make([]byte, 16)))
	seed(true, frag6(ip6Fragment, nil, ip6DestOpts, 0, true, 5, destOpts(protoTCP, 2)), frag6(ip6Fragment, nil, ip6DestOpts, 3, false, 5, tcpHdr(flagSYN, 5, 20)))
	seed(true, frag6(ip6HopByHop, destOpts(ip6Fragment, 0), protoTCP, 0, true, 6, tcpHdr(flagSYN, 5, 24)))
	f.Fuzz(func(t *testing.T, v6 bool, b []byte) {
		var g Guard
		condemned := map[key]bool{}
		for i := 0; len(b) >= 2 && i < 64; i++ {
			n := min(int(binary.BigEndian.Uint16(b)), len(b)-2)
			pkt := b[2 : 2+n]
			b = b[2+n:]
			var fr frag
			var parsed Reason
			if v6 {
				parsed = parse6(pkt, &fr)
			} else {
				parsed = parse4(pkt, &fr)
			}
			before := total(&g.Stats)
			got := g.Check(pkt, v6, t0+int64(i))
			if got >= NumReasons {
				t.Fatalf("packet %d: Check = %d, not a reason", i, got)
			}
			if d := total(&g.Stats) - before; (got == Pass) != (d == 0) || d > 1 {
				t.Fatalf("packet %d: Check = %v moved the counters by %d", i, got, d)
			}
			if parsed != Pass && got != parsed {
				t.Fatalf("packet %d: Check = %v, the stateless rules said %v", i, got, parsed)
			}
			if parsed != Pass || fr.timeout == 0 {
				continue
			}
			if condemned[fr.k] && got != AfterOverlap {
				t.Fatalf("packet %d: Check = %v for a fragment of a datagram found overlapping, want %v", i, got, AfterOverlap)
			}
			if got == Overlap || got == TooManyHoles {
				condemned[fr.k] = true
			}
		}
	})
}

func total(s *Stats) uint64 {
	var n uint64
	for r := Reason(1); r < NumReasons; r++ {
		n += s.Counter(r).Load()
	}
	return n
}
