package stack

import (
	"math/rand/v2"
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/qdisc"
)

// rxQueue is the queue of one receive queue of a port: its slots, flow
// queues (rxqueue.go says how they work together).
type rxQueue struct {
	s  *RxQueue
	id int

	// seed keys the flow hash, so that a sender cannot choose packets
	// that all land in one flow queue of every router.
	seed uint64

	mu sync.Mutex
	// mu protects everything below up to held, and the slots that are
	// free or queued (a slot in the batch being served is
	// ServeBacklog's until releaseLocked). Only the queue's receive
	// loop writes them, so it reads backlog without mu.
	slots   []rxSlot
	free    []int32 // free small slots
	bigFree []int32 // free superframe slots; nil until the first one
	arena   []byte  // the small slots' memory, made on the first enqueue
	flows   [rxqFlows]rxFlow
	// newFlows and oldFlows are RFC 8290's lists: flows that became
	// active since their last turn, served first, and the rest.
	newFlows, oldFlows flowList
	backlog            int // frames queued
	backlogBytes       int
	sojourn            sojournMax
	// ringRefs counts the queued frames that lie in each ring block of
	// the port's receive ring (hw.RingHolder). Only the queue's loop
	// writes them, so it reads them without mu.
	ringRefs [hw.RingBlocks]int32
	// ringSlots are the heads of the lists of the slots whose frames
	// lie in each ring block (rxSlot.blkPrev, blkNext; -1 for none), so
	// that LetGo visits only those rather than every slot (0.3-0.7 % of
	// the router's CPU under bulk load as a scan, docs/performance.md).
	ringSlots [hw.RingBlocks]int32

	// held and batch belong to ServeBacklog: the slots of the batch it
	// is running and their frames.
	held  []int32
	batch []hw.Frame
}

// rxSlot is one queued frame in the queue's own memory.
type rxSlot struct {
	// f is the frame as the port delivered it; f.Data is a view of buf,
	// or of ring block blk.
	f   hw.Frame
	buf []byte
	// blk is the ring block f.Data lies in (hw.RingHolder), -1 when
	// it is in buf.
	blk int8
	// blkPrev and blkNext link the slots of ring block blk
	// (rxQueue.ringSlots), -1 at either end.
	blkPrev, blkNext int32
	// arrive is when the frame reached the port (the kernel's
	// timestamp, or the time the reader read it), in nanoseconds of
	// the queue's monotonic clock (RxQueue.base).
	arrive int64
	// next is the slot behind it in its flow, -1 for none.
	next int32
	big  bool
	// l3 and ipVer are where its IP header is and its version (4 or
	// 6; 0: not IP), for CoDel's ECN mark (qdisc.Class); ect that the
	// packet is ECN-capable, read at enqueue while its header is in
	// cache rather than at dequeue, when it has gone cold (1.2-1.4 % of
	// the router's CPU under bulk load, docs/performance.md).
	l3    uint16
	ipVer uint8
	ect   bool
}

// rxFlow is one flow queue: a FIFO of slots, its deficit and list place.
type rxFlow struct {
	head, tail int32 // -1 when empty
	bytes      int
	deficit    int
	// link is the next flow on the list it is on, -1 for none.
	link int32
	list uint8 // listNone, listNew or listOld
	// codel is the flow's AQM state (RFC 8290 §4.1: CoDel per flow).
	codel qdisc.CoDel
}

const (
	listNone uint8 = iota
	listNew
	listOld
)

// flowList is an intrusive singly linked list of flows (rxFlow.link).
type flowList struct{ head, tail int32 }

func newRxQueue(s *RxQueue, id int) *rxQueue {
	q := &rxQueue{
		s:     s,
		id:    id,
		seed:  rand.Uint64(),
		slots: make([]rxSlot, rxqSlots, rxqSlots+rxqBigSlots),
		free:  make([]int32, 0, rxqSlots),
		held:  make([]int32, 0, rxqBatch),
		batch: make([]hw.Frame, rxqBatch),
	}
	q.newFlows = flowList{-1, -1}
	q.oldFlows = flowList{-1, -1}
	for i := range q.flows {
		q.flows[i] = rxFlow{head: -1, tail: -1, link: -1}
	}
	for i := range q.slots {
		q.slots[i].blk = -1
	}
	for i := range q.ringSlots {
		q.ringSlots[i] = -1
	}
	return q
}

