package natengine

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
)

func TestSumMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 300; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		init := uint16(r.Uint32())
		if got, want := Sum(b, init), checksum.Checksum(b, init); got != want {
			t.Fatalf("Sum(len %d, %#x) = %#x, want %#x", n, init, got, want)
		}
	}
}

// TestUpdateChecksumMatchesFull checks RFC 1624 updates against full
// recomputation on random data, including data crafted so that the
// checksum is 0x0000 or the sum is 0xFFFF before or after the change.
func TestUpdateChecksumMatchesFull(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	full := func(b []byte) uint16 { return ^checksum.Checksum(b, 0) }
	try := func(b []byte, at int, nw uint16) {
		t.Helper()
		before := full(b)
		old := binary.BigEndian.Uint16(b[at:])
		binary.BigEndian.PutUint16(b[at:], nw)
		want := full(b)
		if got := UpdateChecksum16(before, old, nw); got != want {
			t.Fatalf("UpdateChecksum16(%#04x, %#04x, %#04x) = %#04x, want %#04x (data % x)", before, old, nw, got, want, b)
		}
		binary.BigEndian.PutUint16(b[at:], old)
		var ob, nb [2]byte
		binary.BigEndian.PutUint16(ob[:], old)
		binary.BigEndian.PutUint16(nb[:], nw)
		if got := UpdateChecksum(before, ob[:], nb[:]); got != want {
			t.Fatalf("UpdateChecksum = %#04x, want %#04x", got, want)
		}
	}
	for i := 0; i < 20000; i++ {
		// The last word is never all-zero, as in real headers (the
		// protocol number of the pseudo-header, the IP version): for
		// all-zero data eqn. 3 yields 0x0000 where recomputation yields
		// 0xFFFF (RFC 1624 section 3).
		b := make([]byte, 4+2*r.IntN(10))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		b[len(b)-1] |= 1
		at := 2 * r.IntN(len(b)/2-1)
		nw := uint16(r.Uint32())
		switch i % 5 {
		case 0: // make the checksum 0x0000 before (sum 0xFFFF)
			fixSum(b, at, 0xffff)
		case 1: // all words but the last zero
			clear(b[:len(b)-2])
		case 2: // choose nw so the checksum after is 0x0000
			nw = 0
			binary.BigEndian.PutUint16(b[at:], 0)
			s := checksum.Checksum(b, 0)
			nw = ^s
		case 3: // old or new word 0xFFFF / 0x0000
			if r.IntN(2) == 0 {
				nw = 0xffff
			} else {
				nw = 0
			}
		}
		try(b, at, nw)
	}
}

// fixSum sets the word at 'at' so that the data's sum becomes want.
func fixSum(b []byte, at int, want uint16) {
	binary.BigEndian.PutUint16(b[at:], 0)
	s := checksum.Checksum(b, 0)
	binary.BigEndian.PutUint16(b[at:], SumCombine(want, ^s))
}

func TestUDPZeroChecksum(t *testing.T) {
	// IPv4 UDP checksum 0 means "none" and stays 0 (RFC 768).
	l4 := make([]byte, 8)
	setUDPChecksum(l4, false, deltaWord(0, 1234, 4321))
	if got := binary.BigEndian.Uint16(l4[6:]); got != 0 {
		t.Fatalf("IPv4 UDP checksum 0 became %#x", got)
	}
	// A computed 0 is sent as 0xFFFF.
	binary.BigEndian.PutUint16(l4[6:], 0x1234)
	d := delta(SumCombine(0x1234, 0)) // ~0x1234 + d folds to 0xffff -> 0
	setUDPChecksum(l4, false, d)
	if got := binary.BigEndian.Uint16(l4[6:]); got != 0xffff {
		t.Fatalf("computed zero UDP checksum = %#x, want 0xffff", got)
	}
	// NAT of a real IPv4 UDP packet without checksum keeps 0.
	e, _ := newTestEngine(t, 0, nil)
	pkt := pk{src: hostA, dst: remote, proto: ProtoUDP, sport: 5000, dport: 53, noUDPCsum: true}.build()
	if v := fwd(t, e, pkt, lanIf, wanIf); v != Accept {
		t.Fatalf("verdict %v", v)
	}
	if got := binary.BigEndian.Uint16(pkt[26:]); got != 0 {
		t.Fatalf("translated no-checksum UDP has checksum %#x", got)
	}
}
