package stack

import (
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/qdisc"
)

// The receive queue: the router's own queue for when it is the
// bottleneck (issue 37).
//
// Without it a port's receive loop runs the whole data path (dispatch.go)
// on each ring block before it reads the next, so when the router is
// CPU-bound every frame waits in the kernel's receive ring, a tail-drop
// FIFO of a few MiB: a ping or a TCP handshake waits behind tens of
// milliseconds of bulk frames and is dropped with them when the ring
// overflows. RxQueue moves that wait into memory the router controls:
//
// One goroutine does it all: the port's receive loop for the queue
// (hw.Backlog, hw.BacklogRunner), with no goroutine of the queue's own
// and no hand-off between goroutines.
//
//  1. Read (RxQueue.HandleRing, called by the loop for each batch it
//     reads): a batch that finds the queue empty goes straight on
//     (pass-through: no copy) unless the ring has more ready behind it
//     and it is not small; then, and whenever the queue holds frames,
//     the batch is queued frame by frame in the queue's preallocated
//     slots (rxqueue_flows.go rxQueue.enqueueLocked), each frame in the
//     flow queue of its flow hash, stamped with the kernel's receive
//     time (hw.Frame.RxTime) or the time it was read. A V3 ring block's
//     frames (HoldRing, hw.RingHolder) stay where they lie: the loop
//     hands the block back when the queue holds none of them, or asks
//     the queue to copy those it still holds (LetGo) when it keeps
//     hw.RingHeldBlocks already; other frames (HandleRing) are copied
//     and their ring room goes back at once. The loop reads on while the ring
//     has blocks ready (hw.BacklogReadBlocks at most), so the ring is
//     emptied first and the queue, not the ring, decides what is dropped.
//  2. Serve (RxQueue.ServeBacklog, called by the loop when the ring has
//     nothing ready): takes up to
//     rxqBatch frames at a time by deficit round robin over the flows,
//     sparse flows first (RFC 8290 §4: the new-flows list), applies CoDel
//     to each flow on the time its frames waited (rxQueue.dequeueLocked;
//     an ECN-capable packet is marked CE instead of dropped; CoDel and the
//     flow classifier are package qdisc's)
//     and hands the batch to the next stage (PortInput.HandleBatch) with
//     the port's queue number, on the loop's goroutine, so calls for one
//     queue never overlap and each flow stays in order.
//  3. Full queue: a frame that finds no free slot makes room by dropping
//     from the head of the flow with the largest backlog (RFC 8290 §4.1),
//     or is dropped itself when no flow has one.
//
// Every drop and mark is counted (RxQueue.Stats), per port.

