package hw

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

var ringModes = []TxMode{TxRing, TxRingBypass}

// seqFrameLen is the length of test frame seq: every length from 60 to
// 1514 comes up, so slots are filled with frames of all sizes.
func seqFrameLen(seq uint64) int { return 60 + int(seq*7%1455) }

// seqFrame writes test frame seq into buf (at least 1514 bytes) and
// returns it: broadcast, EtherType EtherTypeExperimental, an 8-byte
// sequence number, then bytes that depend on seq and their offset.
func seqFrame(buf []byte, seq uint64) []byte {
	f := buf[:seqFrameLen(seq)]
	copy(f, netnstest.Broadcast)
	copy(f[6:], []byte{2, 0, 0, 0, 0, 0x20})
	binary.BigEndian.PutUint16(f[12:], netnstest.EtherTypeExperimental)
	binary.BigEndian.PutUint64(f[14:], seq)
	for j := 22; j < len(f); j++ {
		f[j] = byte(seq) ^ byte(j)
	}
	return f
}

// seqReceiver checks test frames as a port receives them: each intact,
// each sequence number above the last. Other frames are counted apart.
type seqReceiver struct {
	n, other atomic.Uint64
	last     atomic.Int64 // last sequence number seen, -1 before any
	gaps     atomic.Uint64
	mu       sync.Mutex
	bad      []string // the first problems, for the report
}

func newSeqReceiver() *seqReceiver {
	r := &seqReceiver{}
	r.last.Store(-1)
	return r
}

func (r *seqReceiver) fail(format string, args ...any) {
	r.mu.Lock()
	if len(r.bad) < 5 {
		r.bad = append(r.bad, fmt.Sprintf(format, args...))
	}
	r.mu.Unlock()
}

func (r *seqReceiver) handle(_ int, frames []Frame) {
	for _, f := range frames {
		d := f.Data
		if len(d) < 22 || binary.BigEndian.Uint16(d[12:]) != netnstest.EtherTypeExperimental {
			r.other.Add(1)
			continue
		}
		seq := binary.BigEndian.Uint64(d[14:])
		if len(d) != seqFrameLen(seq) {
			r.fail("frame %d: %d bytes, want %d", seq, len(d), seqFrameLen(seq))
		}
		for j := 22; j < len(d); j++ {
			if d[j] != byte(seq)^byte(j) {
				r.fail("frame %d: byte %d = %#x, want %#x", seq, j, d[j], byte(seq)^byte(j))
				break
			}
		}
		if last := r.last.Load(); int64(seq) <= last {
			r.fail("frame %d after frame %d", seq, last)
		} else if int64(seq) != last+1 {
			r.gaps.Add(1)
		}
		r.last.Store(int64(seq))
		r.n.Add(1)
	}
}

func (r *seqReceiver) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bad {
		t.Error(b)
	}
}

// waitFor polls cond for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); !cond(); {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// txPair makes a namespace without IPv6 (no stray frames) with veth
// p0<->p1, opens p1 with tx to send and p0 to receive into a seqReceiver.
func txPair(t *testing.T, tx TxMode) (*netnstest.Netns, *Port, *Port, *seqReceiver) {
	t.Helper()
	n := netnstest.New(t, "hwt", netnstest.WithoutIPv6())
	vethPair(t, n, "p0", "p1")
	out := openIn(t, n, Config{Name: "p1", KeepKernel: true, Tx: tx})
	if out.TxMode() != tx {
		t.Fatalf("TxMode() = %q, want %q", out.TxMode(), tx)
	}
	in := openIn(t, n, Config{Name: "p0", KeepKernel: true})
	r := newSeqReceiver()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := in.Run(ctx, r.handle); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Run() = %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return n, out, in, r
}

// txDrops sums a port's transmit drops.
func txDrops(s Stats) uint64 {
	return s.Drops[DropTxError] + s.Drops[DropTxNoBufs] + s.Drops[DropTxRingFull] + s.Drops[DropTxOversize]
}

// rxDrops sums a port's receive drops.
func rxDrops(s Stats) uint64 {
	return s.Drops[DropTruncated] + s.Drops[DropOversize] + s.Drops[DropMalformed] + s.Drops[DropRing]
}

