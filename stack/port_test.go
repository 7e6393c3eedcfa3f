package stack

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/gvrouter/gvrouter/hw"
)

// portSink records what a port's capture is given: each frame's ring
// header tag beside its data.
type portSink struct {
	mu   sync.Mutex
	tcis []uint16 // VLANTCI of each frame, 0 if VLANValid was false
}

func (s *portSink) CaptureRx(frames []hw.Frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range frames {
		tci := uint16(0)
		if f.VLANValid {
			tci = f.VLANTCI
		}
		s.tcis = append(s.tcis, tci)
	}
}

func (s *portSink) CaptureTx([][]byte, int) {}

func (s *portSink) seen() []uint16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint16(nil), s.tcis...)
}

// TestPortInput checks the data path's entry: with no trunk a batch is a
// counted drop that no capture sees; with one the batch reaches the
// trunk's interface (which answers an ARP request on VLAN 2), and a
// capture sees it first, its tag still in the ring header, until the
// sink is removed.
func TestPortInput(t *testing.T) {
	l := newTrunkLab(t)
	arp := func() []hw.Frame {
		d := arpRequest(netip.MustParseAddr("203.0.113.2"))
		return []hw.Frame{{Data: d, WireLen: len(d), VLANValid: true, VLANTCI: 2, VLANTPID: 0x8100}}
	}
	var in PortInput
	sink := &portSink{}
	in.SetCapture(sink)

	in.HandleBatch(0, arp())
	if got := in.Dropped(); got != 1 {
		t.Fatalf("no trunk: Dropped() = %d, want 1", got)
	}
	if got := sink.seen(); len(got) != 0 {
		t.Fatalf("no trunk: capture saw %v, want nothing", got)
	}

	in.SetTrunk(l.t)
	in.HandleBatch(0, arp())
	l.waitFrames(t, 1)
	if got := sink.seen(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("capture saw tags %v, want [2] (before the trunk took the tag)", got)
	}
	if got := in.Dropped(); got != 1 {
		t.Errorf("with a trunk: Dropped() = %d, want still 1", got)
	}

	in.SetCapture(nil)
	in.HandleBatch(0, arp())
	l.waitFrames(t, 1)
	if got := sink.seen(); len(got) != 1 {
		t.Errorf("after SetCapture(nil): capture saw %d frames, want still 1", len(got))
	}

	in.SetTrunk(nil)
	in.HandleBatch(0, arp())
	if got := in.Dropped(); got != 2 {
		t.Errorf("trunk removed: Dropped() = %d, want 2", got)
	}
}

// TestPortInputAllocs checks that the entry adds no allocation, with
// and without a capture sink, on a batch the trunk drops (a VLAN with no
// interface).
func TestPortInputAllocs(t *testing.T) {
	l := newTrunkLab(t)
	var in PortInput
	in.SetTrunk(l.t)
	d := arpRequest(netip.MustParseAddr("203.0.113.2"))
	frames := []hw.Frame{{Data: d, WireLen: len(d), VLANValid: true, VLANTCI: 99, VLANTPID: 0x8100}}
	if a := testing.AllocsPerRun(1000, func() { in.HandleBatch(0, frames) }); a != 0 {
		t.Errorf("no capture: %v allocations, want 0", a)
	}
	in.SetCapture(nopSink{})
	if a := testing.AllocsPerRun(1000, func() { in.HandleBatch(0, frames) }); a != 0 {
		t.Errorf("with a capture: %v allocations, want 0", a)
	}
}

type nopSink struct{}

func (nopSink) CaptureRx([]hw.Frame)    {}
func (nopSink) CaptureTx([][]byte, int) {}
