package stack

import (
	"sync/atomic"

	"github.com/gvrouter/gvrouter/hw"
)

// PortInput is where the data path starts: the hw.BatchHandler a port's
// receive loop calls with every batch (hw port Run). It hands the batch
// to the port's live capture, if one runs, then to the port's Trunk.
// Reload re-points it at another trunk, or at none, without stopping the
// loop (SetTrunk). A batch that arrives while the port has no trunk (no
// interface on the port) is dropped and counted (Dropped); a capture does
// not see it.
//
// The zero value has no trunk and no capture. Its methods are safe for
// concurrent use; HandleBatch runs for each receive queue concurrently.
type PortInput struct {
	trunk   atomic.Pointer[Trunk]
	capture atomic.Pointer[captureRef]
	// noInterface counts the frames that arrived with no trunk.
	noInterface atomic.Uint64
}

// SetTrunk makes t the port's trunk; nil means no interface is on the
// port.
func (p *PortInput) SetTrunk(t *Trunk) { p.trunk.Store(t) }

// SetCapture makes s the port's capture sink; nil removes it. The sink
// sees every batch before the trunk: frames as the port delivered them,
// the outer VLAN tag still in the ring header (hw.Frame.VLANValid).
// Without a sink a batch costs one atomic load (a nil pointer).
func (p *PortInput) SetCapture(s CaptureSink) {
	if s == nil {
		p.capture.Store(nil)
		return
	}
	p.capture.Store(&captureRef{s: s})
}

// HandleBatch implements hw.BatchHandler. Frames are not used after it
// returns.
func (p *PortInput) HandleBatch(queue int, frames []hw.Frame) {
	t := p.trunk.Load()
	if t == nil {
		p.noInterface.Add(uint64(len(frames)))
		return
	}
	if c := p.capture.Load(); c != nil {
		c.s.CaptureRx(frames)
	}
	t.HandleBatch(queue, frames)
}

// Dropped returns the frames that arrived while the port had no trunk.
func (p *PortInput) Dropped() uint64 { return p.noInterface.Load() }
