package hw

import (
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Lending the room before a received frame.
//
// The stack forwards a frame from the receive ring it arrived in: it
// rewrites it there and hands that view to the egress port while the
// port's batch runs (hw.Frame, stack's appendFastLocked). A frame that
// leaves with more header than it came with (a VLAN tag, a PPPoE session
// header) used to be copied into a buffer with room first, a whole-frame
// memmove per frame on top of sendmmsg's own copy into the skb. Every
// receive ring keeps RingHeadroom bytes before each frame instead
// (PACKET_RESERVE, ringReserve), and Port.ExtendFrame lends them: the
// header is pushed in place, in the ring, and sendmmsg copies the frame
// once, as it must anyway.
//
// A port sends a frame from any process memory, so it lends the room
// before a frame of any port's ring, not only its own: the rings of every
// open port are in receiveRings.

// ringSpan is the address range of one receive ring's mapping.
type ringSpan struct{ lo, hi uintptr }

// receiveRings is the set of mapped receive rings. Readers load it
// without a lock (ExtendFrame, once per forwarded frame that needs room);
// writers copy it under receiveRingsMu.
var (
	receiveRings   atomic.Pointer[[]ringSpan]
	receiveRingsMu sync.Mutex
)

// addReceiveRing records a receive ring's mapping; removeReceiveRing
// forgets it, before it is unmapped.
func addReceiveRing(mem []byte) {
	if len(mem) == 0 {
		return
	}
	receiveRingsMu.Lock()
	defer receiveRingsMu.Unlock()
	var spans []ringSpan
	if old := receiveRings.Load(); old != nil {
		spans = slices.Clone(*old)
	}
	lo := uintptr(unsafe.Pointer(&mem[0]))
	spans = append(spans, ringSpan{lo, lo + uintptr(len(mem))})
	receiveRings.Store(&spans)
}

func removeReceiveRing(mem []byte) {
	if len(mem) == 0 {
		return
	}
	receiveRingsMu.Lock()
	defer receiveRingsMu.Unlock()
	old := receiveRings.Load()
	if old == nil {
		return
	}
	lo := uintptr(unsafe.Pointer(&mem[0]))
	spans := slices.DeleteFunc(slices.Clone(*old), func(s ringSpan) bool { return s.lo == lo })
	receiveRings.Store(&spans)
}

// inReceiveRing reports whether p lies in a mapped receive ring.
func inReceiveRing(p *byte) bool {
	spans := receiveRings.Load()
	if spans == nil {
		return false
	}
	a := uintptr(unsafe.Pointer(p))
	for _, s := range *spans {
		if a >= s.lo && a < s.hi {
			return true
		}
	}
	return false
}

// ExtendFrame returns frame grown by head bytes at its front, in the
// receive ring it lies in, if it is a frame of an AF_PACKET port's ring
// (this port's or another's) and head is at most RingHeadroom; nil
// otherwise. The room counts from where the ring put the frame: a frame
// the caller moved forward in place (a tag or PPPoE header taken off)
// has more, and one it already grew has less, which the caller must
// count (the stack's pushes add up to RingHeadroom at most). The slice's
// capacity ends with the frame. It is valid while the frame's receive
// batch runs, after which the kernel may reuse the ring block; the stack
// lends only inside a batch and sends before its end. It is safe for
// concurrent use and does not allocate.
func (p *Port) ExtendFrame(frame []byte, head int) []byte { return extendInRing(frame, head) }

// extendInRing is ExtendFrame, for any frame of a receive ring.
func extendInRing(frame []byte, head int) []byte {
	if head < 0 || head > RingHeadroom || len(frame) == 0 || !inReceiveRing(&frame[0]) {
		return nil
	}
	start := (*byte)(unsafe.Add(unsafe.Pointer(&frame[0]), -head))
	return unsafe.Slice(start, head+len(frame))
}
