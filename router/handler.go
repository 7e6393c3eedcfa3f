package router

import (
	"sync/atomic"

	"github.com/gvrouter/gvrouter/hw"
)

// atomicHandler lets reload re-point a port's receive loop at another
// interface without stopping the loop. A nil handler drops the batch and
// counts it.
type atomicHandler struct {
	h       atomic.Pointer[hw.BatchHandler]
	dropped atomic.Uint64 // frames that arrived on a port with no interface
}

// Store sets the handler; nil means no interface is on the port.
func (a *atomicHandler) Store(h hw.BatchHandler) {
	if h == nil {
		a.h.Store(nil)
		return
	}
	a.h.Store(&h)
}

// Handle implements hw.BatchHandler.
func (a *atomicHandler) Handle(queue int, frames []hw.Frame) {
	if h := a.h.Load(); h != nil {
		(*h)(queue, frames)
		return
	}
	a.dropped.Add(uint64(len(frames)))
}
