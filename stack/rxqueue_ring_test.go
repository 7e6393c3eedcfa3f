package stack

import (
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// ectFrame is bulkFrame with ECT(0) in its IPv4 header (RFC 3168).
func ectFrame(tag uint16, seq uint32, size int) []byte {
	f := bulkFrame(tag, seq, size)
	ip := header.IPv4(f[header.EthernetMinimumSize:])
	ip.SetTOS(2, 0)
	ip.SetChecksum(0)
	ip.SetChecksum(^ip.CalculateChecksum())
	return f
}

// stamped returns frames of bufs received age before now.
func stamped(now time.Time, age time.Duration, bufs ...[]byte) []hw.Frame {
	fs := framesOf(bufs...)
	for i := range fs {
		fs[i].RxTime = now.Add(-age).UnixNano()
	}
	return fs
}

// TestRxQueueRingSparseFirst: in a judged batch the sparse flows' frames
// go first, the bulk flows' after them, each flow in its order.
func TestRxQueueRingSparseFirst(t *testing.T) {
	sink := &rxqSink{}
	s := newTestRxQueue(t, sink.handle)
	now := time.Now()
	s.clock = func() time.Time { return now }
	var bufs [][]byte
	var want []rxqRec
	for i := range 30 {
		bufs = append(bufs, ectFrame(1000, uint32(i), 1000), ectFrame(2000, uint32(i), 1000))
		if i == 10 || i == 20 {
			bufs = append(bufs, pingFrame(uint16(i)))
			want = append(want, rxqRec{0, uint32(i)})
		}
		if i == 15 {
			bufs = append(bufs, ectFrame(3000, 1, 100), ectFrame(3000, 2, 100))
			want = append(want, rxqRec{3000, 1}, rxqRec{3000, 2})
		}
	}
	for i := range 30 {
		want = append(want, rxqRec{1000, uint32(i)}, rxqRec{2000, uint32(i)})
	}
	s.HandleRing(0, stamped(now, 3*time.Millisecond, bufs...), true)
	if len(sink.got) != len(want) {
		t.Fatalf("next got %d frames, want %d", len(sink.got), len(want))
	}
	// The two bulk flows keep their interleaving: compare each flow's
	// order and the sparse prefix exactly.
	for i := range 4 {
		if sink.got[i] != want[i] {
			t.Errorf("frame %d = %+v, want %+v (sparse flows first)", i, sink.got[i], want[i])
		}
	}
	next := map[uint16]uint32{}
	for i, r := range sink.got[4:] {
		if r.seq != next[r.tag] {
			t.Fatalf("frame %d = %+v, want seq %d of flow %d", i+4, r, next[r.tag], r.tag)
		}
		next[r.tag]++
	}
}

// TestRxQueueRingAllocs: judging a ring batch allocates nothing per
// frame once the queue's notes exist.
func TestRxQueueRingAllocs(t *testing.T) {
	var n int
	const batch = 150
	s := newTestRxQueue(t, func(queue int, frames []hw.Frame) { n += len(frames) })
	now := time.Now()
	s.clock = func() time.Time { return now }
	var bufs [][]byte
	for i := range batch {
		bufs = append(bufs, ectFrame(uint16(1000+i%8), uint32(i), 1200))
	}
	fs := stamped(now, 3*time.Millisecond, bufs...)
	run := func() {
		n = 0
		s.HandleRing(0, fs, true)
		if n != batch {
			t.Fatalf("handed on %d frames, want %d", n, batch)
		}
	}
	run() // the queue's memory
	if a := testing.AllocsPerRun(100, run); a != 0 {
		t.Errorf("ring mode: %.1f allocations per batch of %d, want 0", a, batch)
	}
}