// Receive queue tunables.
const (
	// rxqFlows is the number of flow queues of one receive queue, RFC
	// 8290's default (§5.2.2): enough that a home's flows rarely share
	// one; a power of two for the hash's mask.
	rxqFlows = 1024
	// rxqQuantum is the bytes a flow is served per round of the deficit
	// round robin: one full-size Ethernet frame (RFC 8290 §5.2.3), so a
	// flow of small packets (ACKs, DNS, a ping) gets several per round.
	rxqQuantum = 1514
	// rxqSlots is the number of frames of up to rxqSlotSize one receive
	// queue holds: 2048 x 2 KiB = 4 MiB, as much as the ring in front
	// of it (hw.RingBlocks x hw.RingBlockSize), ~20 ms of full-size
	// frames at 1 Gbit/s, four times CoDel's target of standing queue
	// plus room for a burst.
	rxqSlots = 2048
	// rxqSlotSize is a slot's size: a 1500-byte MTU frame with two tags
	// and room to spare. A port with a larger MTU gets larger slots.
	rxqSlotSize = 2 << 10
	// rxqBigSlots is the number of slots of hw.MaxGSOFrameLen for
	// superframes (vnet ports), made when the first one is queued: 32 x
	// 64 KiB = 2 MiB, about ten ring blocks' worth of them.
	rxqBigSlots = 32
	// rxqBatch is the most frames ServeBacklog takes per dequeue: large
	// enough that per-batch work (a sendmmsg per egress, counters) is
	// spread, small enough that a sparse flow's frame that arrives
	// while a batch runs waits for at most 64 frames' work. Measured
	// in the lab (TestAQMProbeUnderLoad, shared machine): 128, as
	// hw.TxBatchSize, gave no more throughput and a slower probe.
	rxqBatch = 64
	// rxqDropBatch is the most frames one full-queue event drops from
	// the largest flow: fq_codel's drop_batch_size (64), so that a
	// flood does not cost a scan of the flows per frame.
	rxqDropBatch = 64
	// rxqPassFrames and rxqPassBytes bound a batch that may pass
	// straight through an empty queue even with more ready behind it
	// in the ring: a few frames whose work is done in well under a
	// millisecond, so the ring is not left unread for long. A batch
	// with nothing behind it passes whatever its size: the loop has
	// nothing else to read, so a copy would buy no fairness.
	rxqPassFrames = 16
	rxqPassBytes  = 16 << 10
	// rxqMaxRingWait bounds the kernel timestamp the queue believes: a
	// frame stamped more than this before it was read (or after it: the
	// wall clock was stepped) is taken as read now.
	rxqMaxRingWait = int64(time.Second)
	// rxqShedSojourn is the wait after which a dequeued frame is marked
	// hw.Frame.Backlogged, as a ring a quarter full marks its frames
	// (hw.RingBacklogBlocks, about 4 ms): twice CoDel's target, so
	// that the queue CoDel keeps does not shed, and a flood that
	// outruns it does.
	rxqShedSojourn = int64(10 * time.Millisecond)
	// rxqSojournWindow is how long the largest sojourn is remembered
	// for RxQueueStats.MaxSojourn (two windows are kept).
	rxqSojournWindow = int64(time.Second)
	// maxRxQueues bounds the receive queue numbers RxQueue takes, the
	// config's limit on ports[].queues.
	maxRxQueues = 64
)

// RxQueue is the receive queue stage of one port, a hw.Backlog in front
// of next. Each receive queue of the port gets its own flow queues,
// made on its first queued batch.
//
// HandleRing, ServeBacklog and HandleBatch are called as a
// hw.BatchHandler is (one caller per queue number); Stats is safe for
// concurrent use. Close serves what is left once the port's receive
// loop has returned.
type RxQueue struct {
	next hw.BatchHandler
	// on is SetEnabled's: when false every batch goes straight on once
	// what is queued has been served.
	on atomic.Bool
	// slotSize is the size of the slots, at least the port's largest
	// frame.
	slotSize int
	// queues are the receive queues by number, made by their reader.
	queues [maxRxQueues]atomic.Pointer[rxQueue]
	// clock is time.Now; tests replace it before the first batch.
	clock func() time.Time
	base  time.Time
	// codel is every flow's CoDel parameters: RFC 8289's (target 5 ms,
	// interval 100 ms), ECN-capable packets marked instead of dropped.
	codel qdisc.CoDelParams
	stats rxqCounters
}

// rxqCounters are the port's queue counters, added once per batch.
type rxqCounters struct {
	passed, queued, dropped, marked, overlimit, copied atomic.Uint64
}

// RxQueueStats are a port's receive queue counters and gauges.
type RxQueueStats struct {
	// Passed counts frames that went straight through (the queue was
	// empty and the batch small).
	Passed uint64
	// Queued counts frames that went through the queue.
	Queued uint64
	// Dropped counts frames CoDel dropped: they had waited more than
	// the target for a full interval (RFC 8289), and were not
	// ECN-capable.
	Dropped uint64
	// Marked counts ECN-capable packets CoDel marked CE instead of
	// dropping them (RFC 3168).
	Marked uint64
	// Overlimit counts frames dropped because the queue was full: from
	// the head of the largest flow, or the arriving frame itself.
	Overlimit uint64
	// Copied counts queued frames copied out of the port's receive
	// ring: on a port whose loop keeps ring blocks for the queue
	// (hw.RingHolder), those still queued when their block had to go
	// back to the kernel; elsewhere every queued frame.
	Copied uint64
	// Backlog and BacklogBytes are the frames and bytes waiting now.
	Backlog, BacklogBytes int
	// MaxSojourn is the longest a dequeued frame had waited (since the
	// kernel received it) in the last one to two seconds.
	MaxSojourn time.Duration
}

