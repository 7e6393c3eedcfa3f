// Package hwtest provides fakes of package hw for tests of the layers
// above it: a FrameWriter that records what it is given, and a builder
// for receive batches.
package hwtest

import (
	"bytes"
	"sync"

	"github.com/gvrouter/gvrouter/hw"
)

// Writer is an hw.FrameWriter that keeps a copy of every frame written to
// it. It is safe for concurrent use.
type Writer struct {
	mu     sync.Mutex
	frames [][]byte // copies, in write order
	// Limit, if not zero, is how many frames each WriteFrames call accepts;
	// the rest are refused, as a full device queue would.
	Limit int
}

var _ hw.FrameWriter = (*Writer)(nil)

// WriteFrames implements hw.FrameWriter.
func (w *Writer) WriteFrames(frames [][]byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(frames)
	if w.Limit > 0 && n > w.Limit {
		n = w.Limit
	}
	for _, f := range frames[:n] {
		w.frames = append(w.frames, bytes.Clone(f))
	}
	return n, nil
}

// Frames returns the frames written so far and forgets them.
func (w *Writer) Frames() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.frames
	w.frames = nil
	return f
}

// Batch builds a receive batch as a port would deliver it: each frame's
// Data as given (no outer tag), WireLen = len(Data).
func Batch(frames ...[]byte) []hw.Frame {
	b := make([]hw.Frame, len(frames))
	for i, f := range frames {
		b[i] = hw.Frame{Data: f, WireLen: len(f)}
	}
	return b
}

// Tagged returns f as a port delivers a frame whose outer 802.1Q tag the
// kernel stripped: Data without the tag, the tag in VLANTCI/VLANTPID.
func Tagged(f []byte, tpid, tci uint16) hw.Frame {
	return hw.Frame{Data: f, WireLen: len(f), VLANValid: true, VLANTCI: tci, VLANTPID: tpid}
}
