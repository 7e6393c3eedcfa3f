package stack

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
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
