package stack

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// rxqSink is a next stage that records what the queue hands it: each
// frame's flow tag (the UDP source port, 0 for a ping) and sequence
// number, in order. The queue runs on the test's goroutine (as on the
// port's receive loop), so the test fills it by calling HandleRing
// without serving it.
type rxqSink struct {
	mu      sync.Mutex
	got     []rxqRec
	batches []int
	// inside detects overlapping calls for one queue.
	inside  atomic.Int32
	overlap atomic.Bool
	count   atomic.Int64
}

type rxqRec struct {
	tag uint16
	seq uint32
}

func (s *rxqSink) handle(queue int, frames []hw.Frame) {
	if s.inside.Add(1) != 1 {
		s.overlap.Store(true)
	}
	defer s.inside.Add(-1)
	s.mu.Lock()
	for i := range frames {
		s.got = append(s.got, recOf(frames[i].Data))
	}
	s.batches = append(s.batches, len(frames))
	s.mu.Unlock()
	s.count.Add(int64(len(frames)))
}

// recOf reads the tag and sequence number back out of a test frame.
func recOf(f []byte) rxqRec {
	ip := f[header.EthernetMinimumSize:]
	if ip[9] != uint8(header.UDPProtocolNumber) {
		return rxqRec{0, uint32(binary.BigEndian.Uint16(ip[header.IPv4MinimumSize+6:]))}
	}
	udp := ip[header.IPv4MinimumSize:]
	return rxqRec{binary.BigEndian.Uint16(udp[0:]), binary.BigEndian.Uint32(udp[8:])}
}

// drain serves queue 0 as a port's loop does when its ring is empty,
// until it holds nothing, and checks that the sink then has n frames.
func (s *rxqSink) drain(t *testing.T, q *RxQueue, n int64) {
	t.Helper()
	for i := 0; q.ServeBacklog(0); i++ {
		if i > rxqSlots+rxqBigSlots {
			t.Fatalf("ServeBacklog still serving after %d calls", i)
		}
	}
	if got := s.count.Load(); got != n {
		t.Fatalf("sink got %d frames, want %d", got, n)
	}
	if st := q.Stats(); st.Backlog != 0 || st.BacklogBytes != 0 {
		t.Fatalf("served empty, Stats() backlog %d frames %d bytes", st.Backlog, st.BacklogBytes)
	}
}

// bulkFrame is a UDP frame of flow tag (its source port) carrying seq,
// size bytes of UDP payload.
func bulkFrame(tag uint16, seq uint32, size int) []byte {
	p := make([]byte, size)
	binary.BigEndian.PutUint32(p, seq)
	return udp4Frame(routerMAC, netip.AddrPortFrom(hostIP4, tag), netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), 5001), p)
}

// pingFrame is an ICMP echo request with sequence number seq.
func pingFrame(seq uint16) []byte {
	return ethFrame(routerMAC, hostMAC, header.IPv4ProtocolNumber,
		ipv4Packet(hostIP4, netip.MustParseAddr("192.0.2.1"), 64, header.ICMPv4ProtocolNumber, icmpEcho(7, seq, make([]byte, 56))))
}

func framesOf(bufs ...[]byte) []hw.Frame {
	fs := make([]hw.Frame, len(bufs))
	for i, b := range bufs {
		fs[i] = hw.Frame{Data: b, WireLen: len(b)}
	}
	return fs
}

func newTestRxQueue(t *testing.T, next hw.BatchHandler) *RxQueue {
	t.Helper()
	goroutineLeakCheck(t)
	s := NewRxQueue(next, 1500+hw.MaxL2Overhead)
	t.Cleanup(s.Close)
	return s
}

