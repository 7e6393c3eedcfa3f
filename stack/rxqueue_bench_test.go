package stack

import (
	"fmt"
	"testing"

	"github.com/gvrouter/gvrouter/hw"
)

// rxqBenchBlock is the frames of one full ring block of MTU-size frames:
// hw.RingBlockSize over rxqBenchStride.
const rxqBenchBlock = hw.RingBlockSize / rxqBenchStride

// rxqBenchStride is a 1514-byte frame's room in the ring: the frame, its
// tpacket3_hdr and the reserved headroom, 16-byte aligned.
const rxqBenchStride = 1600

// rxqBenchRing is frames laid out as a receive ring holds them: blocks of
// rxqBenchBlock frames, each frame in its rxqBenchStride of one 4 MiB buffer
// (hw.RingBlocks x hw.RingBlockSize), so that the benchmark walks as
// much memory as a port's ring and its frames are no warmer than there.
// Frames belong to flows round robin (tcp-like bulk: 1514 bytes).
func rxqBenchRing(flows int) [][]hw.Frame {
	const stride = rxqBenchStride
	mem := make([]byte, hw.RingBlocks*hw.RingBlockSize)
	blocks := make([][]hw.Frame, hw.RingBlocks)
	for b := range blocks {
		blk := mem[b*hw.RingBlockSize : (b+1)*hw.RingBlockSize]
		blocks[b] = make([]hw.Frame, rxqBenchBlock)
		for i := range blocks[b] {
			f := bulkFrame(uint16(1000+i%flows), uint32(b*rxqBenchBlock+i), 1472)
			d := blk[i*stride : i*stride+len(f) : i*stride+len(f)]
			copy(d, f)
			blocks[b][i] = hw.Frame{Data: d, WireLen: len(d)}
		}
	}
	return blocks
}

// BenchmarkRxQueue is the receive queue's cost per frame under bulk
// load: each op is one frame of a ring block handed to HandleRing and
// served on (ServeBacklog), the next stage copying each frame once as
// sendmmsg does. "off" is the same blocks passed straight through (the
// queue off, or empty with nothing behind), for the difference;
// "queued" keeps about half the queue full, as a saturated port does;
// "held" is the same with the frames kept where they lie in the ring
// (HoldRing, the ring's blocks handed back as a port's loop does).
func BenchmarkRxQueue(b *testing.B) {
	for _, flows := range []int{4, 64} {
		blocks := rxqBenchRing(flows)
		scratch := make([]byte, 2<<10)
		sink := func(queue int, frames []hw.Frame) {
			for i := range frames {
				copy(scratch, frames[i].Data)
			}
		}
		b.Run(fmt.Sprintf("off/flows=%d", flows), func(b *testing.B) {
			s := NewRxQueue(sink, 1500+hw.MaxL2Overhead)
			s.SetEnabled(false)
			b.SetBytes(1514)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += rxqBenchBlock {
				s.HandleRing(0, blocks[(i/rxqBenchBlock)%len(blocks)], true)
			}
		})
		b.Run(fmt.Sprintf("held/flows=%d", flows), func(b *testing.B) {
			s := NewRxQueue(sink, 1500+hw.MaxL2Overhead)
			var l ringLoop
			for k := range 6 {
				l.hold(s, blocks[k], k)
			}
			b.SetBytes(1514)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += rxqBenchBlock {
				k := (6 + i/rxqBenchBlock) % len(blocks)
				l.hold(s, blocks[k], k)
				for n := 0; n < rxqBenchBlock; n += rxqBatch {
					s.ServeBacklog(0)
					l.giveBack(s)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(s.Stats().Copied)/float64(b.N), "copied/op")
			l.letGoAll(s)
			s.Close()
		})
		b.Run(fmt.Sprintf("queued/flows=%d", flows), func(b *testing.B) {
			s := NewRxQueue(sink, 1500+hw.MaxL2Overhead)
			// A standing backlog of ~6 blocks (1,020 frames, half the
			// slots), served no slower than it fills.
			for k := range 6 {
				s.HandleRing(0, blocks[k], true)
			}
			b.SetBytes(1514)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += rxqBenchBlock {
				s.HandleRing(0, blocks[(6+i/rxqBenchBlock)%len(blocks)], true)
				for n := 0; n < rxqBenchBlock; n += rxqBatch {
					s.ServeBacklog(0)
				}
			}
			b.StopTimer()
			s.Close()
		})
	}
}

// ringLoop is what a port's receive loop does with a hw.RingHolder's
// blocks (hw rxQueue.returnBlocks), for queue 0 of a ring of
// hw.RingBlocks blocks: it keeps up to hw.RingHeldBlocks of them, hands
// back the oldest when its frames are served, and makes the holder copy
// them past the bound.
type ringLoop struct {
	next, held int
	// copied counts the blocks handed back with frames still held.
	copied int
	// returned, if set, is called for each block handed back.
	returned func(blk int)
}

func (l *ringLoop) hold(s *RxQueue, frames []hw.Frame, blk int) {
	s.HoldRing(0, frames, true, blk)
	l.held++
	l.next = (blk + 1) % hw.RingBlocks
	l.giveBack(s)
}

func (l *ringLoop) giveBack(s *RxQueue) {
	for l.held > 0 {
		blk := (l.next - l.held + hw.RingBlocks) % hw.RingBlocks
		if s.Holding(0, blk) > 0 {
			if l.held <= hw.RingHeldBlocks {
				return
			}
			s.LetGo(0, blk)
			l.copied++
		}
		l.held--
		if l.returned != nil {
			l.returned(blk)
		}
	}
}

func (l *ringLoop) letGoAll(s *RxQueue) {
	for l.held > 0 {
		blk := (l.next - l.held + hw.RingBlocks) % hw.RingBlocks
		s.LetGo(0, blk)
		l.held--
		if l.returned != nil {
			l.returned(blk)
		}
	}
}