// allocLocked makes the small slots' memory on first use.
func (q *rxQueue) allocLocked() {
	size := q.s.slotSize
	q.arena = make([]byte, rxqSlots*size)
	for i := range rxqSlots {
		q.slots[i].buf = q.arena[i*size : (i+1)*size : (i+1)*size]
	}
	for i := rxqSlots - 1; i >= 0; i-- {
		q.free = append(q.free, int32(i))
	}
}

// allocBigLocked makes the superframe slots on first use.
func (q *rxQueue) allocBigLocked() {
	mem := make([]byte, rxqBigSlots*hw.MaxGSOFrameLen)
	q.bigFree = make([]int32, 0, rxqBigSlots)
	for i := range rxqBigSlots {
		q.slots = append(q.slots, rxSlot{
			buf: mem[i*hw.MaxGSOFrameLen : (i+1)*hw.MaxGSOFrameLen : (i+1)*hw.MaxGSOFrameLen],
			big: true,
			blk: -1,
		})
	}
	for i := len(q.slots) - 1; i >= rxqSlots; i-- {
		q.bigFree = append(q.bigFree, int32(i))
	}
}

// enqueueLocked puts frames into slots and their flows and returns how
// many it queued; the others found the queue full (overlimit). A frame
// stays where it lies in ring block blk if blk is not -1 and it fits a
// small slot (so that LetGo can copy it there); else it is copied. wall
// is the wall clock and mono the queue's clock, both now.
func (q *rxQueue) enqueueLocked(frames []hw.Frame, wall, mono int64, blk int8) int {
	if q.arena == nil {
		q.allocLocked()
	}
	n, copied := 0, uint64(0)
	for i := range frames {
		f := &frames[i]
		idx, ok := q.takeLocked(len(f.Data))
		if !ok {
			continue
		}
		sl := &q.slots[idx]
		sl.f = *f
		if blk >= 0 && !sl.big {
			q.linkRingLocked(idx, blk)
		} else {
			size := copy(sl.buf, f.Data)
			sl.f.Data = sl.buf[:size:size]
			copied++
		}
		sl.arrive = mono
		if f.RxTime != 0 {
			if w := wall - f.RxTime; w > 0 && w <= rxqMaxRingWait {
				sl.arrive = mono - w
			}
		}
		q.pushLocked(q.classifyLocked(sl), idx)
		n++
	}
	if copied > 0 {
		q.s.stats.copied.Add(copied)
	}
	return n
}

// takeLocked returns a free slot for a frame of size bytes, making room
// by dropping from the largest flow when there is none.
func (q *rxQueue) takeLocked(size int) (int32, bool) {
	if size > q.s.slotSize {
		if size > hw.MaxGSOFrameLen {
			return 0, false
		}
		if q.bigFree == nil {
			q.allocBigLocked()
		}
		if len(q.bigFree) == 0 {
			// Dropping from the largest flow may free only small
			// slots: the superframe is the one dropped.
			return 0, false
		}
		idx := q.bigFree[len(q.bigFree)-1]
		q.bigFree = q.bigFree[:len(q.bigFree)-1]
		return idx, true
	}
	if len(q.free) == 0 {
		q.dropFattestLocked()
		if len(q.free) == 0 {
			return 0, false
		}
	}
	idx := q.free[len(q.free)-1]
	q.free = q.free[:len(q.free)-1]
	return idx, true
}

// releaseLocked returns slots to their free lists.
func (q *rxQueue) releaseLocked(idx []int32) {
	for _, i := range idx {
		q.releaseOneLocked(i)
	}
}

func (q *rxQueue) releaseOneLocked(i int32) {
	sl := &q.slots[i]
	sl.f = hw.Frame{}
	if sl.blk >= 0 {
		q.unlinkRingLocked(i)
	}
	if sl.big {
		q.bigFree = append(q.bigFree, i)
	} else {
		q.free = append(q.free, i)
	}
}