// TestRxQueuePassThrough: a batch that finds the queue empty goes on at
// once, on the caller's goroutine, without a copy, when it is small or
// the ring has nothing behind it; a large batch with more behind it is
// queued, and so is everything after it until the queue is empty.
func TestRxQueuePassThrough(t *testing.T) {
	var got []hw.Frame
	s := newTestRxQueue(t, func(queue int, frames []hw.Frame) { got = append(got, frames...) })
	var bulk [][]byte
	for i := range 100 {
		bulk = append(bulk, bulkFrame(1000, uint32(i), 1000))
	}
	for _, tt := range []struct {
		name   string
		frames []hw.Frame
		more   bool
		passed bool
	}{
		{"small, more behind", framesOf(pingFrame(1), bulkFrame(1000, 1, 100)), true, true},
		{"large, nothing behind", framesOf(bulk...), false, true},
		{"large, more behind", framesOf(bulk...), true, false},
		{"small, queue not empty", framesOf(pingFrame(2)), false, false},
	} {
		got = got[:0]
		before := s.Stats()
		s.HandleRing(0, tt.frames, tt.more)
		st := s.Stats()
		passed, queued := st.Passed-before.Passed, st.Queued-before.Queued
		if tt.passed {
			if len(got) != len(tt.frames) || &got[0].Data[0] != &tt.frames[0].Data[0] {
				t.Errorf("%s: next got %d frames (copies or none), want the %d given", tt.name, len(got), len(tt.frames))
			}
			if passed != uint64(len(tt.frames)) || queued != 0 {
				t.Errorf("%s: passed %d queued %d, want %d, 0", tt.name, passed, queued, len(tt.frames))
			}
			continue
		}
		if len(got) != 0 {
			t.Errorf("%s: next got %d frames before the queue was served, want 0", tt.name, len(got))
		}
		if passed != 0 || queued != uint64(len(tt.frames)) {
			t.Errorf("%s: passed %d queued %d, want 0, %d", tt.name, passed, queued, len(tt.frames))
		}
	}
	if st := s.Stats(); st.Backlog != 101 {
		t.Errorf("Stats().Backlog = %d, want 101", st.Backlog)
	}
	// HandleBatch (a port that serves no Backlog) leaves nothing
	// queued behind it, and the ping it brings comes after the one
	// held (one flow, in order).
	got = got[:0]
	s.HandleBatch(0, framesOf(pingFrame(3)))
	var pings []rxqRec
	for _, f := range got {
		if r := recOf(f.Data); r.tag == 0 {
			pings = append(pings, r)
		}
	}
	if st := s.Stats(); st.Backlog != 0 || len(got) != 102 || len(pings) != 2 || pings[0].seq != 2 || pings[1].seq != 3 {
		t.Errorf("after HandleBatch: backlog %d, %d frames handed on, pings %v; want 0, 102, pings 2 then 3", st.Backlog, len(got), pings)
	}
}

// TestRxQueueSparseFirst: a ping that arrives behind a bulk flow's
// backlog is handed on first in the next batch (RFC 8290's new flows),
// not after the backlog as a FIFO (the ring) would.
func TestRxQueueSparseFirst(t *testing.T) {
	sink := &rxqSink{}
	s := newTestRxQueue(t, sink.handle)
	var bulk [][]byte
	for i := range 200 {
		bulk = append(bulk, bulkFrame(1000, uint32(i), 1000))
	}
	s.HandleRing(0, framesOf(bulk...), true)
	if !s.ServeBacklog(0) { // the first batch (rxqBatch frames)
		t.Fatal("ServeBacklog handed nothing on with 200 frames queued")
	}
	var second [][]byte
	for i := 200; i < 300; i++ {
		second = append(second, bulkFrame(1000, uint32(i), 1000))
	}
	second = append(second, pingFrame(1))
	s.HandleRing(0, framesOf(second...), true)
	sink.drain(t, s, 301)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	ping := -1
	for i, r := range sink.got {
		if r.tag == 0 {
			ping = i
		}
	}
	if ping != rxqBatch {
		t.Errorf("ping handed on as frame %d, want %d (first of the batch after the one served); batches %v", ping, rxqBatch, sink.batches)
	}
	if sink.overlap.Load() {
		t.Errorf("calls for queue 0 overlapped")
	}
}

