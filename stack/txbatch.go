package stack

import (
	"sync"
	"sync/atomic"
)

// txBatcher defers the frames netstack writes while any receive batch is
// being handled, so the packets forwarded out of one receive batch leave
// in one WriteFrames (one sendmmsg) per egress interface instead of one
// syscall each: gVisor hands a link endpoint one packet per WritePackets.
//
// Ordering without a lost frame rests on two sequentially consistent
// atomics, in the Dekker pattern: a writer appends under the endpoint's
// txMu, sets txDirty, then reads active; a batch decrements active, then
// reads each endpoint's txDirty. Whichever comes second sees the other, so
// either the writer sends itself or the batch's end flushes it.
type txBatcher struct {
	// active counts receive batches in progress on any goroutine.
	active atomic.Int32
	// eps is the snapshot of endpoints to flush; written under mu.
	eps atomic.Pointer[[]*Endpoint]
	mu  sync.Mutex
}

// begin marks a receive batch in progress.
func (t *txBatcher) begin() { t.active.Add(1) }

// end marks a receive batch done and flushes what was deferred.
func (t *txBatcher) end() {
	t.active.Add(-1)
	if eps := t.eps.Load(); eps != nil {
		for _, e := range *eps {
			if e.txDirty.Load() {
				e.flushTx()
			}
		}
	}
}

// deferring reports whether a write may wait for a batch's end.
func (t *txBatcher) deferring() bool { return t.active.Load() > 0 }

// add registers e for flushing.
func (t *txBatcher) add(e *Endpoint) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var next []*Endpoint
	if old := t.eps.Load(); old != nil {
		next = append(next, *old...)
	}
	next = append(next, e)
	t.eps.Store(&next)
}

// remove unregisters e, flushing it first.
func (t *txBatcher) remove(e *Endpoint) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.eps.Load()
	if old == nil {
		return
	}
	next := make([]*Endpoint, 0, len(*old))
	for _, x := range *old {
		if x != e {
			next = append(next, x)
		}
	}
	t.eps.Store(&next)
	e.flushTx()
}
