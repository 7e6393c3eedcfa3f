package hw

import (
	"encoding/binary"
	"testing"
)

// countingWriter is a FrameWriter that keeps the last batch's shape.
type countingWriter struct {
	frames, bytes int
	last          []byte
}

func (w *countingWriter) WriteFrames(frames [][]byte) (int, error) {
	w.frames += len(frames)
	for _, f := range frames {
		w.bytes += len(f)
		w.last = f
	}
	return len(frames), nil
}

func TestBridgeForwardRetags(t *testing.T) {
	var tf []testFrame
	for i := range 10 {
		tf = append(tf, testFrame{data: ethFrame(100, byte(i)), status: tpStatusVLANValid | tpStatusVLANTPIDValid, tci: 7, tpid: 0x88a8})
	}
	blk := buildBlock(8192, tf)
	var drops dropCounts
	frames := parseBlock(blk, make([]Frame, 0, maxFramesPerBlock(len(blk))), 1522, false, &drops)
	bq := newBridgeQueue()
	var w countingWriter
	bq.forward(&w, frames)
	if w.frames != 10 || w.bytes != 10*104 {
		t.Fatalf("forwarded %d frames, %d bytes; want 10, %d", w.frames, w.bytes, 10*104)
	}
	if tpid, tci := binary.BigEndian.Uint16(w.last[12:]), binary.BigEndian.Uint16(w.last[14:]); tpid != 0x88a8 || tci != 7 {
		t.Errorf("re-inserted tag = %#x/%d, want 0x88a8/7", tpid, tci)
	}
	if w.last[16] != 0x08 || w.last[17] != 0x00 {
		t.Errorf("EtherType after tag = % x, want 08 00", w.last[16:18])
	}
	if a := testing.AllocsPerRun(100, func() { bq.forward(&w, frames) }); a != 0 {
		t.Errorf("forward allocs = %v, want 0", a)
	}
}

// BenchmarkParseDispatch is the receive path without syscalls: walk a
// block, hand it to the bridge's forwarder (half the frames re-tagged)
// and a writer that does nothing.
func BenchmarkParseDispatch(b *testing.B) {
	var tf []testFrame
	for i := range 150 {
		f := testFrame{data: ethFrame(64+(i%24)*60, byte(i))}
		if i%2 == 0 {
			f.status, f.tci = tpStatusVLANValid, uint16(i)
		}
		tf = append(tf, f)
	}
	blk := buildBlock(RingBlockSize, tf)
	frames := make([]Frame, 0, maxFramesPerBlock(len(blk)))
	bq := newBridgeQueue()
	var w countingWriter
	var drops dropCounts
	b.ReportAllocs()
	for b.Loop() {
		frames = parseBlock(blk, frames, 1522, false, &drops)
		bq.forward(&w, frames)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(frames)), "ns/frame")
}