// NewRxQueue returns the receive queue stage in front of next for a port
// whose frames are at most maxFrame bytes (its MTU and
// hw.MaxL2Overhead; superframes aside).
func NewRxQueue(next hw.BatchHandler, maxFrame int) *RxQueue {
	s := &RxQueue{
		next:     next,
		slotSize: max(rxqSlotSize, maxFrame),
		clock:    time.Now,
		codel:    qdisc.DefaultCoDelParams(),
	}
	s.base = s.clock()
	s.on.Store(true)
	return s
}

// SetEnabled turns the queue on or off (config ports[].aqm). Off, a
// batch that finds the queue empty goes straight on whatever its size;
// what is queued when it is turned off is served first, so no flow is
// reordered.
func (s *RxQueue) SetEnabled(on bool) { s.on.Store(on) }

// Enabled reports whether the queue is on.
func (s *RxQueue) Enabled() bool { return s.on.Load() }

var _ hw.Backlog = (*RxQueue)(nil)

// HandleBatch is the stage as a plain hw.BatchHandler, for a port that
// cannot serve a Backlog (TAP): it queues frames as HandleRing does and
// serves the queue empty before it returns, so nothing waits for a
// next batch that may never come.
func (s *RxQueue) HandleBatch(queue int, frames []hw.Frame) {
	s.HandleRing(queue, frames, false)
	for s.ServeBacklog(queue) {
	}
}

// HandleRing implements hw.Backlog. Frames are not used after it
// returns: what is queued is copied.
func (s *RxQueue) HandleRing(queue int, frames []hw.Frame, more bool) {
	s.handle(queue, frames, more, -1)
}

var _ hw.RingHolder = (*RxQueue)(nil)

// HoldRing implements hw.RingHolder: HandleRing without the copy, the
// frames it queues staying where they lie in ring block blk until they
// are served or dropped, or LetGo copies them.
func (s *RxQueue) HoldRing(queue int, frames []hw.Frame, more bool, blk int) {
	if blk < 0 || blk >= hw.RingBlocks {
		blk = -1
	}
	s.handle(queue, frames, more, blk)
}

// Holding implements hw.RingHolder.
func (s *RxQueue) Holding(queue, blk int) int {
	if queue < 0 || queue >= maxRxQueues || blk < 0 || blk >= hw.RingBlocks {
		return 0
	}
	q := s.queues[queue].Load()
	if q == nil {
		return 0
	}
	// Only the queue's loop changes the counts, and it is the caller.
	return int(q.ringRefs[blk])
}

// LetGo implements hw.RingHolder: the frames of block blk still queued
// are copied into the queue's slots (counted in RxQueueStats.Copied).
func (s *RxQueue) LetGo(queue, blk int) {
	if queue < 0 || queue >= maxRxQueues || blk < 0 || blk >= hw.RingBlocks {
		return
	}
	q := s.queues[queue].Load()
	if q == nil || q.ringRefs[blk] == 0 {
		return
	}
	q.mu.Lock()
	n := q.letGoLocked(int8(blk))
	q.mu.Unlock()
	s.stats.copied.Add(uint64(n))
}

