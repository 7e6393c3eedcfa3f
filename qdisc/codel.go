package qdisc

import "math"

// CoDel defaults from RFC 8289 §4.3 (target) and §4.2 (interval): 5 ms is the
// acceptable standing queue, 100 ms covers the round trips of most Internet paths.
const (
	DefaultTarget   = 5_000_000   // ns
	DefaultInterval = 100_000_000 // ns
	// DefaultMaxPacket is an Ethernet frame with one VLAN tag: the "MTU-sized
	// packet" of RFC 8289 §5 (maxpacket) below which a queue is never judged.
	DefaultMaxPacket = 1518
)

// CoDelParams are the knobs of RFC 8289 §4. Times are nanoseconds.
type CoDelParams struct {
	// Target is the acceptable standing queue delay, e.g. 5_000_000 (5 ms).
	Target int64
	// Interval is the sliding window in which the minimum delay must stay
	// above Target before dropping starts, e.g. 100_000_000 (100 ms).
	Interval int64
	// MaxPacket is the byte count of one MTU-sized packet, e.g. 1518: a queue
	// holding no more than this is never dropped from (RFC 8289 §5, bytes() <= maxpacket_).
	MaxPacket int
	// ECN marks ECN-capable packets CE instead of dropping them (RFC 8289 §5.4 "mark").
	ECN bool
	// MarkLimit is the sojourn, e.g. 100_000_000 (100 ms), from which an
	// ECN-capable packet is dropped instead of sent while the controller
	// is dropping: its sender has had marks for a while and its queue
	// still holds more than a round trip, so the marks are not slowing it
	// (a sender that ignores ECE, as Linux BBR v1 does; RFC 3168 §7 marks
	// only instead of a drop for incipient congestion, not on overload).
	// Without it such a flow keeps its queue until the pool overflows.
	// 0 means no limit (RFC 8289 as printed); FQCoDel's default is Interval.
	MarkLimit int64
}

// DefaultCoDelParams returns RFC 8289's recommended parameters with ECN on.
func DefaultCoDelParams() CoDelParams {
	return CoDelParams{Target: DefaultTarget, Interval: DefaultInterval, MaxPacket: DefaultMaxPacket, ECN: true}
}

// Verdict is CoDel's decision on one dequeued packet.
type Verdict uint8

const (
	// Deliver means send the packet; this dequeue is over.
	Deliver Verdict = iota
	// Drop means free the packet and Judge the next head packet of the
	// same queue (the RFC's "while" loop continues).
	Drop
	// Mark means set ECN CE on the packet and send it; this dequeue is
	// over. Judge returns Mark only when the params enable ECN and the
	// caller said ect.
	Mark
)

// String returns the verdict's name.
func (v Verdict) String() string {
	switch v {
	case Deliver:
		return "deliver"
	case Drop:
		return "drop"
	case Mark:
		return "mark"
	}
	return "invalid"
}

// phase says where a dequeue is inside RFC 8289's dequeue(): first packet,
// inside the "while (now >= drop_next_ && dropping_)" loop after a drop, or
// the packet after the drop that entered the dropping state.
const (
	phaseFirst uint8 = iota
	phaseLoop
	phaseAfterEnter
)

// CoDel is the state of one queue's controller (RFC 8289 §5 "Per-queue
// state"): the queue itself belongs to the caller, which keeps packets with
// their enqueue times. The zero value is a queue that has never dropped.
//
// One dequeue is a sequence of Judge calls, one per packet popped from the
// head, that ends with Deliver or Mark, or with Empty when the queue runs dry:
//
//	for {
//		p, ok := q.pop()
//		if !ok {
//			c.Empty()
//			return nil
//		}
//		switch c.Judge(&params, now, now-p.enqueued, q.bytes(), p.ect()) {
//		case Drop:
//			free(p)
//			continue
//		case Mark:
//			p.setCE()
//		}
//		return p
//	}
//
// This is the RFC's dequeue()/dodequeue() pseudocode with the packet loop
// turned inside out so the caller's queue needs no interface and no callback.
// CoDel is not safe for concurrent use; its owner is the queue's owner.
type CoDel struct {
	firstAboveTime int64 // first_above_time_: when sojourn may first be judged persistently high, 0 if below
	dropNext       int64 // drop_next_: time of the next drop while dropping
	count          uint32
	lastCount      uint32
	dropping       bool
	phase          uint8
}

// Dropping reports whether the controller is in the dropping state.
func (c *CoDel) Dropping() bool { return c.dropping }

