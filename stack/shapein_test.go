package stack

import (
	"bytes"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
)

// relayShaper is an ingress shaper that hands every frame back at once,
// from its own goroutine as sqm's Queue does, and counts them.
type relayShaper struct {
	ifc    *Interface
	frames chan []byte
	n      atomic.Int64
	// drop makes the shaper a black hole.
	drop atomic.Bool
}

func (s *relayShaper) WriteFrames(frames [][]byte) (int, error) {
	for _, f := range frames {
		s.n.Add(1)
		if !s.drop.Load() {
			s.frames <- append([]byte(nil), f...)
		}
	}
	return len(frames), nil
}

func (s *relayShaper) run() {
	for f := range s.frames {
		s.ifc.DeliverShaped([][]byte{f})
	}
}

// TestIngressShaper: with a shaper on the wan, what arrives there goes
// through it and then on as usual (a ping and a TCP exchange from B to A
// cross, a ping to the router is answered); a shaper that keeps every
// frame silences the wan alone; without it, the wan works again.
func TestIngressShaper(t *testing.T) {
	l := newLab(t)
	wan := l.r.Interface("wan")
	s := &relayShaper{ifc: wan, frames: make(chan []byte, 1024)}
	go s.run()
	defer close(s.frames)
	wan.SetIngressShaper(s)

	ping(t, l.b, aIP4)
	ping(t, l.b, wanIP4)
	listen(t, l.a, netip.AddrPortFrom(aIP4, 7000))
	exchange(t, dial(t, l.b, netip.AddrPortFrom(aIP4, 7000)), 64<<10)
	n := s.n.Load()
	if n < 50 {
		t.Fatalf("the shaper saw %d frames of the pings and a 64 KiB exchange", n)
	}
	// With a shaper that keeps what it gets, the wan hears nothing, while
	// the lan, not the wan's to shape, works.
	s.drop.Store(true)
	if _, err := l.b.Ping(ctxTimeout(t, 300*time.Millisecond), aIP4, []byte("lost")); err == nil {
		t.Error("a ping from the wan crossed a shaper that keeps every frame")
	}
	ping(t, l.a, lanIP4)

	// Without the shaper the wan works again.
	wan.SetIngressShaper(nil)
	ping(t, l.b, aIP4)
}

// TestIngressShaperCutsSuperframes: a superframe arriving on a shaped
// wan (a GRO merge of the NIC's, or a local sender's TSO, on a port with
// vnet headers) goes through the download shaper as the wire frames it
// stands for, complete checksums and all, and then on to the LAN; it
// used to pass the shaper by, unshaped and unseen by its queue.
func TestIngressShaperCutsSuperframes(t *testing.T) {
	s := newSuperLab(t, false)
	wan := s.l.r.Interface("wan")
	sh := &relayShaper{ifc: wan, frames: make(chan []byte, 1024)}
	go sh.run()
	defer close(sh.frames)
	wan.SetIngressShaper(sh)
	defer wan.SetIngressShaper(nil)

	f, g := s.superframe(30*s.mss+100, 0x18, 3) // ACK, PSH: 31 segments
	orig := bytes.Clone(f)
	s.inject(f, g)
	var segs [][]byte
	for end := time.Now().Add(5 * time.Second); len(segs) < 31 && time.Now().Before(end); {
		got, _, _ := s.oursAndOthers(t)
		segs = append(segs, got...)
		time.Sleep(5 * time.Millisecond)
	}
	if n := sh.n.Load(); n < 31 {
		t.Fatalf("the shaper saw %d frames of a 31-segment superframe, want its 31 wire frames", n)
	}
	s.checkSegments(t, segs, orig)

	// A frame of wire size with a partial checksum (a local sender's
	// checksum offload) is shaped too, and leaves with its checksum
	// complete (checkSegments decodes it with gopacket).
	s.seq += uint32(len(orig) - 14 - 20 - 20)
	before := sh.n.Load()
	f, g = s.superframe(s.mss-200, 0x18, 4)
	g = hw.GSO{NeedsCsum: true, CsumStart: g.CsumStart, CsumOffset: g.CsumOffset}
	orig = bytes.Clone(f)
	s.inject(f, g)
	segs = nil
	for end := time.Now().Add(5 * time.Second); len(segs) < 1 && time.Now().Before(end); {
		got, _, _ := s.oursAndOthers(t)
		segs = append(segs, got...)
		time.Sleep(5 * time.Millisecond)
	}
	if n := sh.n.Load() - before; n != 1 {
		t.Fatalf("the shaper saw %d frames of one with a partial checksum, want 1", n)
	}
	s.checkSegments(t, segs, orig)
}