// handle is HandleRing (blk -1: copy what is queued) and HoldRing.
func (s *RxQueue) handle(queue int, frames []hw.Frame, more bool, blk int) {
	if len(frames) == 0 {
		return
	}
	if queue < 0 || queue >= maxRxQueues {
		s.next(queue, frames)
		return
	}
	// Only this queue's loop changes its backlog, so it reads it
	// without the lock.
	q := s.queues[queue].Load()
	if (q == nil || q.backlog == 0) && (!s.on.Load() || !more || passThrough(frames)) {
		s.stats.passed.Add(uint64(len(frames)))
		s.next(queue, frames)
		return
	}
	if q == nil {
		q = newRxQueue(s, queue)
		s.queues[queue].Store(q)
	}
	now := s.clock()
	q.mu.Lock()
	n := q.enqueueLocked(frames, now.UnixNano(), int64(now.Sub(s.base)), int8(blk))
	q.mu.Unlock()
	s.stats.queued.Add(uint64(n))
	if n < len(frames) {
		s.stats.overlimit.Add(uint64(len(frames) - n))
	}
}

// passThrough reports whether a batch is small enough to skip an empty
// queue.
func passThrough(frames []hw.Frame) bool {
	if len(frames) > rxqPassFrames {
		return false
	}
	n := 0
	for i := range frames {
		n += len(frames[i].Data)
	}
	return n <= rxqPassBytes
}

// Close serves what the queues still hold. Call it after the port's
// receive loop has returned.
func (s *RxQueue) Close() {
	for i := range s.queues {
		for s.ServeBacklog(i) {
		}
	}
}

// Stats returns the port's queue counters, summed over its receive
// queues.
func (s *RxQueue) Stats() RxQueueStats {
	st := RxQueueStats{
		Passed:    s.stats.passed.Load(),
		Queued:    s.stats.queued.Load(),
		Dropped:   s.stats.dropped.Load(),
		Marked:    s.stats.marked.Load(),
		Overlimit: s.stats.overlimit.Load(),
		Copied:    s.stats.copied.Load(),
	}
	mono := int64(s.clock().Sub(s.base))
	for i := range s.queues {
		q := s.queues[i].Load()
		if q == nil {
			continue
		}
		q.mu.Lock()
		st.Backlog += q.backlog
		st.BacklogBytes += q.backlogBytes
		st.MaxSojourn = max(st.MaxSojourn, time.Duration(q.sojourn.max(mono)))
		q.mu.Unlock()
	}
	return st
}

// ServeBacklog implements hw.Backlog: it hands up to rxqBatch frames of
// queue's flows to the next stage and reports whether it handed any.
func (s *RxQueue) ServeBacklog(queue int) bool {
	if queue < 0 || queue >= maxRxQueues {
		return false
	}
	q := s.queues[queue].Load()
	if q == nil || q.backlog == 0 {
		return false
	}
	now := s.clock()
	mono := int64(now.Sub(s.base))
	var c dequeueCounts
	q.mu.Lock()
	q.held = q.dequeueLocked(mono, q.held[:0], &c)
	n := len(q.held)
	for i, idx := range q.held {
		q.batch[i] = q.slots[idx].f
	}
	q.mu.Unlock()
	if c.dropped > 0 {
		s.stats.dropped.Add(c.dropped)
	}
	if c.marked > 0 {
		s.stats.marked.Add(c.marked)
	}
	if n == 0 {
		return c.dropped > 0
	}
	s.next(q.id, q.batch[:n])
	clear(q.batch[:n]) // no view of a slot outlives its batch
	q.mu.Lock()
	q.releaseLocked(q.held)
	q.mu.Unlock()
	q.held = q.held[:0]
	return true
}

// sojournMax is the largest sojourn of the current and the previous
// window of rxqSojournWindow.
type sojournMax struct {
	window   int64 // current window number
	cur, old int64
}

func (m *sojournMax) add(mono, d int64) {
	m.roll(mono)
	m.cur = max(m.cur, d)
}

func (m *sojournMax) roll(mono int64) {
	w := mono / rxqSojournWindow
	switch {
	case w == m.window:
	case w == m.window+1:
		m.old, m.cur, m.window = m.cur, 0, w
	default:
		m.old, m.cur, m.window = 0, 0, w
	}
}

func (m *sojournMax) max(mono int64) int64 {
	m.roll(mono)
	return max(m.cur, m.old)
}
