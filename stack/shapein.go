package stack

import (
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip/header"

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
	// seg holds the wire frames cut from one superframe, under mu;
	// grown once to the largest superframe's.
	seg []byte
	// deliver is DeliverShaped's scratch, used by the shaper's single
	// goroutine; dmu keeps a second caller safe.
	dmu     sync.Mutex
	deliver []hw.Frame
}

// SetIngressShaper routes the frames arriving on the interface through w
// (copied, then delivered by DeliverShaped); nil removes it. A superframe
// (a NIC's GRO merge or a local sender's TSO, on a port with vnet
// headers) is queued as the wire frames it stands for, and a frame with
// a partial checksum with its checksum completed, so the shaper sees
// every byte the link carried. What cannot be cut (a malformed
// superframe, a tagged one, a non-TCP/UDP frame with a partial checksum)
// and frames the ring truncated go straight on, to be handled or counted
// as drops as without a shaper.
func (i *Interface) SetIngressShaper(w hw.FrameWriter) {
	if w == nil {
		i.ep.shapeIn.Store(nil)
		return
	}
	i.ep.shapeIn.Store(&ingressShaper{w: w})
}

// shapeFrames queues the run's frames in the ingress shaper, superframes
// cut to mtu (the interface's L3 MTU), and returns those it could not
// queue (kept in order among themselves), to handle at once.
func (s *ingressShaper) shapeFrames(frames []hw.Frame, mtu int) []hw.Frame {
	s.mu.Lock()
	n := 0
	for i := range frames {
		f := &frames[i]
		switch {
		case f.WireLen > len(f.Data):
		case f.GSO.Type == hw.GSONone && !f.CsumPartial:
			s.data = append(s.data, f.Data)
			continue
		case s.cut(f, mtu):
			continue
		}
		frames[n] = *f
		n++
	}
	s.flush()
	s.mu.Unlock()
	return frames[:n]
}

// flush hands the queued frames to the shaper, which copies them.
func (s *ingressShaper) flush() {
	if len(s.data) > 0 {
		s.w.WriteFrames(s.data)
		clear(s.data)
		s.data = s.data[:0]
	}
}

// cut queues the wire frames of a superframe, or a frame with a partial
// checksum as one frame with a complete checksum (segmenter, as the
// receive path cuts a superframe it cannot forward whole); false if f is
// not such a frame (segmenter refuses it, or checkSuperframe). s.mu is
// held.
func (s *ingressShaper) cut(f *hw.Frame, mtu int) bool {
	// A frame of wire size is one segment: its checksum completed.
	mss, segMTU := len(f.Data), len(f.Data)+header.IPv6MinimumSize
	if f.GSO.Type != hw.GSONone {
		if _, ok := checkSuperframe(f); !ok {
			return false
		}
		mss, segMTU = int(f.GSO.Size), mtu
	}
	seg, ok := newSegmenter(f.Data, header.EthernetMinimumSize, mss, segMTU)
	if !ok {
		return false
	}
	// The frames before it go first, then its segments from s.seg.
	s.flush()
	step := seg.hdrLen() + seg.mss
	if need := seg.count() * step; len(s.seg) < need {
		s.seg = make([]byte, need)
	}
	for i := range seg.count() {
		dst := s.seg[i*step : (i+1)*step]
		s.data = append(s.data, dst[:seg.segment(i, dst)])
	}
	s.flush()
	return true
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