// TestTxRingInOrder: frames of every length sent through the TX ring, in
// batches that wrap the ring many times, arrive at the veth peer intact
// and in order, none lost; sendmmsg is held to the same.
func TestTxRingInOrder(t *testing.T) {
	privileged(t)
	for _, mode := range TxModes {
		t.Run(string(mode), func(t *testing.T) {
			_, out, _, r := txPair(t, mode)
			const batches = 40 // 5120 frames: the ring wraps ten times
			bufs := make([][]byte, TxBatchSize)
			for i := range bufs {
				bufs[i] = make([]byte, 1514)
			}
			batch := make([][]byte, TxBatchSize)
			var seq uint64
			for range batches {
				for i := range batch {
					batch[i] = seqFrame(bufs[i], seq)
					seq++
				}
				if n, err := out.WriteFrames(batch); n != len(batch) || err != nil {
					t.Fatalf("WriteFrames() = %d, %v; want %d, nil (stats %+v)", n, err, len(batch), out.Stats())
				}
				// Paced, so that the receiving ring never overflows.
				if !waitFor(2*time.Second, func() bool { return r.n.Load() == seq }) {
					t.Fatalf("received %d of %d frames", r.n.Load(), seq)
				}
			}
			r.check(t)
			s := out.Stats()
			if s.TxPackets != seq || txDrops(s) != 0 || r.gaps.Load() != 0 || r.other.Load() != 0 {
				t.Errorf("TxPackets %d, tx drops %d, gaps %d, other frames %d; want %d, 0, 0, 0 (%+v)", s.TxPackets, txDrops(s), r.gaps.Load(), r.other.Load(), seq, s)
			}
		})
	}
}

// TestTxRingRefused: a frame too short, one longer than the interface's
// MTU allows (the kernel marks its slot TP_STATUS_WRONG_FORMAT) and one
// longer than a slot are counted drops; the frames around them are sent,
// in order, and the ring goes on working.
func TestTxRingRefused(t *testing.T) {
	privileged(t)
	for _, mode := range ringModes {
		t.Run(string(mode), func(t *testing.T) {
			_, out, _, r := txPair(t, mode)
			buf := make([][]byte, 4)
			for i := range buf {
				buf[i] = make([]byte, 1514)
			}
			good := func(seq uint64) []byte { return seqFrame(buf[seq], seq) }
			// 1520 bytes fits a slot (MTU 1500 + MaxL2Overhead = 1522)
			// but not the kernel's 1514 for an untagged frame.
			refused := append(seqFrame(make([]byte, 1514), 1000)[:1514:1514], make([]byte, 6)...)
			oversize := make([]byte, out.MTU()+MaxL2Overhead+1)
			copy(oversize, refused)
			batch := [][]byte{good(0), make([]byte, 10), good(1), refused, good(2), oversize, good(3)}
			for round := range 3 { // the ring's head and the kernel's stay in step
				before := out.Stats()
				if n, err := out.WriteFrames(batch); n != 4 || err != nil {
					t.Fatalf("round %d: WriteFrames() = %d, %v; want 4, nil (stats %+v)", round, n, err, out.Stats())
				}
				s := out.Stats()
				if d := s.Drops[DropTxError] - before.Drops[DropTxError]; d != 2 {
					t.Errorf("round %d: tx_error +%d, want +2", round, d)
				}
				if d := s.Drops[DropTxOversize] - before.Drops[DropTxOversize]; d != 1 {
					t.Errorf("round %d: tx_oversize +%d, want +1", round, d)
				}
				want := uint64(4 * (round + 1))
				if !waitFor(2*time.Second, func() bool { return r.n.Load() == want }) {
					t.Fatalf("round %d: received %d frames, want %d", round, r.n.Load(), want)
				}
				r.last.Store(-1) // each round starts again at 0
			}
			r.check(t)
		})
	}
}

