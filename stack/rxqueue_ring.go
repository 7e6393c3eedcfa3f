package stack

import (
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/qdisc"
)

// Ring mode: the receive queue of a port whose frames carry the kernel's
// receive time (hw.Frame.RxTime: AF_PACKET's rings) keeps its standing
// queue in the ring itself and copies nothing.
//
// Copying every frame of a backlogged port into the queue's slots (the
// copy mode of rxqueue_flows.go) cost af_packet 13-24 % of its bulk
// throughput against no queue at all (docs/performance.md, 2026-12-07):
// the loop's own copy, classification and DRR were ~7 % of the router's
// CPU, the kernel's sendmmsg from a 4 MiB arena cold in cache most of
// the rest. A ring batch already says how long each frame waited (now
// less RxTime), so the queue can judge frames where they lie:
//
//   - A batch whose newest frame waited no longer than the ring CoDel's
//     target goes on untouched: the router keeps up (what its older
//     frames waited was the block filling, or the kernel's retire
//     timer, not a backlog), and every flow's CoDel is told its queue
//     was below target.
//   - Otherwise each frame is classified (qdisc.ClassifyFrame, the flow
//     hash of copy mode) and judged by its flow's CoDel on the time it
//     waited: dropped, marked CE if ECN-capable, or kept (RFC 8289,
//     with rxqRingTarget and rxqRingInterval: the ring's queue is the
//     router's own, crossed by LAN round trips of well under a
//     millisecond, so RFC 8289's 5 ms / 100 ms would let TCP grow the
//     queue to the ring's size first).
//   - If the oldest frame waited longer than rxqRingLimit, half the
//     frames of the batch's largest flow (at most rxqDropBatch, at least
//     one) are dropped from its head, ECN or not: fq_codel's answer to a
//     full queue, before the ring is full and the kernel drops every
//     flow's frames alike.
//   - Sparse flows' frames (fewer than rxqBulkFrames in the batch) go
//     first, bulk flows' after them: a stable partition, and all of a
//     flow's frames in a batch are on one side, so each flow stays in
//     order. A ping, DNS query or handshake waits for the ring's
//     standing queue, which CoDel keeps near its target, but not for its
//     own batch's bulk frames.
//
// Unlike copy mode this is not DRR between flows: a frame waits in FIFO
// order for the batches ahead of it.

// Ring mode tunables.
const (
	// rxqRingTarget is the ring CoDel's target: 2 ms, a few ring
	// blocks of full-size frames at a gigabit and ten LAN round trips,
	// so that a TCP flow keeps the link busy (the queue stays far above
	// its bandwidth-delay product) while a sparse flow behind it waits
	// well under issue 37's 5 ms.
	rxqRingTarget = int64(2e6)
	// rxqRingInterval is the ring CoDel's interval, ten targets (RFC
	// 8289 §4.3: target 5-10 % of interval): a scheduling hiccup of a
	// busy machine that stalls the loop for a few milliseconds costs no
	// drop, a TCP flow growing its window by a segment every
	// sub-millisecond round trip is answered within tens of them.
	rxqRingInterval = int64(20e6)
	// rxqRingLimit is the ring wait past which a batch's largest flow
	// loses half its frames there: 12 ms, under half the ring (16
	// blocks of ~170 full-size frames, ~27 ms at a gigabit), so that
	// the ring never fills while CoDel catches up.
	rxqRingLimit = int64(12e6)
	// rxqBulkFrames is how many frames of one flow in a batch make it a
	// bulk flow there: a ping, a DNS query, a handshake or an
	// interactive flow has one or two in a ring block's time.
	rxqBulkFrames = 4
)

// ringFrame is ring mode's note on one frame of the batch being judged.
type ringFrame struct {
	flow  int32
	l3    uint16
	ipVer uint8
}

// ringCoDel returns ring mode's CoDel parameters.
func ringCoDel() qdisc.CoDelParams {
	p := qdisc.DefaultCoDelParams()
	p.Target, p.Interval = rxqRingTarget, rxqRingInterval
	return p
}

