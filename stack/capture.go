package stack

import "github.com/gvrouter/gvrouter/hw"

// Live capture.
//
// An interface can hold one CaptureSink (package capture's Point) while
// a capture runs on it; without one, each receive batch and each
// transmit batch costs one atomic load (a nil pointer). The sink sees
// the interface's frames as a host's tcpdump on Linux's eth0.2 would:
// received frames after the trunk removed the interface's VLAN tags
// (and, below a SecY, still with their SecTAG: MACsec frames are seen
// before the SecY takes them), sent frames with the interface's own
// tags to strip (CaptureTx's strip). Fast-path frames are seen as they
// arrive and as they leave, rewritten. A SecY's interface sees
// plaintext, as the SecY delivers and takes it.

// CaptureSink receives the frames crossing an interface. Calls run on
// the data path, concurrently for different receive queues; they must
// not block and must not keep or modify the frames (copy what they
// keep).
type CaptureSink interface {
	// CaptureRx is a batch of received frames.
	CaptureRx(frames []hw.Frame)
	// CaptureTx is a batch of frames about to be sent, each with strip
	// octets of the interface's VLAN tags after the MAC addresses.
	CaptureTx(frames [][]byte, strip int)
}

// captureRef boxes a CaptureSink for an atomic.Pointer.
type captureRef struct{ s CaptureSink }

// SetCapture makes s the interface's capture sink; nil removes it. Only
// one sink is held: package capture multiplexes its sessions on it.
// Like taps, the sink belongs to this *Interface: one Apply recreates
// starts without it.
func (i *Interface) SetCapture(s CaptureSink) {
	if s == nil {
		i.ep.capture.Store(nil)
		return
	}
	i.ep.capture.Store(&captureRef{s: s})
}

// captureRx hands frames to e's capture sink, if any.
func (e *Endpoint) captureRx(frames []hw.Frame) {
	if c := e.capture.Load(); c != nil {
		c.s.CaptureRx(frames)
	}
}

// captureTx hands frames about to be sent to e's capture sink, if any;
// strip is the length of e's own VLAN tags in them.
func (e *Endpoint) captureTx(frames [][]byte, strip int) {
	if c := e.capture.Load(); c != nil {
		c.s.CaptureTx(frames, strip)
	}
}
