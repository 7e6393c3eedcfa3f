package stack

import (
	"sync"

	"github.com/gvrouter/gvrouter/hw"
)

// ingressShaper holds an interface's download shaper (sqm's ingress
// Queue): what arrives on the interface is queued there instead of
// handled, and comes back through Interface.DeliverShaped when the shaper
// lets it go, as Linux's cake on an IFB sees a WAN's input before routing.
type ingressShaper struct {
	w hw.FrameWriter
	// mu protects data, the frames of one WriteFrames call.
	mu   sync.Mutex
	data [][]byte
	// deliver is DeliverShaped's scratch, used by the shaper's single
	// goroutine; dmu keeps a second caller safe.
	dmu     sync.Mutex
	deliver []hw.Frame
}

// SetIngressShaper routes the frames arriving on the interface through w
// (copied, then delivered by DeliverShaped); nil removes it. Frames the
// shaper cannot hold as bytes alone go straight on: superframes, frames
// with a partial checksum, frames the ring truncated.
func (i *Interface) SetIngressShaper(w hw.FrameWriter) {
	if w == nil {
		i.ep.shapeIn.Store(nil)
		return
	}
	i.ep.shapeIn.Store(&ingressShaper{w: w})
}

// shapeFrames queues the run's plain frames in the ingress shaper and
// returns the rest (kept in order among themselves), to handle at once.
func (s *ingressShaper) shapeFrames(frames []hw.Frame) []hw.Frame {
	s.mu.Lock()
	n := 0
	for _, f := range frames {
		if f.GSO.Type != hw.GSONone || f.CsumPartial || f.WireLen > len(f.Data) {
			frames[n] = f
			n++
			continue
		}
		s.data = append(s.data, f.Data)
	}
	if len(s.data) > 0 {
		s.w.WriteFrames(s.data)
		clear(s.data)
		s.data = s.data[:0]
	}
	s.mu.Unlock()
	return frames[:n]
}

// DeliverShaped hands frames the interface's ingress shaper released to
// its receive path, as a port's receive batch would: fast path, NAT,
// netstack. The frames are the caller's again when it returns; they may
// be rewritten in place.
func (i *Interface) DeliverShaped(frames [][]byte) {
	e := i.ep
	s := e.shapeIn.Load()
	if s == nil || len(frames) == 0 {
		return
	}
	s.dmu.Lock()
	defer s.dmu.Unlock()
	batch := s.deliver[:0]
	for _, f := range frames {
		batch = append(batch, hw.Frame{Data: f, WireLen: len(f)})
	}
	if e.tx != nil {
		e.tx.begin()
	}
	var ss sendSet
	e.handleFramesInto(batch, &ss)
	ss.send()
	if e.tx != nil {
		e.tx.end()
	}
	clear(batch)
	s.deliver = batch[:0]
}
