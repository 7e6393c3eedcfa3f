package stack

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// recordingSink keeps what a CaptureSink is given, as the capture
// package's Point would write it: tags stripped.
type recordingSink struct {
	mu     sync.Mutex
	rx, tx [][]byte
}

func (s *recordingSink) CaptureRx(frames []hw.Frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range frames {
		if f.VLANValid {
			panic("interface capture got a frame with its tag in the ring header")
		}
		s.rx = append(s.rx, bytes.Clone(f.Data))
	}
}

func (s *recordingSink) CaptureTx(frames [][]byte, strip int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range frames {
		s.tx = append(s.tx, append(bytes.Clone(f[:12]), f[12+strip:]...))
	}
}

// TestInterfaceCapture checks that a VLAN interface's sink sees its
// frames untagged in both directions, as many as its counters say, and
// nothing once removed.
func TestInterfaceCapture(t *testing.T) {
	l := newTrunkLab(t)
	sink := &recordingSink{}
	l.wan.SetCapture(sink)
	echo := ipv4Packet(netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("203.0.113.2"), 64, header.ICMPv4ProtocolNumber, icmpEcho(7, 1, []byte("vlan ping")))
	in := ethFrame(routerMAC, hostMAC, header.IPv4ProtocolNumber, echo)
	l.t.HandleBatch(0, []hw.Frame{{Data: bytes.Clone(in), VLANValid: true, VLANTCI: 2}})
	out := l.waitFrames(t, 1)[0] // ARP request or the reply, tagged
	// A frame for another VLAN is not eth0.2's.
	l.t.HandleBatch(0, []hw.Frame{{Data: bytes.Clone(in), VLANValid: true, VLANTCI: 1}})
	l.waitFrames(t, 0)

	sink.mu.Lock()
	rx, tx := sink.rx, sink.tx
	sink.mu.Unlock()
	st := l.wan.Stats()
	if uint64(len(rx)) != st.RxPackets || uint64(len(tx)) != st.TxPackets || len(rx) != 1 || len(tx) != 1 {
		t.Fatalf("captured %d rx, %d tx; counters %d rx, %d tx; want 1 each, equal", len(rx), len(tx), st.RxPackets, st.TxPackets)
	}
	if !bytes.Equal(rx[0], in) {
		t.Errorf("rx = %x, want the untagged frame %x", rx[0], in)
	}
	if want := append(bytes.Clone(out[:12]), out[16:]...); !bytes.Equal(tx[0], want) {
		t.Errorf("tx = %x, want the sent frame without its tag %x", tx[0], want)
	}
	if et := binary.BigEndian.Uint16(tx[0][12:]); isTPID(et) {
		t.Errorf("tx EtherType %#x: still tagged", et)
	}

	l.wan.SetCapture(nil)
	l.t.HandleBatch(0, []hw.Frame{{Data: bytes.Clone(in), VLANValid: true, VLANTCI: 2}})
	l.waitFrames(t, 1)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.rx) != 1 || len(sink.tx) != 1 {
		t.Errorf("after SetCapture(nil): %d rx, %d tx, want 1, 1", len(sink.rx), len(sink.tx))
	}
}

// TestFastPathCapture checks that an offloaded flow's frames are seen as
// they enter (on the LAN interface, from the LAN host) and as they leave
// (on the WAN interface, masqueraded), as many as the counters say.
func TestFastPathCapture(t *testing.T) {
	l, nat := newNATLab(t, nil)
	peers := remoteServer(t, l.b, netip.AddrPortFrom(bIP4, 5001))
	c := dial(t, l.a, netip.AddrPortFrom(bIP4, 5001))
	exchange(t, c, 64<<10)
	peer(t, peers)
	lan, wan := l.r.Interface("lan"), l.r.Interface("wan")
	ls, ws := &recordingSink{}, &recordingSink{}
	waitQuiet(t, lan, wan)
	lan0, wan0 := lan.Stats(), wan.Stats()
	lan.SetCapture(ls)
	wan.SetCapture(ws)
	hits0 := nat.Stats().FastPathHits.Load()
	exchange(t, c, 1<<20)
	waitQuiet(t, lan, wan)
	lan.SetCapture(nil)
	wan.SetCapture(nil)
	lan1, wan1 := lan.Stats(), wan.Stats()
	if hits := nat.Stats().FastPathHits.Load() - hits0; hits < 200 {
		t.Fatalf("fast path forwarded %d packets, want >= 200", hits)
	}
	ls.mu.Lock()
	ws.mu.Lock()
	defer ls.mu.Unlock()
	defer ws.mu.Unlock()
	// The sink is set and removed between transfers, when no frame has
	// moved for a while (a delayed ACK included), so the numbers are exact.
	if got, want := uint64(len(ls.rx)), lan1.RxPackets-lan0.RxPackets; got != want {
		t.Errorf("lan: captured %d received frames, counters say %d", got, want)
	}
	if got, want := uint64(len(ws.tx)), wan1.TxPackets-wan0.TxPackets; got != want {
		t.Errorf("wan: captured %d sent frames, counters say %d", got, want)
	}
	src := func(f []byte) netip.Addr {
		if len(f) < 34 || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
			return netip.Addr{}
		}
		return netip.AddrFrom4([4]byte(f[26:30]))
	}
	var in, out int
	for _, f := range ls.rx {
		if src(f) == aIP4 {
			in++
		}
	}
	for _, f := range ws.tx {
		switch src(f) {
		case wanIP4:
			out++
		case aIP4:
			t.Fatalf("wan sent a frame from the LAN host's address: not rewritten: %x", f[:34])
		}
	}
	if in < 200 || out < 200 {
		t.Errorf("%d frames from the LAN host in, %d masqueraded out, want >= 200 each", in, out)
	}
}

// waitQuiet returns once the interfaces' packet counters have not moved
// for longer than a delayed ACK takes, so that a sink set or removed
// next sees no frame in flight (slow machines and emulators delay the
// last ACKs of a transfer past its echo).
func waitQuiet(t *testing.T, ifs ...*Interface) {
	t.Helper()
	sum := func() (n uint64) {
		for _, i := range ifs {
			st := i.Stats()
			n += st.RxPackets + st.TxPackets
		}
		return n
	}
	last, since := sum(), time.Now()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n := sum(); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > 500*time.Millisecond {
			return
		}
	}
	t.Fatalf("interfaces still moving frames after 20 s")
}