// TestTxRingFull: with a qdisc that holds frames (tbf at 8 kbit/s), the
// kernel keeps every slot it took; frames beyond the ring are counted
// tx_ring_full, WriteFrames neither blocks nor fails, and once the qdisc
// lets go of the frames the ring sends again. With PACKET_QDISC_BYPASS
// the qdisc is skipped and the ring never fills.
func TestTxRingFull(t *testing.T) {
	privileged(t)
	for _, mode := range ringModes {
		t.Run(string(mode), func(t *testing.T) {
			n, out, _, r := txPair(t, mode)
			n.Run(t, "tc", "qdisc", "replace", "dev", "p1", "root", "tbf", "rate", "8kbit", "burst", "1600", "limit", "100000000")
			slots := out.tx.nslots
			buf := make([]byte, 1514)
			// Not a test frame (another EtherType): the flood is not
			// in sequence.
			frame := append([]byte(nil), seqFrame(buf, 0)[:60]...)
			frame[13]++
			batch := make([][]byte, slots+100)
			for i := range batch {
				batch[i] = frame
			}
			start := time.Now()
			sent, err := out.WriteFrames(batch)
			if err != nil {
				t.Fatalf("WriteFrames() = %d, %v", sent, err)
			}
			sent2, err := out.WriteFrames(batch[:TxBatchSize])
			if err != nil {
				t.Fatalf("second WriteFrames() = %d, %v", sent2, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("WriteFrames took %v on a full ring", d)
			}
			s := out.Stats()
			offered := uint64(len(batch) + TxBatchSize)
			if s.TxPackets+txDrops(s) != offered || s.TxPackets != uint64(sent+sent2) {
				t.Errorf("TxPackets %d + tx drops %d != %d offered, or != %d+%d returned (%+v)", s.TxPackets, txDrops(s), offered, sent, sent2, s.Drops)
			}
			if mode == TxRingBypass {
				if s.Drops[DropTxRingFull] != 0 || s.TxPackets != offered {
					t.Errorf("with PACKET_QDISC_BYPASS: TxPackets %d, tx_ring_full %d; want %d, 0 (the qdisc skipped)", s.TxPackets, s.Drops[DropTxRingFull], offered)
				}
				return
			}
			full := s.Drops[DropTxRingFull]
			if sent < slots || full == 0 || sent2 > TxBatchSize/2 {
				t.Errorf("sent %d then %d, tx_ring_full %d; want >= %d (the ring) first, then mostly drops", sent, sent2, full, slots)
			}
			t.Logf("ring of %d slots: sent %d then %d, tx_ring_full %d", slots, sent, sent2, full)
			// Removing the qdisc frees what it holds; the slots come back.
			n.Run(t, "tc", "qdisc", "del", "dev", "p1", "root")
			if !waitFor(2*time.Second, func() bool { return out.tx.freeSlots() == slots }) {
				t.Fatalf("%d of %d slots free after the qdisc went", out.tx.freeSlots(), slots)
			}
			before := r.n.Load()
			r.last.Store(-1)
			for seq := range uint64(10) {
				if k, err := out.WriteFrames([][]byte{seqFrame(buf, seq)}); k != 1 || err != nil {
					t.Fatalf("WriteFrames after the ring drained = %d, %v; want 1, nil", k, err)
				}
			}
			if !waitFor(2*time.Second, func() bool { return r.n.Load() >= before+10 }) {
				t.Fatalf("received %d frames after the ring drained, want 10", r.n.Load()-before)
			}
			r.check(t)
		})
	}
}

// TestTxRingAccounting sends 10^6 frames (10^5 with -short) as fast as
// the ring takes them to a port on the veth peer: every frame offered is
// sent or a counted transmit drop, and every frame sent is received or a
// counted receive drop, and what arrives is intact and in order.
func TestTxRingAccounting(t *testing.T) {
	privileged(t)
	total := uint64(1_000_000)
	if testing.Short() {
		total = 100_000
	}
	for _, mode := range ringModes {
		t.Run(string(mode), func(t *testing.T) {
			_, out, in, r := txPair(t, mode)
			bufs := make([][]byte, TxBatchSize)
			for i := range bufs {
				bufs[i] = make([]byte, 1514)
			}
			batch := make([][]byte, TxBatchSize)
			var seq uint64
			var returned uint64
			for seq < total {
				k := int(min(uint64(len(batch)), total-seq))
				for i := range k {
					batch[i] = seqFrame(bufs[i], seq)
					seq++
				}
				n, err := out.WriteFrames(batch[:k])
				if err != nil {
					t.Fatalf("WriteFrames() = %d, %v", n, err)
				}
				returned += uint64(n)
			}
			s := out.Stats()
			if s.TxPackets != returned || s.TxPackets+txDrops(s) != total {
				t.Fatalf("TxPackets %d (WriteFrames returned %d) + tx drops %d, want %d offered (%+v)", s.TxPackets, returned, txDrops(s), total, s.Drops)
			}
			// Every frame sent is in the receiving ring or counted.
			var rs Stats
			ok := waitFor(5*time.Second, func() bool {
				rs = in.Stats()
				return r.n.Load()+rxDrops(rs) >= s.TxPackets
			})
			rs = in.Stats()
			t.Logf("%d offered: %d sent, tx drops %v; %d received, rx drops %v, %d gaps", total, s.TxPackets, s.Drops, r.n.Load(), rs.Drops, r.gaps.Load())
			if !ok || r.n.Load()+rxDrops(rs) != s.TxPackets || r.other.Load() != 0 {
				t.Errorf("received %d + rx drops %d (other frames %d), want %d sent", r.n.Load(), rxDrops(rs), r.other.Load(), s.TxPackets)
			}
			r.check(t)
		})
	}
}

// TestTxRingClose: Close while writers are sending ends them cleanly:
// each WriteFrames returns nil or ErrClosed, none hangs.
func TestTxRingClose(t *testing.T) {
	privileged(t)
	for _, mode := range ringModes {
		t.Run(string(mode), func(t *testing.T) {
			n := newNetns(t)
			vethPair(t, n, "p0", "p1")
			p := openIn(t, n, Config{Name: "p1", KeepKernel: true, Tx: mode})
			frame := netnstest.Frame(netnstest.Broadcast, p.HardwareAddr(), "closing")
			batch := make([][]byte, TxBatchSize)
			for i := range batch {
				batch[i] = frame
			}
			var wg sync.WaitGroup
			var started sync.WaitGroup
			for range 4 {
				started.Add(1)
				wg.Go(func() {
					started.Done()
					for {
						_, err := p.WriteFrames(batch)
						if errors.Is(err, ErrClosed) {
							return
						}
						if err != nil {
							t.Errorf("WriteFrames() = %v, want nil or ErrClosed", err)
							return
						}
					}
				})
			}
			started.Wait()
			time.Sleep(50 * time.Millisecond)
			if err := p.Close(); err != nil {
				t.Errorf("Close() = %v", err)
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("writers did not return after Close")
			}
		})
	}
}

func TestTxRingAllocs(t *testing.T) {
	privileged(t)
	for _, mode := range ringModes {
		t.Run(string(mode), func(t *testing.T) {
			n := newNetns(t)
			vethPair(t, n, "p0", "p1")
			p := openIn(t, n, Config{Name: "p1", KeepKernel: true, Tx: mode})
			frame := netnstest.Frame(netnstest.Broadcast, p.HardwareAddr(), "allocs")
			batch := make([][]byte, 2*TxBatchSize+3)
			for i := range batch {
				batch[i] = frame
			}
			if a := testing.AllocsPerRun(20, func() { p.WriteFrames(batch) }); a != 0 {
				t.Errorf("WriteFrames allocs = %v, want 0", a)
			}
			if s := p.Stats(); s.TxPackets+txDrops(s) != 21*uint64(len(batch)) {
				t.Errorf("TxPackets + tx drops = %d + %d, want %d", s.TxPackets, txDrops(s), 21*len(batch))
			}
		})
	}
}

func TestOpenTxMode(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	var err error
	n.Do(t, func() { _, err = Open(Config{Name: "p1", KeepKernel: true, Tx: "mmap"}, nil) })
	if err == nil || !strings.Contains(err.Error(), `unknown transmit mode "mmap"`) {
		t.Errorf("Open(Tx: mmap) = %v, want an unknown transmit mode error", err)
	}
	p := openIn(t, n, Config{Name: "p1", KeepKernel: true})
	prof, _ := LookupProfile("")
	if p.TxMode() != prof.DefaultTx {
		t.Errorf("TxMode() = %q, want the generic profile's %q", p.TxMode(), prof.DefaultTx)
	}
}

// BenchmarkTransmit compares the transmit paths on one veth in one run:
// sendmmsg, the TX ring and the TX ring with PACKET_QDISC_BYPASS, each
// sending batches of TxBatchSize frames of 60 and 1514 bytes into a peer
// that drops them. One port is open at a time, so no other socket's tap
// on the interface is charged to a path. ns/frame is per frame offered;
// frames/s counts the frames the kernel took; drops/frame those it did
// not.
func BenchmarkTransmit(b *testing.B) {
	privilegedB(b)
	n := netnstest.New(b, "hwb", netnstest.WithoutIPv6())
	vethPair(b, n, "p0", "p1")
	for _, mode := range TxModes {
		for _, size := range []int{60, 1514} {
			for _, vnet := range []VnetMode{VnetOff, VnetOn} {
				benchTransmit(b, n, mode, size, vnet)
			}
		}
	}
}

// benchTransmit is one case of BenchmarkTransmit.
func benchTransmit(b *testing.B, n *netnstest.Netns, mode TxMode, size int, vnet VnetMode) {
	b.Run(fmt.Sprintf("tx=%s/size=%d/vnet=%s", mode, size, vnet), func(b *testing.B) {
		p := openIn(b, n, Config{Name: "p1", KeepKernel: true, Tx: mode, VnetHdr: vnet})
		defer p.Close()
		frame := seqFrame(make([]byte, 1514), 1)[:size]
		batch := make([][]byte, TxBatchSize)
		for i := range batch {
			batch[i] = frame
		}
		b.ReportAllocs()
		for b.Loop() {
			p.WriteFrames(batch)
		}
		s := p.Stats()
		frames := float64(b.N * TxBatchSize)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/frames, "ns/frame")
		b.ReportMetric(float64(s.TxPackets)/b.Elapsed().Seconds(), "frames/s")
		b.ReportMetric(float64(txDrops(s))/frames, "drops/frame")
	})
}