// TestRxQueueFlowOrder: frames of many flows, in batches of every size,
// come out each flow in order, every frame either handed on or counted
// as over the limit, whether batches pass or are queued, and however
// reading and serving interleave.
func TestRxQueueFlowOrder(t *testing.T) {
	sink := &rxqSink{}
	s := newTestRxQueue(t, sink.handle)
	// A still clock: the test is about order and the queue's limit, not
	// CoDel, whose drops (frames that waited past its target on a loaded
	// machine under -race) the count below does not expect.
	still := time.Now()
	s.clock = func() time.Time { return still }
	const flows = 20
	var seq [flows]uint32
	total := 0
	for b := range 200 {
		n := 1 + b*7%150
		var bufs [][]byte
		for i := range n {
			f := (b*31 + i*i) % flows
			bufs = append(bufs, bulkFrame(uint16(2000+f), seq[f], 64+(i*97)%1200))
			seq[f]++
		}
		s.HandleRing(0, framesOf(bufs...), b%3 != 0)
		total += n
		for range b % 4 {
			s.ServeBacklog(0)
		}
		if b%10 == 9 {
			// Now and then the loop catches up, so that batches
			// find the queue empty and pass.
			sink.drain(t, s, int64(total)-int64(s.Stats().Overlimit))
		}
	}
	sink.drain(t, s, int64(total)-int64(s.Stats().Overlimit))
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var next [flows]uint32
	for _, r := range sink.got {
		f := r.tag - 2000
		if r.seq < next[f] {
			t.Fatalf("flow %d: got seq %d after %d", f, r.seq, next[f]-1)
		}
		next[f] = r.seq + 1
	}
	if sink.overlap.Load() {
		t.Errorf("calls for queue 0 overlapped")
	}
	st := s.Stats()
	if st.Passed+st.Queued != uint64(total) || st.Queued == 0 || st.Passed == 0 {
		t.Errorf("Stats() = passed %d queued %d, want both > 0 summing to %d", st.Passed, st.Queued, total)
	}
	if got := uint64(len(sink.got)) + st.Overlimit; got != uint64(total) {
		t.Errorf("handed on %d + over limit %d != %d sent", len(sink.got), st.Overlimit, total)
	}
}

// TestRxQueueOverlimit: read faster than it is served, the queue fills;
// frames are dropped from the fattest flow and counted, and a thin
// flow's frames all get through.
func TestRxQueueOverlimit(t *testing.T) {
	sink := &rxqSink{}
	s := newTestRxQueue(t, sink.handle)
	sent := 0
	thin := 0
	for b := 0; b < (rxqSlots+1000)/100; b++ {
		var bufs [][]byte
		for i := range 100 {
			bufs = append(bufs, bulkFrame(1000, uint32(b*100+i), 1000))
		}
		bufs = append(bufs, bulkFrame(3000, uint32(b), 100))
		thin++
		s.HandleRing(0, framesOf(bufs...), true)
		sent += len(bufs)
	}
	st := s.Stats()
	if st.Overlimit == 0 {
		t.Fatalf("Stats().Overlimit = 0 after %d frames read and none served", sent)
	}
	sink.drain(t, s, int64(sent)-int64(st.Overlimit))
	sink.mu.Lock()
	defer sink.mu.Unlock()
	n := 0
	for _, r := range sink.got {
		if r.tag == 3000 {
			n++
		}
	}
	if n != thin {
		t.Errorf("thin flow: %d of %d frames got through", n, thin)
	}
	if got := uint64(len(sink.got)) + s.Stats().Overlimit; got != uint64(sent) {
		t.Errorf("handed on + overlimit = %d, want %d sent", got, sent)
	}
}