// handleRingMode judges a ring batch of queue q (the batch is
// backlogged: more is behind it) and hands on what it keeps.
func (s *RxQueue) handleRingMode(q *rxQueue, frames []hw.Frame, now time.Time) {
	wall, mono := now.UnixNano(), int64(now.Sub(s.base))
	oldest := ringWait(&frames[0], wall)
	q.mu.Lock()
	q.sojourn.add(mono, oldest)
	q.mu.Unlock()
	// The newest frame's wait is how long the batch sat ready in the
	// ring: the backlog's delay, without the time its block took to
	// fill or to retire on the kernel's timer.
	if ringWait(&frames[len(frames)-1], wall) <= rxqRingTarget {
		q.fresh++
		s.stats.passed.Add(uint64(len(frames)))
		s.next(q.id, frames)
		return
	}
	if cap(q.ring) < len(frames) {
		q.ring = make([]ringFrame, len(frames)) // once per queue, at its largest batch
		q.bulk = make([]hw.Frame, len(frames))
	}
	notes := q.ring[:len(frames)]
	q.epoch++
	fat, fatFrames := int32(-1), int32(0)
	for i := range frames {
		fi, l3, ipVer := q.classifyFrame(&frames[i])
		notes[i] = ringFrame{flow: fi, l3: l3, ipVer: ipVer}
		fl := &q.flows[fi]
		if fl.epoch != q.epoch {
			fl.epoch, fl.batchFrames, fl.batchBytes = q.epoch, 0, 0
			if fl.fresh != q.fresh {
				// A batch below target went by since this flow's
				// last frame was judged.
				fl.fresh = q.fresh
				fl.codel.Empty()
			}
		}
		fl.batchFrames++
		fl.batchBytes += len(frames[i].Data)
		if fl.batchFrames > fatFrames {
			fat, fatFrames = fi, fl.batchFrames
		}
	}
	shed := int32(0)
	if oldest > rxqRingLimit {
		shed = min(max(fatFrames/2, 1), rxqDropBatch)
	}
	var dropped, marked, over uint64
	n, nb := 0, 0
	for i := range frames {
		f := &frames[i]
		note := &notes[i]
		fl := &q.flows[note.flow]
		fl.batchBytes -= len(f.Data)
		bulk := fl.batchFrames >= rxqBulkFrames
		if shed > 0 && note.flow == fat {
			shed--
			over++
			continue
		}
		w := ringWait(f, wall)
		ect := ecnCapable(&rxSlot{f: hw.Frame{Data: f.Data}, l3: note.l3, ipVer: note.ipVer})
		switch fl.codel.Judge(&s.ringCoDel, mono, w, fl.batchBytes, ect) {
		case qdisc.Drop:
			dropped++
			continue
		case qdisc.Mark:
			qdisc.SetCE(f.Data, int(note.l3), note.ipVer)
			marked++
		}
		if w > rxqShedSojourn {
			f.Backlogged = true
		}
		if bulk {
			q.bulk[nb] = *f
			nb++
			continue
		}
		frames[n] = *f
		n++
	}
	n += copy(frames[n:], q.bulk[:nb])
	clear(q.bulk[:nb]) // no view of the ring outlives the batch
	s.stats.passed.Add(uint64(n))
	if dropped > 0 {
		s.stats.dropped.Add(dropped)
	}
	if marked > 0 {
		s.stats.marked.Add(marked)
	}
	if over > 0 {
		s.stats.overlimit.Add(over)
	}
	if n > 0 {
		s.next(q.id, frames[:n])
	}
}

// ringWait is how long f has waited since the kernel received it, 0 if
// it carries no receive time or one that is not believable
// (rxqMaxRingWait).
func ringWait(f *hw.Frame, wall int64) int64 {
	if f.RxTime == 0 {
		return 0
	}
	w := wall - f.RxTime
	if w < 0 || w > rxqMaxRingWait {
		return 0
	}
	return w
}