func TestTxSlotSize(t *testing.T) {
	tests := []struct{ maxLen, want int }{
		{1500 + MaxL2Overhead, 2048},   // 48 + 1522
		{2048 - txDataOff, 2048},       // exactly one slot
		{2048 - txDataOff + 1, 4096},   // one byte more
		{9000 + MaxL2Overhead, 10240},  // jumbo: 48 + 9022
		{65535 + MaxL2Overhead, 67584}, // the largest MTU still fits a block
		{TxRingBlockSize - txDataOff, TxRingBlockSize},
	}
	for _, tt := range tests {
		if got := txSlotSize(tt.maxLen, false); got != tt.want || got%TxRingSlotAlign != 0 || got-txDataOff < tt.maxLen {
			t.Errorf("txSlotSize(%d) = %d, want %d", tt.maxLen, got, tt.want)
		}
	}
	if _, err := newTxRing(TxRingBlockSize, 1500, false, false); err == nil {
		t.Error("newTxRing(a frame larger than a block) = nil error, want one")
	}
}

// TestTxRingQueues: with several receive queues the TX ring sits on
// queue 0's socket, which joins the fanout group after both rings are
// mapped; frames still go out, and the port's queues do not see them.
func TestTxRingQueues(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	p := openIn(t, n, Config{Name: "p1", KeepKernel: true, Queues: 2, Tx: TxRing})
	if p.Queues() != 2 {
		t.Fatalf("Queues() = %d, want 2", p.Queues())
	}
	var c collector
	runPort(t, p, &c)
	peer := n.RawSocket(t, "p0")
	f := netnstest.Frame(netnstest.Broadcast, p.HardwareAddr(), "ring-fanout")
	if k, err := p.WriteFrames([][]byte{f, f, f}); k != 3 || err != nil {
		t.Fatalf("WriteFrames() = %d, %v; want 3, nil", k, err)
	}
	if _, ok := peer.WaitFor("ring-fanout", 2*time.Second); !ok {
		t.Fatal("frame sent through the TX ring of a 2-queue port did not reach p0")
	}
	if _, ok := c.find([]byte("ring-fanout"), 100*time.Millisecond); ok {
		t.Error("a receive queue saw the port's own frame")
	}
}