// Count is the number of drops (and marks) since entering the dropping state
// (count_ in RFC 8289), which sets the spacing interval/sqrt(count).
func (c *CoDel) Count() uint32 { return c.count }

// DropNext is the time of the next drop while Dropping.
func (c *CoDel) DropNext() int64 { return c.dropNext }

// Empty tells the controller the queue had no packet to dequeue: the delay
// cannot be above target (dodequeue's NULL branch) and dropping stops. As in
// the RFC, running dry right after the drop that entered the dropping state
// leaves the state set until the next dequeue finds the queue below target.
func (c *CoDel) Empty() {
	c.firstAboveTime = 0
	if c.phase != phaseAfterEnter {
		c.dropping = false
	}
	c.phase = phaseFirst
}

// okToDrop is dodequeue's test: sojourn must have stayed at or above target
// for a full interval, with more than one packet's worth left in the queue.
// backlog is the byte count still queued after this packet was removed.
func (c *CoDel) okToDrop(p *CoDelParams, now, sojourn int64, backlog int) bool {
	if sojourn < p.Target || backlog <= p.MaxPacket {
		c.firstAboveTime = 0
		return false
	}
	if c.firstAboveTime == 0 {
		c.firstAboveTime = now + p.Interval
		return false
	}
	return now >= c.firstAboveTime
}

// controlLaw is RFC 8289's control_law(): the next drop comes interval/sqrt(count) after t.
func controlLaw(p *CoDelParams, t int64, count uint32) int64 {
	return t + int64(float64(p.Interval)/math.Sqrt(float64(count)))
}

// Judge decides about one packet just removed from the head of the queue at
// time now (ns, monotonic). sojourn is now minus its enqueue time, backlog the
// bytes left in the queue without it, ect whether it is ECN-capable (ECT(0),
// ECT(1) or already CE). Judge advances the RFC 8289 state machine; on Drop the
// caller frees the packet and judges the next head packet with the same now.
//
// With ECN and MarkLimit set, an ECT packet that waited MarkLimit or more
// while the controller is dropping, with more than MaxPacket behind it, is
// dropped whatever the schedule: the state machine, count and the next
// mark's time are as if the packet had never been queued, so the control
// law keeps its pace for the packets below the limit. A Drop of an ECT
// packet with ECN on is always such an overload drop.
func (c *CoDel) Judge(p *CoDelParams, now, sojourn int64, backlog int, ect bool) Verdict {
	ok := c.okToDrop(p, now, sojourn, backlog)
	if ok && c.dropping && p.ECN && ect && p.MarkLimit > 0 && sojourn >= p.MarkLimit {
		return Drop
	}
	switch c.phase {
	case phaseAfterEnter:
		// The packet dequeued after the drop that started a dropping
		// state is always sent (the RFC returns it after "r = dodequeue(now)").
		c.phase = phaseFirst
		return Deliver
	case phaseLoop:
		// Inside the while loop, after "r = dodequeue(now)".
		if !ok {
			c.dropping = false
			c.phase = phaseFirst
			return Deliver
		}
		c.dropNext = controlLaw(p, c.dropNext, c.count)
		return c.loop(p, now, ect)
	}
	if c.dropping {
		if !ok {
			// Sojourn went below target: leave the dropping state.
			c.dropping = false
			return Deliver
		}
		return c.loop(p, now, ect)
	}
	if !ok {
		return Deliver
	}
	// Enter the dropping state. If it was left only recently, resume near the
	// old drop rate (RFC 8289 §5, the Linux variant the RFC prints): count
	// restarts at the number of drops of the last cycle.
	delta := c.count - c.lastCount
	c.count = 1
	if delta > 1 && now-c.dropNext < 16*p.Interval {
		c.count = delta
	}
	c.dropNext = controlLaw(p, now, c.count)
	c.lastCount = c.count
	c.dropping = true
	if p.ECN && ect {
		c.phase = phaseFirst
		return Mark
	}
	c.phase = phaseAfterEnter
	return Drop
}

// loop is one test of "while (now >= drop_next_ && dropping_)": drop (count
// it), or mark and schedule the next drop, or deliver.
func (c *CoDel) loop(p *CoDelParams, now int64, ect bool) Verdict {
	if now < c.dropNext {
		c.phase = phaseFirst
		return Deliver
	}
	if c.count < math.MaxUint32 {
		c.count++
	}
	if p.ECN && ect {
		// A marked packet is sent, so no next packet is judged in this
		// dequeue: schedule the next drop now, as the loop would have.
		c.dropNext = controlLaw(p, c.dropNext, c.count)
		c.phase = phaseFirst
		return Mark
	}
	c.phase = phaseLoop
	return Drop
}