// letGoLocked copies the queued frames that lie in ring block blk into
// their slots' own memory and returns how many it copied.
func (q *rxQueue) letGoLocked(blk int8) int {
	n := 0
	for i := q.ringSlots[blk]; i >= 0; {
		sl := &q.slots[i]
		size := copy(sl.buf, sl.f.Data)
		sl.f.Data = sl.buf[:size:size]
		sl.blk = -1
		i, sl.blkPrev, sl.blkNext = sl.blkNext, -1, -1
		n++
	}
	q.ringSlots[blk] = -1
	q.ringRefs[blk] -= int32(n)
	return n
}

// linkRingLocked records that slot idx's frame lies in ring block blk.
func (q *rxQueue) linkRingLocked(idx int32, blk int8) {
	sl := &q.slots[idx]
	sl.blk, sl.blkPrev, sl.blkNext = blk, -1, q.ringSlots[blk]
	if sl.blkNext >= 0 {
		q.slots[sl.blkNext].blkPrev = idx
	}
	q.ringSlots[blk] = idx
	q.ringRefs[blk]++
}

// unlinkRingLocked forgets slot idx's ring block: its frame is served
// or dropped.
func (q *rxQueue) unlinkRingLocked(idx int32) {
	sl := &q.slots[idx]
	if sl.blkPrev >= 0 {
		q.slots[sl.blkPrev].blkNext = sl.blkNext
	} else {
		q.ringSlots[sl.blk] = sl.blkNext
	}
	if sl.blkNext >= 0 {
		q.slots[sl.blkNext].blkPrev = sl.blkPrev
	}
	q.ringRefs[sl.blk]--
	sl.blk, sl.blkPrev, sl.blkNext = -1, -1, -1
}

// pushLocked appends slot idx to flow fi, which joins the new flows if
// it is on no list (RFC 8290 §4.1).
func (q *rxQueue) pushLocked(fi int32, idx int32) {
	fl := &q.flows[fi]
	sl := &q.slots[idx]
	sl.next = -1
	if fl.tail < 0 {
		fl.head = idx
	} else {
		q.slots[fl.tail].next = idx
	}
	fl.tail = idx
	n := len(sl.f.Data)
	fl.bytes += n
	q.backlog++
	q.backlogBytes += n
	if fl.list == listNone {
		fl.deficit = rxqQuantum
		q.appendFlow(&q.newFlows, fi, listNew)
	}
}

// popLocked removes the head frame of flow fi; -1 when it has none.
func (q *rxQueue) popLocked(fi int32) int32 {
	fl := &q.flows[fi]
	idx := fl.head
	if idx < 0 {
		return -1
	}
	sl := &q.slots[idx]
	fl.head = sl.next
	if fl.head < 0 {
		fl.tail = -1
	}
	n := len(sl.f.Data)
	fl.bytes -= n
	q.backlog--
	q.backlogBytes -= n
	return idx
}

// dequeueCounts are what one dequeue dropped and marked.
type dequeueCounts struct{ dropped, marked uint64 }

// dequeueLocked appends up to cap(out) slots to out by deficit round
// robin over the flows, new flows first (RFC 8290 §4.2), each flow's
// frames through its AQM (flowDequeueLocked). mono is now.
func (q *rxQueue) dequeueLocked(mono int64, out []int32, c *dequeueCounts) []int32 {
	for len(out) < cap(out) {
		list := &q.newFlows
		if list.head < 0 {
			list = &q.oldFlows
			if list.head < 0 {
				break
			}
		}
		fi := list.head
		fl := &q.flows[fi]
		if fl.deficit <= 0 {
			fl.deficit += rxqQuantum
			q.popFlow(list)
			q.appendFlow(&q.oldFlows, fi, listOld)
			continue
		}
		idx := q.flowDequeueLocked(fi, mono, c)
		if idx < 0 {
			// An emptied new flow goes behind the old ones once, so
			// that a flow cannot stay "new" by emptying each round.
			q.popFlow(list)
			if list == &q.newFlows && q.oldFlows.head >= 0 {
				q.appendFlow(&q.oldFlows, fi, listOld)
			} else {
				fl.list = listNone
			}
			continue
		}
		sl := &q.slots[idx]
		fl.deficit -= len(sl.f.Data)
		waited := mono - sl.arrive
		q.sojourn.add(mono, waited)
		if waited > rxqShedSojourn {
			// As the ring's backlog mark: Prerouting sheds new flows
			// (overload shedding, docs/design.md). A sparse flow's
			// SYN is served before it waits this long.
			sl.f.Backlogged = true
		}
		out = append(out, idx)
	}
	return out
}