// TestRxQueueSojourn: the queue measures a frame's wait from the
// kernel's receive timestamp, and believes no timestamp from the future
// or from long ago.
func TestRxQueueSojourn(t *testing.T) {
	sink := &rxqSink{}
	s := newTestRxQueue(t, sink.handle)
	base := time.Now()
	var offset atomic.Int64
	s.clock = func() time.Time { return base.Add(time.Duration(offset.Load())) }
	s.base = s.clock()
	for _, tt := range []struct {
		name string
		age  time.Duration // how long before "now" the kernel stamped it
		want time.Duration // MaxSojourn afterwards
	}{
		{"3ms in the ring", 3 * time.Millisecond, 3 * time.Millisecond},
		{"from the future", -time.Hour, 0},
		{"an hour old", time.Hour, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			offset.Add(int64(10 * time.Second)) // a fresh sojourn window
			now := s.clock()
			var bufs [][]byte
			for i := range 40 {
				bufs = append(bufs, bulkFrame(1000, uint32(i), 1000))
			}
			fs := framesOf(bufs...)
			for i := range fs {
				fs[i].RxTime = now.Add(-tt.age).UnixNano()
			}
			c := sink.count.Load()
			s.HandleRing(0, fs, true)
			sink.drain(t, s, c+40)
			if got := s.Stats().MaxSojourn; got != tt.want {
				t.Errorf("MaxSojourn = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRxQueueClose: what is queued when the port stops is still handed
// on.
func TestRxQueueClose(t *testing.T) {
	sink := &rxqSink{}
	s := newTestRxQueue(t, sink.handle)
	var bufs [][]byte
	for i := range 300 {
		bufs = append(bufs, bulkFrame(1000, uint32(i), 500))
	}
	s.HandleRing(0, framesOf(bufs...), true)
	if n := sink.count.Load(); n != 0 {
		t.Fatalf("before Close the sink has %d frames, want 0 (queued)", n)
	}
	s.Close()
	if n := sink.count.Load(); n != 300 {
		t.Errorf("after Close the sink has %d frames, want 300", n)
	}
}

// TestRxQueueAllocs: queuing and serving allocate nothing per packet
// once the queue's memory exists.
func TestRxQueueAllocs(t *testing.T) {
	var n int
	const batch = 150
	s := newTestRxQueue(t, func(queue int, frames []hw.Frame) { n += len(frames) })
	var bufs [][]byte
	for i := range batch {
		bufs = append(bufs, bulkFrame(uint16(1000+i%8), uint32(i), 1200))
	}
	fs := framesOf(bufs...)
	run := func() {
		n = 0
		s.HandleRing(0, fs, true)
		for s.ServeBacklog(0) {
		}
		if n != batch {
			t.Fatalf("served %d frames, want %d", n, batch)
		}
	}
	run() // the queue's memory
	if a := testing.AllocsPerRun(100, run); a != 0 {
		t.Errorf("HandleBatch and serve: %.1f allocations per batch of %d, want 0", a, batch)
	}
}

// TestRxQueueCoDel: a flow whose frames keep waiting more than CoDel's
// target for an interval loses frames (RFC 8289), or, ECN-capable, gets
// them marked CE with a valid IPv4 header checksum (RFC 3168); a flow
// below the target loses none. The queue is driven by hand, on a clock
// of the test's.
func TestRxQueueCoDel(t *testing.T) {
	for _, tt := range []struct {
		name       string
		tos        uint8
		standingMs int64 // how long each frame has waited at dequeue
		drops      bool
		marks      bool
	}{
		{"standing queue, not ECT", 0, 20, true, false},
		{"standing queue, ECT(0)", 2, 20, false, true},
		{"below target", 2, 2, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := NewRxQueue(func(int, []hw.Frame) {}, 1500+hw.MaxL2Overhead)
			defer s.Close()
			q := newRxQueue(s, 0)
			const n = 400
			var bufs [][]byte
			for i := range n {
				f := bulkFrame(1000, uint32(i), 1000)
				ip := header.IPv4(f[header.EthernetMinimumSize:])
				ip.SetTOS(tt.tos, 0)
				ip.SetChecksum(0)
				ip.SetChecksum(^ip.CalculateChecksum())
				bufs = append(bufs, f)
			}
			// Frame i arrives at i ms and leaves at i + standing ms:
			// one frame a millisecond in and out, for 400 ms.
			var c dequeueCounts
			out := make([]int32, 0, 1)
			got := 0
			for i := range n {
				q.enqueueLocked(framesOf(bufs[i]), 0, int64(i)*1e6, -1)
				if i < int(tt.standingMs) {
					continue
				}
				out = q.dequeueLocked(int64(i)*1e6, out[:0], &c)
				for _, idx := range out {
					h := header.IPv4(q.slots[idx].f.Data[header.EthernetMinimumSize:])
					if !h.IsChecksumValid() {
						t.Fatalf("frame %d: IPv4 header checksum invalid", got)
					}
					if tos, _ := h.TOS(); tos&3 == 3 && !tt.marks {
						t.Fatalf("frame %d marked CE", got)
					}
					got++
				}
				q.releaseLocked(out)
			}
			if (c.dropped > 0) != tt.drops || (c.marked > 0) != tt.marks {
				t.Errorf("dropped %d, marked %d; want drops %v, marks %v", c.dropped, c.marked, tt.drops, tt.marks)
			}
			if int(c.dropped)+got+q.backlog != n {
				t.Errorf("dropped %d + handed on %d + queued %d != %d", c.dropped, got, q.backlog, n)
			}
		})
	}
}

// TestRxQueueHoldRing: frames held where they lie in the ring
// (hw.RingHolder) are served from there, in each flow's order, and each
// ring block is handed back once the queue holds none of its frames;
// past hw.RingHeldBlocks the oldest block's frames still queued are
// copied (LetGo, counted in Copied) before it goes back, so a block the
// kernel then overwrites spoils none of them. Frames served as fast as
// they come are never copied, and none allocates.
func TestRxQueueHoldRing(t *testing.T) {
	sink := &rxqSink{}
	s := newTestRxQueue(t, sink.handle)
	still := time.Now()
	s.clock = func() time.Time { return still }
	const blockSize = 64 << 10
	ring := make([][]byte, hw.RingBlocks)
	for i := range ring {
		ring[i] = make([]byte, blockSize)
	}
	var l ringLoop
	returned := map[int]bool{}
	l.returned = func(blk int) {
		// The kernel fills the block again.
		for i := range ring[blk] {
			ring[blk][i] = 0xee
		}
		returned[blk] = true
	}
	const flows = 5
	var seq [flows]uint32
	total := 0
	// block writes a batch of n frames into ring block blk, as the
	// kernel does, and returns them.
	block := func(blk, n int) []hw.Frame {
		if !returned[blk] && total > 0 && l.held > 0 {
			for k := range l.held {
				if (l.next-1-k+hw.RingBlocks)%hw.RingBlocks == blk {
					t.Fatalf("block %d refilled while the loop still held it", blk)
				}
			}
		}
		delete(returned, blk)
		var fs []hw.Frame
		off := 0
		for i := range n {
			f := (blk*7 + i*i) % flows
			b := bulkFrame(uint16(3000+f), seq[f], 200+(i*131)%1000)
			seq[f]++
			d := ring[blk][off : off+len(b) : off+len(b)]
			copy(d, b)
			off += len(b)
			fs = append(fs, hw.Frame{Data: d, WireLen: len(d)})
		}
		total += n
		return fs
	}
	var copiedLate uint64
	for b := range 60 {
		if b == 45 {
			copiedLate = s.Stats().Copied
		}
		blk := b % hw.RingBlocks
		l.hold(s, block(blk, 20+b*13%40), blk)
		// Served slower than read for a while (so that blocks must
		// be let go), then faster.
		serves := 0
		if b >= 30 {
			serves = 2
		} else if b%4 == 0 {
			serves = 1
		}
		for range serves {
			s.ServeBacklog(0)
			l.giveBack(s)
		}
	}
	for s.ServeBacklog(0) {
		l.giveBack(s)
	}
	l.giveBack(s)
	if l.held != 0 {
		t.Fatalf("served empty, the loop still holds %d blocks (Holding: %d)", l.held, s.Holding(0, (l.next-l.held+hw.RingBlocks)%hw.RingBlocks))
	}
	st := s.Stats()
	sink.mu.Lock()
	var next [flows]uint32
	for _, r := range sink.got {
		f := int(r.tag) - 3000
		if f < 0 || f >= flows {
			t.Fatalf("got a frame of tag %d: a frame was read after its block went back", r.tag)
		}
		if r.seq < next[f] {
			t.Fatalf("flow %d: got seq %d after %d", f, r.seq, next[f]-1)
		}
		next[f] = r.seq + 1
	}
	got := len(sink.got)
	sink.mu.Unlock()
	if uint64(got)+st.Overlimit != uint64(total) {
		t.Errorf("handed on %d + over limit %d != %d sent", got, st.Overlimit, total)
	}
	if l.copied == 0 || st.Copied == 0 {
		t.Errorf("no block was let go with frames held (LetGo calls %d, Copied %d): the test did not fill the ring", l.copied, st.Copied)
	}
	if late := st.Copied - copiedLate; late != 0 {
		t.Errorf("Copied %d frames of the last 15 blocks, served as fast as they came; want 0", late)
	}
	t.Logf("sent %d: queued %d, passed %d, copied %d (%d blocks let go), over limit %d", total, st.Queued, st.Passed, st.Copied, l.copied, st.Overlimit)

	fs := block(0, 60)
	l.returned = nil
	run := func() {
		l.hold(s, fs, 0)
		for s.ServeBacklog(0) {
			l.giveBack(s)
		}
	}
	run()
	if a := testing.AllocsPerRun(100, run); a != 0 {
		t.Errorf("HoldRing and serve: %.1f allocations per batch, want 0", a)
	}
}