// flowDequeueLocked returns flow fi's next frame to serve, or -1 when
// it has none: the flow's CoDel judges each head frame on the time it
// waited and drops it (then the next), marks it CE (if ECN-capable) or
// lets it go (qdisc.CoDel, RFC 8289 §5).
func (q *rxQueue) flowDequeueLocked(fi int32, mono int64, c *dequeueCounts) int32 {
	fl := &q.flows[fi]
	for {
		idx := q.popLocked(fi)
		if idx < 0 {
			fl.codel.Empty()
			return -1
		}
		sl := &q.slots[idx]
		switch fl.codel.Judge(&q.s.codel, mono, mono-sl.arrive, fl.bytes, sl.ect) {
		case qdisc.Drop:
			q.releaseOneLocked(idx)
			c.dropped++
			continue
		case qdisc.Mark:
			qdisc.SetCE(sl.f.Data, int(sl.l3), sl.ipVer)
			c.marked++
		}
		return idx
	}
}

// ecnCapable reports whether a slot's IP packet is ECT(0), ECT(1) or CE
// (RFC 3168 §5): the two low bits of the IPv4 TOS octet, or of the IPv6
// Traffic Class (bits 4 and 5 of the header's second octet).
func ecnCapable(sl *rxSlot) bool {
	d, off := sl.f.Data, int(sl.l3)
	switch {
	case sl.ipVer == 4 && len(d) >= off+header.IPv4MinimumSize:
		return d[off+1]&3 != 0
	case sl.ipVer == 6 && len(d) >= off+header.IPv6MinimumSize:
		return d[off+1]>>4&3 != 0
	}
	return false
}

// dropFattestLocked drops half of the frames (at least one, at most
// rxqDropBatch) from the head of the flow with the most bytes queued, as
// fq_codel does when it is over its limit.
func (q *rxQueue) dropFattestLocked() {
	fat, most := int32(-1), 0
	for _, head := range [2]int32{q.newFlows.head, q.oldFlows.head} {
		for fi := head; fi >= 0; fi = q.flows[fi].link {
			if b := q.flows[fi].bytes; b > most {
				fat, most = fi, b
			}
		}
	}
	if fat < 0 {
		return
	}
	goal := q.flows[fat].bytes / 2
	var dropped uint64
	for i := 0; i < rxqDropBatch; i++ {
		idx := q.popLocked(fat)
		if idx < 0 {
			break
		}
		q.releaseOneLocked(idx)
		dropped++
		if q.flows[fat].bytes <= goal {
			break
		}
	}
	q.s.stats.overlimit.Add(dropped)
}

func (q *rxQueue) appendFlow(l *flowList, fi int32, list uint8) {
	fl := &q.flows[fi]
	fl.link, fl.list = -1, list
	if l.tail < 0 {
		l.head = fi
	} else {
		q.flows[l.tail].link = fi
	}
	l.tail = fi
}

func (q *rxQueue) popFlow(l *flowList) {
	fi := l.head
	l.head = q.flows[fi].link
	if l.head < 0 {
		l.tail = -1
	}
	q.flows[fi].link = -1
}

// classifyLocked returns the flow queue of a slot's frame and notes
// where its IP header is: qdisc.ClassifyFrame's flow (5-tuple, ICMP
// echo identifier, addresses alone for fragments; in-band tags and PPPoE
// skipped), with the outer VLAN the ring header holds, keyed by the
// queue's seed so that no sender can aim at one flow queue.
func (q *rxQueue) classifyLocked(sl *rxSlot) int32 {
	c := qdisc.ClassifyFrame(sl.f.Data, qdisc.HostNone)
	sl.l3, sl.ipVer = c.L3, c.IPVersion
	sl.ect = ecnCapable(sl)
	h := q.seed ^ c.Flow
	if sl.f.VLANValid {
		h ^= uint64(sl.f.VLANTCI&0xfff) << 48
	}
	h *= 0x9e3779b97f4a7c15
	h ^= h >> 32
	h *= 0xbf58476d1ce4e5b9
	return int32((h ^ h>>29) & (rxqFlows - 1))
}
